"""`segpipe config describe`: every topic config segpipe honours, with type, default and meaning;
`--tuning`: the tuning settings (how a run works, set by environment variables) instead."""

from __future__ import annotations

import argparse
import json
from typing import Any

from segment_io.exit_codes import ExitCode


def add_parser(sub: Any) -> None:
    p = sub.add_parser("config", help="the topic configs segpipe honours")
    actions = p.add_subparsers(dest="action", required=True)
    d = actions.add_parser("describe", help="name, type, default and meaning of every topic config")
    d.add_argument("--json", action="store_true", help="machine-readable list")
    d.add_argument(
        "--tuning",
        action="store_true",
        help="the tuning settings instead: how a run works (where work runs, when a key list is joined), "
        "each set by an environment variable",
    )
    d.set_defaults(func=run_describe)


def run_describe(args: argparse.Namespace) -> int:
    from pipelines.config import describe
    from pipelines.config.tuning import describe_tuning

    rows: list[dict[str, Any]] = list(describe_tuning() if args.tuning else describe())
    if args.json:
        print(json.dumps(rows, indent=2))
        return ExitCode.OK
    for row in rows:
        kind = f"${row['env']}: {row['type']}" if args.tuning else row["type"]
        print(f"{row['name']}  ({kind}, default {row['default']})")
        print(f"    {row['doc']}")
    return ExitCode.OK
