"""`segpipe restore-kafka`: a log directory (a clean's output, an archive) into a stopped Kafka
broker's log directory whose topics exist, as the README's "Restoring into Kafka" says."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipelines.cli import console
from pipelines.clock import clock_ms
from pipelines.errors import ConfigError
from pipelines.runtime.faults import fault_point
from segment_io.exit_codes import ExitCode


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "restore-kafka",
        help="put a log directory's partitions into a stopped Kafka broker's log dir (topics created first)",
    )
    p.add_argument("archive", help="the log directory to restore (local), e.g. segpipe clean's output")
    p.add_argument(
        "log_dir", help="the stopped broker's log directory (log.dirs), holding the topics' partitions"
    )
    p.add_argument(
        "--backup",
        metavar="DIR",
        help="where the replaced files and checkpoints go (default: LOG_DIR.segpipe-backup-<epoch ms>, "
        "beside the log directory; never inside it, where Kafka would load it)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.runtime.stop import publishing, stop_handlers
    from segment_io.kafka_restore import restore_into_kafka
    from segment_io.text import counted

    stop_handlers()  # a stop while the broker's files are replaced waits for the replacement

    for given in (args.archive, args.log_dir):
        if "://" in given and not given.startswith("file://"):
            raise ConfigError(
                f"restore-kafka works on local directories, and {given} is not one: bring a remote "
                "archive to a local disk first (segpipe restore REMOTE_URL DST, or a copy)"
            )
    log_dir = Path(args.log_dir.removeprefix("file://"))
    backup = (
        Path(args.backup) if args.backup else log_dir.with_name(f"{log_dir.name}.segpipe-backup-{clock_ms()}")
    )

    @contextmanager
    def replacing() -> Iterator[None]:
        with publishing(str(log_dir)):
            fault_point("mid-restore-kafka")
            yield

    summary = restore_into_kafka(Path(args.archive.removeprefix("file://")), log_dir, backup, replacing)
    console.say(
        f"segpipe: restored {counted(len(summary.partitions), 'partition')} ({summary.files} files, "
        f"{summary.bytes / 2**20:,.1f} MB) into {log_dir}; the replaced files are in {summary.backup}. "
        "Start the broker."
    )
    return ExitCode.OK
