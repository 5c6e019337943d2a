"""Staging and atomic publication of an output log directory.

Local destinations are built in a sibling staging directory and renamed into place in one
step, so DST is either absent or complete. Object stores cannot rename a prefix atomically:
there the output is written in place under an `_segpipe/INCOMPLETE` marker that is removed
only after the manifest is written; readers (and `segpipe`) treat a marked DST as absent.
Both hold the run's lock (run_lock): what a dead run left is removed by the next run into the
same destination; a live run's is never touched.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipelines.errors import DestinationNotEmpty
from pipelines.output.run_lock import INCOMPLETE, LOCK, META_DIR, Leftover, RunLock, judge
from pipelines.runtime.faults import fault_point
from segment_io.layout import MANIFEST
from segment_io.storage import Location, Place, Storage

REPORT = "report.json"  # a run's report, beside its manifest
# An erase of a joined key list: the digests of keys found nowhere, a file per bucket, under the
# output's META_DIR, and beside a --report PATH as PATH + NOT_FOUND_SUFFIX.
NOT_FOUND_DIR = posixpath.join(META_DIR, "not-found")
NOT_FOUND_SUFFIX = ".not-found"
# The manifest's key naming the job that wrote an output other than clean, and erase's value.
MANIFEST_JOB = "job"
ERASE_JOB = "erase"
CUT_JOB = "cut"
STAGING_MARK = ".segpipe-staging-"


def _staging_path(final: str, run_id: str) -> str:
    """A hidden sibling of `final` on the same file system, so that publication is one rename."""
    return posixpath.join(posixpath.dirname(final), f".{posixpath.basename(final)}{STAGING_MARK}{run_id}")


def find_leftovers(dst: Place) -> list[Leftover]:
    """What runs into `dst` that are proved dead left behind; a live (or unprovable) run
    refuses with RunInProgress."""
    dst = Location.of(dst)
    storage, final = dst.storage, dst.path
    if storage.renames_directories:
        prefix = f".{posixpath.basename(final)}{STAGING_MARK}"
        return [
            judge(storage, f.path, "the staging directory")
            for f in storage.list(posixpath.dirname(final))
            if f.is_dir and f.name.startswith(prefix)
        ]
    if storage.exists(posixpath.join(final, META_DIR, INCOMPLETE)):
        return [judge(storage, final, "the unfinished output")]
    return []


def published_manifest(dst: Place) -> dict[str, Any] | None:
    """The manifest of a complete output published at `dst` (None if there is none): what a
    resumed job reads to learn that its clean step was published before the run died."""
    dst = Location.of(dst)
    storage, final = dst.storage, dst.path
    manifest = posixpath.join(final, META_DIR, MANIFEST)
    if storage.exists(posixpath.join(final, META_DIR, INCOMPLETE)) or not storage.exists(manifest):
        return None
    doc = json.loads(storage.read(manifest))
    return doc if isinstance(doc, dict) else None


def require_writable(dst: Place) -> list[Leftover]:
    """Refuse a destination that holds anything but a dead run's leftovers (segpipe never
    overwrites output) or that a live run is writing; returns the leftovers to remove."""
    dst = Location.of(dst)
    leftovers = find_leftovers(dst)
    storage, final = dst.storage, dst.path
    reclaimed = {x.path for x in leftovers}
    if final not in reclaimed and storage.exists(final) and _holds_anything(storage, final):
        made = published_manifest(dst)
        if made is not None:  # e.g. a run stopped after its publication: say whose it is
            job = f"{made[MANIFEST_JOB]} " if made.get(MANIFEST_JOB) else ""
            raise DestinationNotEmpty(
                f"destination {dst} exists and is not empty: it holds the published output of an earlier "
                f"run ({job}run {made.get('run_id')} of {made.get('src')}); segpipe never overwrites an "
                "output: remove it to make it again"
            )
        raise DestinationNotEmpty(f"destination {dst} exists and is not empty")
    return leftovers


def _holds_anything(storage: Storage, path: str) -> bool:
    """On a disk any entry counts (publication renames into an empty directory only); in an object
    store only objects do (some stores, SeaweedFS, keep empty folders after their objects go)."""
    if storage.renames_directories:
        return bool(storage.list(path))
    return next(iter(storage.walk_files(path)), None) is not None


def remove_leftover(storage: Storage, leftover: Leftover) -> int:
    """Remove a dead run's leftover (and its unfinished uploads); returns the uploads aborted."""
    storage.remove(leftover.path)
    return storage.abort_uploads(leftover.path)


def clear_leftovers(dst: Place, log: Callable[[str], Any] = print) -> None:
    """Remove what dead runs left at `dst` (a live run's refused: require_writable), each named."""
    dst = Location.of(dst)
    storage = dst.storage
    for leftover in require_writable(dst):
        aborted = remove_leftover(storage, leftover)
        owner = f" of {leftover.lock.describe()}" if leftover.lock else ""
        uploads = f", {aborted} unfinished uploads aborted" if aborted else ""
        log(
            f"segpipe: removed staging of a run that did not finish: {storage.url(leftover.path)}, "
            f"{leftover.size:,} bytes{owner}{uploads}"
        )


@dataclass(frozen=True)
class Staging:
    storage: Storage
    final_path: str
    path: str  # where output is written while the job runs
    run_id: str
    # Set once the output is visible: from then on nothing removes it (on an object store the
    # staging *is* the destination, so an abort after publication would delete the output).
    _published: list[bool] = field(default_factory=list, compare=False, repr=False)

    @property
    def published(self) -> bool:
        return bool(self._published)

    @property
    def url(self) -> str:
        return self.storage.url(self.path)

    @property
    def location(self) -> Location:
        """Where output is written, on the staging's own opened storage."""
        return Location.at(self.storage, self.path)

    @classmethod
    def create(cls, dst: Place, log: Callable[[str], Any] = print) -> Staging:
        """Stage a new output for `dst` after removing what dead runs left there."""
        clear_leftovers(dst, log)
        return cls.make(dst)

    @classmethod
    def make(cls, dst: Place) -> Staging:
        """Stage a new output for `dst` (its leftovers already removed): the staging and its lock,
        or, on an error or a stop between the two, nothing."""
        dst = Location.of(dst)
        storage, final = dst.storage, dst.path
        run_id = uuid.uuid4().hex[:12]
        lock = RunLock.mine(run_id).to_bytes()
        if storage.renames_directories:
            path, marker = _staging_path(final, run_id), LOCK
        else:
            path, marker = final, INCOMPLETE
        staged = cls(storage, final, path, run_id)
        try:
            storage.makedirs(path)
            storage.write_atomic(posixpath.join(path, META_DIR, marker), lock)
        except BaseException:
            staged.abort()
            raise
        return staged

    def write_meta(self, name: str, doc: Any) -> str:
        target = posixpath.join(self.path, META_DIR, name)
        self.storage.write_atomic(target, json.dumps(doc, indent=2, sort_keys=True).encode())
        return posixpath.join(self.final_path, META_DIR, name)

    def publish(self, manifest: dict[str, Any]) -> None:
        """Write the manifest last, then make the output visible in one step."""
        fault_point("mid-publish")  # inside the publication: a stop signal here is held until it ends
        self.write_meta(MANIFEST, manifest)
        if self.storage.renames_directories:
            self.storage.remove(posixpath.join(self.path, META_DIR, LOCK))
            try:
                # DST was absent or empty at start; only another writer can have filled it.
                self.storage.rename_directory(self.path, self.final_path)
            except OSError:
                raise DestinationNotEmpty(
                    f"destination {self.final_path} was filled while this run worked"
                ) from None
        else:
            self.storage.remove(posixpath.join(self.path, META_DIR, INCOMPLETE))
        self._published.append(True)

    def abort(self) -> None:
        """Remove what this run wrote: the staging directory, or on object storage the output
        written in place (the destination was absent or empty) and its unfinished uploads. A
        published output is never removed (a stop held during its publication ends the run after
        it)."""
        if self.published:
            return
        self.storage.remove(self.path)
        self.storage.abort_uploads(self.path)
