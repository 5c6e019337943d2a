"""The worker daemon may only fork from a single-threaded process: its preloads start no thread."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_preloading_the_worker_modules_leaves_one_thread() -> None:
    code = "import pipelines.worker_daemon as w; w._preload(); print(w._threads())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
