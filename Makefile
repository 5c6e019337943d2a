# The two set-up commands of the README: `make demo` and `make test`.
SHELL := /bin/bash
export PYSPARK_PYTHON := $(CURDIR)/.venv/bin/python
export SPARK_LOCAL_IP := 127.0.0.1
export NUMBA_CACHE_DIR := $(CURDIR)/.venv/numba-cache
export GX_ANALYTICS_ENABLED := False

.PHONY: venv demo test lint bench samples kafka cluster

venv:
	@scripts/bootstrap

# The samples are small enough for the driver's own threads (no Spark at all); the demo's clean
# runs them on local Spark (SEGPIPE_DRIVER_WORK=off), the path a larger log takes.
demo: venv
	.venv/bin/segpipe inspect data/samples
	.venv/bin/segpipe dump data/samples --limit 5
	rm -rf out/samples-cleaned
	SEGPIPE_DRIVER_WORK=off .venv/bin/segpipe clean data/samples out/samples-cleaned \
		--config conf/samples.yaml --now-ms 1700700000000 --master "local[2]"
	.venv/bin/segpipe inspect out/samples-cleaned

# Two test files at a time (pytest-xdist; a file's tests stay together, with the servers its
# fixtures start), the slowest files first (tests/conftest.py). --no-loadscope-reorder keeps that
# order: by default xdist hands out the files with the most tests first, which left the slowest
# (a broker's one 90 s test, the Airflow and Connect files) to the end, one core idle meanwhile.
# Measured on 2 cores, 735-740 tests: 15.3-16.5 min reordered by xdist, 13.9-15.4 min in this order.
test: venv
	.venv/bin/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

lint: venv
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

bench: venv
	.venv/bin/python bench/segment_io_bench.py

samples: venv
	rm -rf data/samples && .venv/bin/segpipe generate data/samples

# Apache Kafka's own broker for the tests marked `kafka`: fetches its jars through Maven into
# ~/.cache/segpipe (outside the repository) and prints how to run one by hand.
kafka: venv
	.venv/bin/python -m tests.kafka.broker

# A Spark standalone master and two workers on 127.0.0.1 (README "Running on a cluster"); Ctrl-C stops them.
cluster: venv
	.venv/bin/python -m tests.cluster.standalone
