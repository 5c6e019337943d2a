"""`segpipe`: the command line. Every command module adds its parser; errors become exit codes
here, in one place (pipelines.errors), with a one-line message and never a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pipelines.cli import clean, config, dump, generate, inspect
from pipelines.errors import EXIT_OK, SegpipeError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="segpipe", description="Kafka log archive maintenance")
    sub = parser.add_subparsers(dest="command", required=True)
    inspect.add_parser(sub)
    dump.add_parser(sub)
    generate.add_parser(sub)
    clean.add_parser(sub)
    config.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SegpipeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # the reader of our output went away (`segpipe dump | head`)
        return EXIT_OK
