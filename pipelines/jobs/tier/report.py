"""What a `tier` run did: per partition the plan, and the run's uploads, releases and times."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pipelines.output.report import MB
from segment_io.remote.manifest import RemoteSegment
from segment_io.text import counted


@dataclass
class TierReport:
    log_dir: str
    remote: str
    now_ms: int
    dry_run: bool
    plans: list[dict[str, Any]] = field(default_factory=list)  # per partition, what the run decided
    segments_uploaded: int = 0
    bytes_uploaded: int = 0  # every object: segments, indexes, snapshots
    local_bytes_removed: int = 0
    seconds_total: float = 0.0
    seconds_by_stage: dict[str, float] = field(default_factory=dict)

    def add_uploads(self, uploaded: dict[int, list[RemoteSegment]]) -> None:
        for segments in uploaded.values():
            self.segments_uploaded += len(segments)
            self.bytes_uploaded += sum(o.size for s in segments for o in s.objects.values())

    def total(self, name: str) -> int:
        return sum(len(p[name]) if isinstance(p[name], list) else int(p[name]) for p in self.plans)

    @property
    def upload_mb_per_s(self) -> float:
        seconds = self.seconds_by_stage.get("upload", 0.0)
        return self.bytes_uploaded / MB / seconds if seconds else 0.0

    def totals_line(self) -> str:
        head = f"segpipe: {counted(len(self.plans), 'partition')}"
        deleted = self.total("remote_deleted") + self.total("local_deleted")
        if self.dry_run:
            return (
                f"{head}; dry run: would upload {self.total('upload'):,} segments, release "
                f"{self.total('local_released'):,} local copies, delete {deleted:,} segments by retention; "
                "nothing written"
            )
        return (
            f"{head}; uploaded {self.segments_uploaded:,} segments ({self.bytes_uploaded / MB:,.1f} MB, "
            f"{self.upload_mb_per_s:,.1f} MB/s, each object read back and checked); released "
            f"{self.total('local_released'):,} local copies; retention deleted {deleted:,} segments; "
            f"{self.local_bytes_removed / MB:,.1f} MB freed locally; {self.seconds_total:,.1f} s"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "upload_mb_per_s": self.upload_mb_per_s}

    def rows(self) -> list[dict[str, Any]]:
        return list(self.plans)
