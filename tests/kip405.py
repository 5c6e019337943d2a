"""The Kafka remote tiers in tests/data/kip405 (what a broker wrote through Aiven's plugin), set up
for a test: their settings with real paths, their bucket copied where a test damages it, and the
records their README says were produced."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from segment_io.layout import list_log_dir
from segment_io.segment.reader import SegmentReader
from segment_io.storage import Storage

KIP405 = Path(__file__).parent / "data" / "kip405"
PLAIN, ENCRYPTED = "aiven-plain", "aiven-zstd-aes"


@dataclass(frozen=True)
class Tier:
    name: str
    logdir: Path
    bucket: Path
    settings: Path

    @property
    def produced(self) -> dict[tuple[int, int], tuple[bytes, bytes]]:
        return produced(self.name)


def settings_text(name: str, bucket: Path, keys: Path) -> str:
    text = (KIP405 / name / "broker-tiered-storage.properties").read_text()
    return text.replace("${BUCKET}", str(bucket)).replace("${KEYS}", str(keys))


def with_backend(name: str, backend: str, path: Path) -> Path:
    """The fixture's broker settings written to `path` with another storage backend: its
    `rsm.config.storage.*` lines replaced by `backend` (the objects copied into that store)."""
    lines = (KIP405 / name / "broker-tiered-storage.properties").read_text().splitlines()
    kept = [line for line in lines if not line.startswith("rsm.config.storage.")]
    path.write_text("\n".join(kept).replace("${KEYS}", str(KIP405 / name / "keys")) + backend)
    return path


def tier(
    name: str,
    tmp_path: Path,
    *,
    copy_bucket: bool = False,
    copy_logdir: bool = False,
    keys: Path | None = None,
    extra: str = "",
) -> Tier:
    """One fixture's remote tier, its settings written to `tmp_path` (the bucket or the log
    directory copied there first where the test changes it; `keys` another key pair's directory)."""
    bucket, logdir = KIP405 / name / "bucket", KIP405 / name / "logdir"
    if copy_bucket:
        bucket = Path(shutil.copytree(bucket, tmp_path / f"{name}-bucket"))
    if copy_logdir:
        logdir = Path(shutil.copytree(logdir, tmp_path / f"{name}-logdir"))
    settings = tmp_path / f"{name}.properties"
    settings.write_text(settings_text(name, bucket, keys or KIP405 / name / "keys") + extra)
    return Tier(name, logdir, bucket, settings)


def produced(name: str) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    """(partition, offset) -> (key, value) of every record the README says was produced."""
    props = dict(
        line.split("=", 1)
        for line in (KIP405 / name / "records.properties").read_text().splitlines()
        if "=" in line
    )
    count, partitions, size = int(props["records"]), int(props["partitions"]), int(props["value_bytes"])
    out = {}
    for i in range(count):
        value = bytearray(b"v-%09d-" % i)
        value += bytes(ord("a") + (i * 31 + j * 7) % 26 for j in range(len(value), size))
        out[(i % partitions, i // partitions)] = (b"k-%09d" % i, bytes(value))
    return out


def records(storage: Storage, root: str, topic: str = "kip405") -> dict[tuple[int, int], tuple[bytes, bytes]]:
    """Every record of `topic` in a log directory, CRCs verified: (partition, offset) -> (key, value)."""
    out = {}
    for part in list_log_dir(storage, root).partitions:
        if part.tp.topic != topic:
            continue
        for seg in part.segments:
            reader = SegmentReader(storage, seg.log.path, seg.base_offset)
            reader.verify_crcs()
            for rb in reader.record_batches(part.tp.topic, part.tp.partition):
                cols = [rb.column(c).to_pylist() for c in ("offset", "key", "value")]
                for offset, key, value in zip(*cols, strict=True):
                    out[(part.tp.partition, offset)] = (key, value)
    return out
