"""Which partitions a clean compacts inside one task: few enough keyed records for a task's
budget, and no more bytes than a core's share of the run."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.jobs.clean.alone import ALONE_ROWS, alone_partitions
from pipelines.jobs.clean.keymap import KeyTask
from segment_io.layout import SegmentFiles
from segment_io.storage.base import FileInfo

pytestmark = pytest.mark.unit


def test_which_partitions_are_compacted_alone() -> None:
    def task(tp: int, size: int, records: int) -> KeyTask:
        log = FileInfo(f"{tp}/0.log", "0.log", size, 0, False)
        return KeyTask(tp, tp, "memory://", SegmentFiles(0, log), np.zeros(0, np.int64), 0, records)

    tasks = [task(0, 100, 10), task(1, 100, 10), task(2, 500, 10), task(3, 100, ALONE_ROWS + 1)]
    gids = {0: [0], 1: [1], 2: [2], 3: [3], 4: [4]}  # partition 4: groups but no keyed records
    chosen = alone_partitions(tasks, gids, parallelism=2)  # a core's share: 400 bytes
    assert sorted(chosen) == [0, 1, 4]
    assert chosen[4].tasks == () and chosen[4].gids == (4,)
