"""Staging and atomic publication of an output log directory.

Local destinations are built in a sibling staging directory and renamed into place in one
step, so DST is either absent or complete. Object stores cannot rename a prefix atomically:
there the output is written in place under an `_segpipe/INCOMPLETE` marker that is removed
only after the manifest is written; readers (and `segpipe`) treat a marked DST as absent.
"""

from __future__ import annotations

import json
import os
import posixpath
import uuid
from dataclasses import dataclass
from typing import Any

from segment_io.storage import Storage, open_storage

META_DIR = "_segpipe"
INCOMPLETE = "INCOMPLETE"
MANIFEST = "manifest.json"


class DestinationRefused(RuntimeError):
    """A destination segpipe will not write: not empty or inside the source (both checked before
    any work starts), or filled by another writer while the run worked (checked at publication)."""


class DestinationNotEmpty(DestinationRefused):
    pass


class DestinationInsideSource(DestinationRefused):
    pass


def require_empty(dst_url: str) -> None:
    """Refuse a destination that already holds anything (segpipe never overwrites output)."""
    storage, final = open_storage(dst_url)
    if storage.exists(final) and storage.list(final):
        raise DestinationNotEmpty(f"destination {dst_url} exists and is not empty")


def _location(url: str) -> tuple[str, str]:
    storage, path = open_storage(url)
    return storage.protocol, storage.canonical(path)


def require_destination(src_url: str, dst_url: str) -> None:
    """Refuse a destination inside the source (its output and staging would modify SRC, and a
    log directory holding a non-partition directory is one Kafka refuses to load) or not empty."""
    (src_fs, src), (dst_fs, dst) = _location(src_url), _location(dst_url)
    if src_fs == dst_fs and (dst == src or dst.startswith(src.rstrip("/") + "/")):
        raise DestinationInsideSource(
            f"destination {dst_url} is inside the source {src_url}, which is never modified"
        )
    require_empty(dst_url)


@dataclass(frozen=True)
class Staging:
    storage: Storage
    final_path: str
    path: str  # where output is written while the job runs
    run_id: str

    @property
    def url(self) -> str:
        return self.storage.url(self.path)

    @classmethod
    def create(cls, dst_url: str) -> Staging:
        require_empty(dst_url)
        storage, final = open_storage(dst_url)
        run_id = uuid.uuid4().hex[:12]
        if storage.renames_directories:
            parent = os.path.dirname(os.path.abspath(final))
            os.makedirs(parent, exist_ok=True)
            path = os.path.join(parent, f".{os.path.basename(final)}.segpipe-staging-{run_id}")
            storage.makedirs(path)
        else:
            path = final
            storage.makedirs(path)
            storage.write_atomic(posixpath.join(path, META_DIR, INCOMPLETE), run_id.encode())
        return cls(storage, final, path, run_id)

    def write_meta(self, name: str, doc: Any) -> str:
        target = posixpath.join(self.path, META_DIR, name)
        self.storage.write_atomic(target, json.dumps(doc, indent=2, sort_keys=True).encode())
        return posixpath.join(self.final_path, META_DIR, name)

    def publish(self, manifest: dict[str, Any]) -> None:
        """Write the manifest last, then make the output visible in one step."""
        self.write_meta(MANIFEST, manifest)
        if self.storage.renames_directories:
            try:
                # DST was absent or empty at start; only another writer can have filled it.
                self.storage.rename_directory(self.path, self.final_path)
            except OSError:
                raise DestinationNotEmpty(
                    f"destination {self.final_path} was filled while this run worked"
                ) from None
        else:
            self.storage.remove(posixpath.join(self.path, META_DIR, INCOMPLETE))

    def abort(self) -> None:
        """Remove a local staging directory; an object-store DST stays marked incomplete."""
        if self.storage.renames_directories:
            self.storage.remove(self.path)


def is_incomplete(dst_url: str) -> bool:
    storage, path = open_storage(dst_url)
    return storage.exists(posixpath.join(path, META_DIR, INCOMPLETE))
