"""The storage interface on the local disk and an fsspec store: nothing is visible at a path
before its writer commits, a discarded writer leaves nothing, listings are sorted and typed."""

from __future__ import annotations

from pathlib import Path

import pytest

from segment_io.storage import (
    LocalStorage,
    ObjectStorage,
    Storage,
    load_client,
    loaded_clients,
    open_storage,
    transfer,
)

pytestmark = pytest.mark.unit


@pytest.fixture(params=["local", "memory"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Storage, str]:
    url = str(tmp_path / "store") if request.param == "local" else f"memory://segpipe-{tmp_path.name}"
    return open_storage(url)


def test_urls_choose_the_storage() -> None:
    storage, path = open_storage("relative/dir")
    assert isinstance(storage, LocalStorage) and path == str(Path("relative/dir").resolve())
    assert isinstance(open_storage("file:///tmp/x")[0], LocalStorage)
    memory, mpath = open_storage("memory://bucket/x/")
    assert isinstance(memory, ObjectStorage) and memory.protocol == "memory" and mpath == "/bucket/x"
    assert open_storage(memory.url(mpath))[1] == mpath


def test_the_clients_loaded_are_the_object_stores_opened_beyond_fsspecs_own() -> None:
    """What a driver's Spark workers preload: the clients of the stores it has reached (s3fs), not
    the disk or memory, which fsspec serves itself."""
    open_storage("memory://bucket/x")
    open_storage("relative/dir")
    assert not any(m.startswith("fsspec.") for m in loaded_clients())
    load_client("s3://bucket/prefix")
    assert "s3fs.core" in loaded_clients()


def test_a_pending_file_appears_whole_on_commit(root: tuple[Storage, str]) -> None:
    storage, base = root
    target = f"{base}/p-0/00000000000000000000.log"
    pending = storage.open_write(target)
    pending.write(b"abc")
    pending.write(memoryview(b"def"))
    assert not storage.exists(target)
    # Locally the bytes wait under a temporary name, which log directory listings ignore.
    assert [f.name for f in storage.list(f"{base}/p-0") if not f.name.endswith(".tmp")] == []
    pending.commit(mtime_ms=1_600_000_000_000)
    assert storage.read(target) == b"abcdef" and storage.read(target, 2, 4) == b"cd"
    [info] = storage.list(f"{base}/p-0")
    assert (info.name, info.size, info.is_dir) == ("00000000000000000000.log", 6, False)
    if isinstance(storage, LocalStorage):
        assert info.mtime_ms == 1_600_000_000_000


def test_a_discarded_file_leaves_nothing(root: tuple[Storage, str]) -> None:
    storage, base = root
    pending = storage.open_write(f"{base}/gone.log")
    pending.write(b"x" * 100)
    pending.discard()
    assert not storage.exists(f"{base}/gone.log")
    assert [f for f in storage.walk_files(base) if "gone" in f.name] == []


def test_listing_is_sorted_and_walks_directories(root: tuple[Storage, str]) -> None:
    storage, base = root
    for name in ("b/2.log", "a/1.log", "c.txt"):
        storage.write_atomic(f"{base}/{name}", name.encode())
    assert [(f.name, f.is_dir) for f in storage.list(base)] == [("a", True), ("b", True), ("c.txt", False)]
    assert sorted(f.name for f in storage.walk_files(base)) == ["1.log", "2.log", "c.txt"]
    assert storage.list(f"{base}/missing") == []
    storage.remove(f"{base}/a")
    assert not storage.exists(f"{base}/a/1.log")


def test_transfer_between_storages_keeps_the_bytes(tmp_path: Path) -> None:
    local, lpath = open_storage(str(tmp_path / "src"))
    local.write_atomic(f"{lpath}/x.log", bytes(range(256)) * 1000)
    memory, mpath = open_storage(f"memory://segpipe-transfer-{tmp_path.name}")
    transfer(local, f"{lpath}/x.log", memory, f"{mpath}/x.log")
    transfer(memory, f"{mpath}/x.log", local, f"{lpath}/y.log", mtime_ms=1_600_000_000_000)
    assert local.read(f"{lpath}/y.log") == bytes(range(256)) * 1000
    assert [f.mtime_ms for f in local.list(lpath) if f.name == "y.log"] == [1_600_000_000_000]


def test_only_the_local_disk_renames_directories(tmp_path: Path) -> None:
    local, path = open_storage(str(tmp_path / "staging"))
    local.write_atomic(f"{path}/f", b"1")
    (tmp_path / "final").mkdir()  # an empty destination is replaced
    local.rename_directory(path, str(tmp_path / "final"))
    assert (tmp_path / "final" / "f").read_bytes() == b"1"
    memory, _ = open_storage("memory://segpipe-rename")
    assert local.renames_directories and not memory.renames_directories
    with pytest.raises(NotImplementedError):
        memory.rename_directory("/a", "/b")


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_local_copies_are_made_by_the_kernel_and_keep_bytes_and_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_copy: bool
) -> None:
    import os

    if not kernel_copy:  # a kernel or file system without copy_file_range: sendfile instead

        def refuse(*_: object) -> int:
            raise OSError(38, "copy_file_range not supported")

        monkeypatch.setattr(os, "copy_file_range", refuse)
    storage, path = open_storage(str(tmp_path))
    data = os.urandom(3 * 1024 * 1024 + 17)
    (tmp_path / "a.log").write_bytes(data)
    storage.copy(f"{path}/a.log", f"{path}/copy/a.log", mtime_ms=1_600_000_000_000)
    assert (tmp_path / "copy" / "a.log").read_bytes() == data
    assert [f.mtime_ms for f in storage.list(f"{path}/copy")] == [1_600_000_000_000]
    assert [f.name for f in storage.list(f"{path}/copy")] == ["a.log"]  # no temporary left


def test_large_local_writes_are_handed_to_writeback_as_they_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file written in pieces, and a kernel copy, start the writeback of each stretch of
    WRITEBACK_BYTES (COPY_BYTES) as it is written, covering the file once, in order; the bytes
    and the commit are unchanged."""
    import os

    from segment_io.storage import local

    assert local._sync_file_range() is not None  # Linux's C library has it
    handed: list[tuple[int, int]] = []
    monkeypatch.setattr(local, "start_writeback", lambda fd, offset, length: handed.append((offset, length)))
    monkeypatch.setattr(local, "COPY_BYTES", 1 << 20)
    storage, path = open_storage(str(tmp_path))
    data = os.urandom(3 * local.WRITEBACK_BYTES + 12345)
    pending = storage.open_write(f"{path}/a.log")
    for at in range(0, len(data), 1 << 20):
        pending.write(data[at : at + (1 << 20)])
    pending.commit()
    assert (tmp_path / "a.log").read_bytes() == data
    assert handed == [(i * local.WRITEBACK_BYTES, local.WRITEBACK_BYTES) for i in range(3)]
    handed.clear()
    storage.copy(f"{path}/a.log", f"{path}/b.log")
    assert (tmp_path / "b.log").read_bytes() == data
    assert [o for o, _ in handed] == list(range(0, len(data), 1 << 20))
    assert sum(n for _, n in handed) == len(data)


class Stop(BaseException):
    """What a stop signal raises in the main thread."""


@pytest.mark.parametrize("change", ["write", "commit", "copy", "remove"])
def test_a_change_to_a_store_interrupted_in_the_main_thread_has_landed_when_the_stop_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """An fsspec client sends a request from its own thread while the caller waits: a stop signal
    that lands during the wait is raised only once the change is made, so it cannot land after
    the stopped run has removed what it wrote. (The request here signals the main thread, then
    waits until the stop was raised there, before it makes its change.)"""
    import os
    import signal
    import threading

    storage, root = open_storage(f"memory://segpipe-stop-{tmp_path.name}")
    assert isinstance(storage, ObjectStorage)
    storage.write_atomic(f"{root}/old", b"old")
    raised = threading.Event()

    def stop(signum: int, frame: object) -> None:
        raised.set()
        raise Stop()

    def signalled(method: str) -> None:
        original = getattr(storage.fs, method)

        def request(*args: object, **kwargs: object) -> object:
            os.kill(os.getpid(), signal.SIGUSR1)
            assert raised.wait(30)  # the main thread took the stop before the change was made
            return original(*args, **kwargs)

        monkeypatch.setattr(storage.fs, method, request)

    previous = signal.signal(signal.SIGUSR1, stop)
    try:
        with pytest.raises(Stop):
            if change == "write":
                signalled("pipe_file")
                storage.write_atomic(f"{root}/new", b"new")
            elif change == "commit":
                signalled("open")
                pending = storage.open_write(f"{root}/new")
                pending.write(b"new")
                pending.commit()
            elif change == "copy":
                signalled("copy")
                storage.copy(f"{root}/old", f"{root}/new")
            else:
                signalled("rm")
                storage.remove(f"{root}/old")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert raised.is_set()
    if change == "remove":
        assert not storage.exists(f"{root}/old")
    else:
        assert storage.read(f"{root}/new") == (b"old" if change == "copy" else b"new")


def test_a_local_listing_leaves_out_a_file_renamed_while_it_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's temporary file, renamed into place between the directory read and its
    stat, is not there any more: the listing names what is, and fails on nothing."""
    import os

    from segment_io.storage import local

    (tmp_path / "a.log").write_bytes(b"a")
    (tmp_path / "b.log.0123.tmp").write_bytes(b"b")
    plain = os.scandir

    def renamed_meanwhile(path: str) -> list[os.DirEntry[str]]:
        entries = list(plain(path))
        os.replace(tmp_path / "b.log.0123.tmp", tmp_path / "b.log")
        return entries

    monkeypatch.setattr(local.os, "scandir", renamed_meanwhile)
    assert [f.name for f in LocalStorage().list(str(tmp_path))] == ["a.log"]
