"""The command-line arguments the Spark jobs share: topic configs, `now`, reports, Spark."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from typing import TYPE_CHECKING, Any

from pipelines.cli import console
from pipelines.cli.source_args import object_store_urls
from pipelines.clock import parse_time
from pipelines.errors import SegpipeError
from pipelines.runtime.faults import fault_point
from segment_io.exit_codes import ExitCode

if TYPE_CHECKING:
    from pipelines.runtime.local_workers import LocalWorkers


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML file with 'defaults:' and 'topics:' maps of Kafka topic configs")
    p.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="topic config for every topic"
    )
    p.add_argument("--topic-set", action="append", default=[], metavar="TOPIC:NAME=VALUE")


def add_suite_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="FILE.json",
        help="also run this great-expectations suite (as GE saves it; its meta.segpipe names the topics and "
        "how keys and values read: README) over the records; repeat for more",
    )


CLOCK_DEFAULT = (
    "the clock at the start of the run, so an old archive can lose everything to retention.ms "
    "(7 days by default)"
)


def add_now_argument(p: argparse.ArgumentParser, rules: str, default: str = CLOCK_DEFAULT) -> None:
    p.add_argument(
        "--now",
        "--now-ms",
        dest="now",
        metavar="TIME",
        help=f"the 'now' every time rule ({rules}) is applied at: epoch ms or ISO-8601 "
        f"(2026-11-23T12:00:00Z). Default: {default}",
    )


def add_spark_arguments(p: argparse.ArgumentParser, job_module: str | None = None) -> None:
    """The Spark options; `job_module`: the module whose work the command's local worker processes
    run, for workers_forked_early to preload."""
    p.set_defaults(job_module=job_module)
    p.add_argument("--master", help="Spark master (default: local[*], or spark-submit's)")
    p.add_argument(
        "--spark-remote",
        metavar="sc://HOST:PORT",
        help="run on this Spark Connect server (default: PySpark's SPARK_REMOTE, when set and no --master)",
    )
    p.add_argument(
        "--conf", action="append", default=[], metavar="NAME=VALUE", help="a Spark setting (spark.*)"
    )


def now_from(args: argparse.Namespace) -> int | None:

    return None if args.now is None else parse_time(args.now, "--now")


ON_CORRUPT = ("fail", "skip-partition")


def add_on_corrupt(p: Any) -> None:
    """--on-corrupt, as every command that writes a log from another takes it."""

    p.add_argument(
        "--on-corrupt",
        choices=ON_CORRUPT,
        default="fail",
        help="bad data: stop the run (fail, the default) or leave that partition out of DST whole, name it, "
        f"and exit {ExitCode.SKIPPED} (skip-partition)",
    )


# The module each command's run imports in the driver while the JVM starts (its job, whose workers'
# modules it names), by command: the one place a job's module path is spelled for the hallway.
JOB_MODULES = {
    "clean": "pipelines.jobs.clean",
    "erase": "pipelines.jobs.erase.job",
    "erase-proof": "pipelines.jobs.erase.proof",
    "cut": "pipelines.jobs.cut.job",
    "tier": "pipelines.jobs.tier",
    "restore": "pipelines.jobs.tier.restore",
    "run": "pipelines.run.runner",
}

# What validation imports in the driver: great-expectations takes 5-6 s to import (measured), so
# a command that validates imports it while the JVM starts.
VALIDATION_MODULES = ("pipelines.jobs.validate", "great_expectations")


@contextmanager
def spark_run(args: argparse.Namespace, *job_modules: str) -> Iterator[Any]:
    """The SparkSession of a job run from the command line (classic, or Spark Connect), its
    start-up noise held back; the master is checked (and Spark settings parsed) before anything
    starts; `job_modules` are imported while Spark starts."""
    from pipelines.runtime.command import spark_for_command
    from pipelines.runtime.connect import remote_url
    from pipelines.runtime.session import check_master, spark_settings

    settings = spark_settings(args.conf)
    remote = remote_url(args.master, args.spark_remote)
    check_master(args.master)
    log_level = "info" if console.level() >= console.VERBOSE else "warn"
    with (
        console.held_back_noise() as terminal,
        spark_for_command(job_modules, args.master, settings, log_level, remote) as spark,
        console.progress(spark, terminal),
    ):
        yield spark


def local_master_cores(args: argparse.Namespace) -> int | None:
    """The cores of the run's master where it is local and work may run in the driver's own
    processes (runtime.local_workers), else None (the settings are checked on the way)."""
    from pipelines.runtime.connect import remote_url
    from pipelines.runtime.local_workers import local_cores
    from pipelines.runtime.session import spark_settings
    from pipelines.runtime.tasks import driver_work

    settings = spark_settings(args.conf)
    cores = local_cores(args.master, settings, remote_url(args.master, args.spark_remote))
    return cores if driver_work() else None


# The run's worker processes, where workers_forked_early forked them, for spark_on_demand to take.
_forked_early: list[LocalWorkers] = []


@contextmanager
def workers_forked_early(args: argparse.Namespace) -> Iterator[None]:
    """With a local master, a run that names an object store gets its worker processes forked
    before anything else: the store's client starts an I/O thread with its first request (the
    refusals' listing), and a process with a second thread forks them from a server that imports
    segpipe again (runtime.local_workers: about 2 s of CPU). spark_on_demand takes them; a run
    that ends before (refused) kills them. Anything the check raises is raised by the run itself."""
    module: str | None = getattr(args, "job_module", None)
    try:
        cores = local_master_cores(args) if module and object_store_urls(args) else None
    except SegpipeError:  # the run refuses its settings itself, with nothing started
        cores = None
    if module is None or cores is None:
        yield
        return
    from pipelines.runtime.local_workers import LocalWorkers
    from segment_io.storage import load_client

    for url in object_store_urls(args):
        with suppress(Exception):  # a scheme no client serves: the run names it in its refusal
            load_client(url)  # once here rather than in every process (s3fs: about a second)
    local = LocalWorkers(cores, [module])
    try:
        if local.fork_here():  # else another thread runs already: spark_on_demand starts them later
            _forked_early.append(local)
        yield
    finally:
        _forked_early.clear()
        local.kill()  # nothing where the run took them (it closed them)


def _workers(cores: int | None, job_modules: tuple[str, ...]) -> LocalWorkers | None:
    """The run's worker processes: those forked early, else new ones (started later)."""
    from pipelines.runtime.local_workers import LocalWorkers

    if cores is None:
        return None
    if _forked_early:
        return _forked_early.pop()
    # The processes preload the job's own module (the first named): its tasks' modules come with it.
    return LocalWorkers(cores, job_modules[:1])


@contextmanager
def spark_on_demand(
    args: argparse.Namespace, needed: bool, *job_modules: str, local_likely: bool = False
) -> Iterator[Any]:
    """A LazySpark over spark_run's session: started at first use, or at once where the run will
    `need` it (the JVM then starts while `job_modules` are imported). With a local master it
    carries the driver's own worker processes (runtime.local_workers), started at once where
    the run will likely use them (`local_likely`). The master and Spark settings are checked
    before anything starts either way, and Ctrl-C and SIGTERM stop the run from the start."""
    from pipelines.runtime.session import LazySpark, check_master
    from pipelines.runtime.stop import interrupt_cancels_jobs

    fault_point("before-spark")  # refusals done, nothing written, no Spark and no run handlers yet
    cores = local_master_cores(args)
    check_master(args.master)
    local = _workers(cores, job_modules)
    with ExitStack() as stack:
        if local is not None:
            stack.callback(local.close)
        lazy = LazySpark(lambda: stack.enter_context(spark_run(args, *job_modules)), local)
        interrupt_cancels_jobs(lazy)
        if needed:
            lazy.session()
        elif local_likely and local is not None:
            local.start()
        yield lazy


@contextmanager
def workers_for(args: argparse.Namespace, *job_modules: str, spark_needed: bool = False) -> Iterator[Any]:
    """spark_on_demand for a run whose stages all have work: with a local master they run in
    the driver's own processes, started at once, and Spark starts only for what needs it (an
    operator suite: `spark_needed`, or a stage found to need it); with any other master Spark
    starts with the run."""
    local = local_master_cores(args) is not None
    with spark_on_demand(args, spark_needed or not local, *job_modules, local_likely=local) as spark:
        yield spark
