"""Object stores and any other fsspec file system (`s3://`, `memory://`, ...).

A PUT publishes an object whole, so writes need no temporary name; there is no atomic rename of
a prefix (publication marks an incomplete output instead).
"""

from __future__ import annotations

import functools
import inspect
import posixpath
import tempfile
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import datetime
from functools import partial
from typing import IO, Any, TypeVar, cast

import fsspec

from segment_io.storage.base import FileInfo, PendingFile, Storage
from segment_io.storage.store_errors import store_errors
from segment_io.threads import request_to_its_end

CHUNK_BYTES = 8 * 1024 * 1024


def _mtime_ms(info: dict[str, Any]) -> int:
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        return int(float(value) * 1000)
    return -1


def _precondition_failed(exc: BaseException) -> bool:
    """The store refused a conditional write because the key exists (412, or 409 when two such
    writes race), whichever way the client library reported it."""
    for error in (exc, exc.__cause__, exc.__context__):
        response = getattr(error, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
                return True
    return False


# Object stores whose writers publish nothing until close (a PUT, or a completed multipart
# upload): their writers stream. Other fsspec file systems (memory://, ...) may show a file as
# soon as it is opened, so their writes are held back and written whole on commit.
S3_PROTOCOLS = frozenset({"s3", "s3a"})  # s3fs's: conditional writes, and folders that are only prefixes
GCS_PROTOCOLS = frozenset({"gs", "gcs"})  # gcsfs's: the same two, a create is `ifGenerationMatch=0`
# adlfs's (Azure Blob Storage): a container's folders are prefixes, a block blob appears when its
# block list is committed, and a create is a conditional upload (If-None-Match: *).
AZURE_PROTOCOLS = frozenset({"az", "abfs", "abfss"})
PREFIX_STORES = S3_PROTOCOLS | GCS_PROTOCOLS | AZURE_PROTOCOLS
PUBLISH_ON_CLOSE = PREFIX_STORES


Errors = Callable[[], AbstractContextManager[None]]  # a block in which a store's errors are typed


class _StreamingPending(PendingFile):
    """Buffered by the store's own writer (multipart on S3); the object appears on commit."""

    def __init__(self, fs: fsspec.AbstractFileSystem, path: str, errors: Errors) -> None:
        self.errors = errors
        with errors():
            self.handle: Any = fs.open(path, "wb")

    def write(self, data: bytes | memoryview) -> None:
        with self.errors():
            self.handle.write(data)

    def commit(self, mtime_ms: int | None = None) -> None:
        del mtime_ms  # an object's time is when it was written
        with self.errors():
            request_to_its_end(self.handle.close)

    def discard(self) -> None:
        with self.errors():
            self.handle.discard()  # aborts a multipart upload under way; nothing was published
        self.handle.closed = True  # and closing must not publish what was buffered


class _HeldPending(PendingFile):
    """Held in a spool (memory, then a temporary file) and written whole on commit."""

    def __init__(self, fs: fsspec.AbstractFileSystem, path: str) -> None:
        self.fs = fs
        self.path = path
        self.spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=CHUNK_BYTES)  # noqa: SIM115

    def write(self, data: bytes | memoryview) -> None:
        self.spool.write(data)

    def commit(self, mtime_ms: int | None = None) -> None:
        del mtime_ms
        request_to_its_end(self._write_whole)
        self.spool.close()

    def _write_whole(self) -> None:
        self.spool.seek(0)
        with self.fs.open(self.path, "wb") as out:
            while chunk := self.spool.read(CHUNK_BYTES):
                out.write(chunk)

    def discard(self) -> None:
        self.spool.close()


# Per S3 client (fsspec hands out one per store and options), by identity: the buckets known to
# exist. Clients equal in their options may still reach different endpoints (AWS_ENDPOINT_URL is
# read from the environment), so each has its own; a client's entry goes when the client does.
_BUCKETS_MADE: dict[int, set[str]] = {}


def _buckets_made(fs: fsspec.AbstractFileSystem) -> set[str]:
    made = _BUCKETS_MADE.get(id(fs))
    if made is None:
        made = _BUCKETS_MADE[id(fs)] = set()
        weakref.finalize(fs, _BUCKETS_MADE.pop, id(fs), None)
    return made


F = TypeVar("F", bound=Callable[..., Any])


def _typed_errors(method: F) -> F:
    """A method of ObjectStorage whose first argument is a path: the store client's own errors
    raised in it (a generator's too, as it runs) become the OS errors they mean, naming the URL."""
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generator(self: ObjectStorage, path: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
            with self.errors(path):
                yield from method(self, path, *args, **kwargs)

        return cast(F, generator)

    @functools.wraps(method)
    def call(self: ObjectStorage, path: str, *args: Any, **kwargs: Any) -> Any:
        with self.errors(path):
            return method(self, path, *args, **kwargs)

    return cast(F, call)


class ObjectStorage(Storage):
    def __init__(self, fs: fsspec.AbstractFileSystem, scheme: str | None = None) -> None:
        """`scheme`: the one the URL used, where the file system has several (adlfs: az, abfs,
        abfss): the URLs it names are in the user's own spelling."""
        self.fs = fs
        known: tuple[str, ...] = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
        self.protocol = scheme if scheme is not None and scheme in known else known[0]

    def errors(self, path: str) -> AbstractContextManager[None]:
        """A block in which this store's client errors are raised as OS errors naming `path`."""
        return store_errors(self.url(path), gcs=self.protocol in GCS_PROTOCOLS)

    def url(self, path: str) -> str:
        if self.protocol == "memory":
            return f"memory://{path}"
        return f"{self.protocol}://{path.lstrip('/')}"

    def _fresh(self, path: str) -> None:
        """Forget what fsspec's listing cache holds for `path`: another process (a worker, another
        run) may have written since, and a stale listing could hide a new manifest version."""
        self.fs.invalidate_cache(path)

    @_typed_errors
    def list(self, path: str) -> list[FileInfo]:
        self._fresh(path)
        try:  # one listing; asking first whether the folder exists cost two more requests on S3
            infos = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        out = []
        own = path.rstrip("/")
        for info in infos:
            full = info["name"].rstrip("/")
            if full == own:  # a folder's own marker object (`key/`, as SeaweedFS keeps folders)
                continue
            out.append(
                FileInfo(
                    path=full,
                    name=posixpath.basename(full),
                    size=int(info.get("size") or 0),
                    mtime_ms=_mtime_ms(info),
                    is_dir=info.get("type") == "directory",
                )
            )
        return sorted(out, key=lambda f: f.name)

    @_typed_errors
    def exists(self, path: str) -> bool:
        self._fresh(path)
        return bool(self.fs.exists(path))

    @_typed_errors
    def is_file(self, path: str) -> bool:
        self._fresh(path)
        return bool(self.fs.isfile(path))

    @_typed_errors
    def read(self, path: str, start: int = 0, end: int | None = None) -> bytes:
        if start == 0 and end is None:
            return bytes(self.fs.cat_file(path))
        return bytes(self.fs.cat_file(path, start=start, end=end))

    @_typed_errors
    def open_read(self, path: str) -> Iterator[bytes]:
        with self.fs.open(path, "rb") as reader:
            while chunk := reader.read(CHUNK_BYTES):
                yield chunk

    @_typed_errors
    def open_write(self, path: str) -> PendingFile:
        self.makedirs(posixpath.dirname(path))
        if self.protocol in PUBLISH_ON_CLOSE:
            return _StreamingPending(self.fs, path, partial(self.errors, path))
        return _HeldPending(self.fs, path)

    @_typed_errors
    def makedirs(self, path: str) -> None:
        """On S3, GCS and Azure a folder is only a prefix: the client asks whether the bucket (the
        container) exists, and creates it where not, which needs asking once per bucket and
        client, not before every write."""
        if not path:
            return
        if self.protocol not in PREFIX_STORES:
            self.fs.makedirs(path, exist_ok=True)
            return
        bucket = path.lstrip("/").partition("/")[0]
        known = _buckets_made(self.fs)
        if bucket not in known:
            self.fs.makedirs(path, exist_ok=True)
            known.add(bucket)

    @_typed_errors
    def write_atomic(self, path: str, data: bytes | memoryview, mtime_ms: int | None = None) -> None:
        del mtime_ms
        self.makedirs(posixpath.dirname(path))
        request_to_its_end(lambda: self.fs.pipe_file(path, bytes(data)))

    @_typed_errors
    def create_exclusive(self, path: str, data: bytes) -> None:
        """On S3 a conditional PUT (If-None-Match: *), on GCS a conditional upload
        (ifGenerationMatch=0, whose refusal gcsfs raises as FileExistsError), on Azure an upload
        with If-None-Match: * (adlfs raises its refusal as FileExistsError): the store refuses it
        when the key exists. On GCS a check comes first too, for GCS-compatible servers that ignore
        the condition. Other fsspec file systems get only the check (one process at a time)."""
        self.makedirs(posixpath.dirname(path))
        if self.protocol in GCS_PROTOCOLS:
            if self.fs.exists(path):
                raise FileExistsError(path)
            request_to_its_end(lambda: self.fs.pipe_file(path, data, mode="create"))
            return
        if self.protocol in AZURE_PROTOCOLS:
            request_to_its_end(lambda: self.fs.pipe_file(path, data, mode="create"))
            return
        if self.protocol in S3_PROTOCOLS:
            try:
                request_to_its_end(lambda: self.fs.pipe_file(path, data, mode="create"))
            except FileExistsError:
                raise
            except OSError as exc:
                if _precondition_failed(exc):  # stores that leave out which condition failed
                    raise FileExistsError(path) from None
                raise
            return
        if self.fs.exists(path):
            raise FileExistsError(path)
        request_to_its_end(lambda: self.fs.pipe_file(path, data))

    @_typed_errors
    def rename(self, src: str, dst: str) -> None:
        request_to_its_end(lambda: self.fs.mv(src, dst))

    @_typed_errors
    def copy(self, src: str, dst: str, mtime_ms: int | None = None) -> None:
        """The store's own copy: on S3, CopyObject (UploadPartCopy past 5 GB); no bytes leave it."""
        del mtime_ms
        self.makedirs(posixpath.dirname(dst))
        request_to_its_end(lambda: self.fs.copy(src, dst))

    def same_store(self, other: Storage) -> bool:
        # fsspec hands out one client per store and set of options: the same client, the same store.
        return isinstance(other, ObjectStorage) and other.fs is self.fs

    @_typed_errors
    def abort_uploads(self, path: str) -> int:
        call = getattr(self.fs, "call_s3", None)  # s3fs: the S3 API itself
        if call is None:
            return 0
        bucket, _, key = path.lstrip("/").partition("/")
        prefix = key.rstrip("/") + "/" if key else ""
        uploads = call("list_multipart_uploads", Bucket=bucket, Prefix=prefix).get("Uploads", [])
        for upload in uploads:
            request_to_its_end(
                partial(
                    call,
                    "abort_multipart_upload",
                    Bucket=bucket,
                    Key=upload["Key"],
                    UploadId=upload["UploadId"],
                )
            )
        return len(uploads)

    @_typed_errors
    def remove(self, path: str) -> None:
        if self.fs.exists(path):
            request_to_its_end(lambda: self.fs.rm(path, recursive=True))
