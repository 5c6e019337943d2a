"""The command-line arguments every Spark command shares."""

from __future__ import annotations

import argparse


def add_spark_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", help="Spark master (default: local[*], or spark-submit's)")
    p.add_argument(
        "--conf", action="append", default=[], metavar="NAME=VALUE", help="a Spark setting (spark.*)"
    )
