"""Placeholder removed once `clean` lands."""

from __future__ import annotations

import argparse
from typing import Any


def add_clean_parser(sub: Any) -> None:
    del sub


def _unused(args: argparse.Namespace) -> int:
    return 0
