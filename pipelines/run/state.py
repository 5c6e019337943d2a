"""A job run's state file: which steps finished (with what they did, partition by partition), the
run's `now`, and the job definition it belongs to. It is written whole and atomically after each
step, so after a crash or kill it says exactly which steps were published; a re-run never redoes
one of them and uses the same `now`."""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from typing import Any

from pipelines.clock import iso
from pipelines.errors import ConfigError
from segment_io.storage import open_storage

FORMAT = 1


@dataclass
class RunState:
    url: str
    job: str
    digest: str  # the job definition's: a state file belongs to one
    run: str | None
    now_ms: int
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)  # step -> its record

    def done(self, step: str) -> bool:
        return self.steps.get(step, {}).get("state") == "done"

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "job": self.job,
            "digest": self.digest,
            "run": self.run,
            "now_ms": self.now_ms,
            "now": iso(self.now_ms),
            "steps": self.steps,
        }

    def record(self, steps: tuple[str, ...], record: dict[str, Any]) -> None:
        """Mark `steps` (one unit: they ran as one pass) with `record`, and write the file."""
        for step in steps:
            self.steps[step] = {**record, "steps": list(steps)}
        self.save()

    def save(self) -> None:
        storage, path = open_storage(self.url)
        storage.makedirs(posixpath.dirname(path.rstrip("/")) or "/")
        storage.write_atomic(path, json.dumps(self.to_dict(), indent=2, sort_keys=True).encode())


def read_state(url: str) -> dict[str, Any] | None:
    """The state file's content, or None where there is none yet."""
    storage, path = open_storage(url)
    if not storage.exists(path):
        return None
    try:
        doc = json.loads(storage.read(path))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"state file {url} is not JSON ({exc}); move it aside to start over") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ConfigError(f"state file {url} is not a segpipe run state (format {FORMAT})")
    return doc


def open_state(url: str, job: str, digest: str, run: str | None, now_ms: int) -> RunState:
    """The run's state: resumed from `url` when the file is there (it must belong to this job
    definition and run), else a new one with `now_ms` as the run's `now`."""
    doc = read_state(url)
    if doc is None:
        return RunState(url, job, digest, run, now_ms)
    if doc.get("digest") != digest or doc.get("job") != job:
        raise ConfigError(
            f"state file {url} belongs to another definition of job {doc.get('job')!r} (the job file "
            "changed since that run started): finish that run with the old file, or move the state "
            "file and the output aside to start over"
        )
    return RunState(url, job, digest, run, int(doc["now_ms"]), dict(doc.get("steps") or {}))
