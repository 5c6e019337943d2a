# The two set-up commands of the README: `make demo` and `make test`.
SHELL := /bin/bash
export PYSPARK_PYTHON := $(CURDIR)/.venv/bin/python
export SPARK_LOCAL_IP := 127.0.0.1
export NUMBA_CACHE_DIR := $(CURDIR)/.venv/numba-cache
export GX_ANALYTICS_ENABLED := False

.PHONY: venv demo test lint bench samples kafka

venv:
	@scripts/bootstrap

demo: venv
	.venv/bin/segpipe inspect data/samples
	.venv/bin/segpipe dump data/samples --limit 5
	rm -rf out/samples-cleaned
	.venv/bin/segpipe clean data/samples out/samples-cleaned --config conf/samples.yaml \
		--now-ms 1700700000000 --master "local[2]"
	.venv/bin/segpipe inspect out/samples-cleaned

test: venv
	.venv/bin/python -m pytest -q

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
