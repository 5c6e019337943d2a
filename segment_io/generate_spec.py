"""What a generated topic looks like (`TopicSpec`), the checks a spec must pass, and the bundled
samples' specs."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from segment_io.format.constants import Codec

DEFAULT_START_MS = 1_700_000_000_000


@dataclass(frozen=True)
class TopicSpec:
    """What one generated topic looks like; ratios are per record or per batch as named."""

    name: str
    partitions: int = 1
    records: int = 2000  # per partition
    keys: int = 200  # distinct keys per partition
    key_skew: float = 1.2  # Zipf-like exponent; 0 = uniform
    value_min: int = 20
    value_max: int = 200
    records_per_batch: tuple[int, int] = (1, 40)
    tombstone_ratio: float = 0.05
    null_key_ratio: float = 0.0
    header_ratio: float = 0.2
    codecs: tuple[str, ...] = ("none", "gzip", "snappy", "lz4", "zstd")
    transactional_ratio: float = 0.2  # batches written inside transactions
    abort_ratio: float = 0.3  # transactions that end with ABORT
    open_transaction: bool = True  # leave one transaction without its marker at the tail
    idempotent_ratio: float = 0.5  # non-transactional batches written by idempotent producers
    log_append_time: bool = False
    span_ms: int = 7 * 24 * 3600 * 1000
    start_ms: int = DEFAULT_START_MS
    segment_bytes: int = 64 * 1024
    legacy_magic: int | None = None  # 0 or 1: write old-format entries instead of v2 batches
    distinct_keys: bool = False  # every record gets its own key (key-count tests)


_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_RATIOS = (
    "tombstone_ratio",
    "null_key_ratio",
    "header_ratio",
    "transactional_ratio",
    "abort_ratio",
    "idempotent_ratio",
)


def spec_problems(spec: TopicSpec) -> list[str]:
    """What makes `spec` one that cannot be generated (empty when it can)."""
    out = []
    if not _TOPIC_NAME.fullmatch(spec.name) or spec.name in (".", ".."):
        out.append(f"topic name {spec.name!r}: Kafka allows 1-249 of a-z A-Z 0-9 . _ -")
    for name, low in (
        ("partitions", 1),
        ("records", 0),
        ("keys", 1),
        ("value_min", 0),
        ("span_ms", 0),
        ("segment_bytes", 1024),
    ):
        if getattr(spec, name) < low:
            out.append(f"{name} must be at least {low} (got {getattr(spec, name)})")
    if spec.value_max < spec.value_min:
        out.append(f"value_max ({spec.value_max}) is below value_min ({spec.value_min})")
    low, high = spec.records_per_batch
    if not 1 <= low <= high:
        out.append(f"records_per_batch must be MIN,MAX with 1 ≤ MIN ≤ MAX (got {low},{high})")
    if spec.key_skew < 0:
        out.append(f"key_skew must be ≥ 0 (got {spec.key_skew})")
    out += [
        f"{name} must be within 0..1 (got {getattr(spec, name)})"
        for name in _RATIOS
        if not 0 <= getattr(spec, name) <= 1
    ]
    for codec in spec.codecs:
        try:
            Codec.parse(codec)
        except ValueError as exc:
            out.append(str(exc))
    if not spec.codecs:
        out.append("codecs must name at least one codec")
    return out


def default_specs() -> list[TopicSpec]:
    """The small set that exercises every feature (the bundled samples)."""
    return [
        TopicSpec("orders", partitions=2, records=3000, keys=300, segment_bytes=48 * 1024),
        TopicSpec(
            "clicks",
            partitions=1,
            records=2000,
            keys=1000,
            null_key_ratio=0.1,
            tombstone_ratio=0.0,
            log_append_time=True,
            transactional_ratio=0.0,
            codecs=("lz4", "none"),
            segment_bytes=32 * 1024,
        ),
        TopicSpec(
            "legacy-users",
            records=400,
            keys=50,
            legacy_magic=1,
            transactional_ratio=0.0,
            idempotent_ratio=0.0,
            header_ratio=0.0,
            codecs=("none", "gzip", "snappy", "lz4"),
            segment_bytes=16 * 1024,
        ),
    ]


def scaled(spec: TopicSpec, **changes: object) -> TopicSpec:
    """A copy of `spec` with fields changed (for CLI flags and benchmarks)."""
    return replace(spec, **changes)  # type: ignore[arg-type]
