"""Staging and atomic publication of an output log directory.

Local destinations are built in a sibling staging directory and renamed into place in one
step, so DST is either absent or complete. Object stores cannot rename a prefix atomically:
there the output is written in place under an `_segpipe/INCOMPLETE` marker that is removed
only after the manifest is written; readers (and `segpipe`) treat a marked DST as absent.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from dataclasses import dataclass
from typing import Any

from pipelines.errors import DestinationNotEmpty
from pipelines.output.destination import require_empty
from segment_io.storage import Storage, open_storage

META_DIR = "_segpipe"
INCOMPLETE = "INCOMPLETE"
MANIFEST = "manifest.json"


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
            # A hidden sibling on the same file system, so that publication is one rename.
            parent = posixpath.dirname(final)
            path = posixpath.join(parent, f".{posixpath.basename(final)}.segpipe-staging-{run_id}")
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
