"""The set-up's kernel build (pipelines/cli/kernel_build.py) runs command lines the command line
accepts: a flag renamed or removed would otherwise leave its kernels to the first run, silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.cli.kernel_build import workload
from pipelines.cli.main import build_parser

pytestmark = pytest.mark.unit


def test_every_command_line_of_the_workload_parses(tmp_path: Path) -> None:
    commands = workload(tmp_path)
    assert {argv[0] for argv in commands} >= {"clean", "validate", "erase", "tier", "restore"}
    for argv in commands:
        args = build_parser().parse_args(["--quiet", *argv])  # exits 2 on a flag it does not know
        assert args.command == argv[0]
