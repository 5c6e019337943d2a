"""Peak memory of a process tree, sampled from /proc while a benchmarked command runs."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Peaks:
    """Peak resident memory per kind of process in the tree (sampled every 50 ms from /proc).
    `anon` leaves out file pages mapped from the segments (page cache the kernel can drop)."""

    rss: dict[str, int] = field(default_factory=dict)
    total: int = 0
    anon: int = 0


def _kind(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = b" ".join(cmd)
    if b"java" in cmd[0]:
        return "jvm"
    if b"pyspark.daemon" in text or b"pyspark.worker" in text:
        return "python workers"
    if b"multiprocessing.forkserver" in text:  # the driver's own worker processes
        return "local workers"
    return "driver (python)"


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _rss(pid: int) -> tuple[int, int]:
    """(resident bytes, resident anonymous bytes) of one process."""
    fields = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "RssAnon:")):
                name, value = line.split()[:2]
                fields[name] = int(value) * 1024
    except OSError:
        pass
    return fields.get("VmRSS:", 0), fields.get("RssAnon:", 0)


def watch(pid: int, peaks: Peaks, stop: threading.Event) -> None:
    while not stop.wait(0.05):
        by_kind: dict[str, int] = {}
        anon = 0
        for p in _tree(pid):
            kind = _kind(p)
            rss, private = _rss(p)
            by_kind[kind] = by_kind.get(kind, 0) + rss
            anon += private
        for kind, value in by_kind.items():
            if kind != "?":
                peaks.rss[kind] = max(peaks.rss.get(kind, 0), value)
        peaks.total = max(peaks.total, sum(by_kind.values()))
        peaks.anon = max(peaks.anon, anon)


def run_measured(cmd: list[str], env: dict[str, str], what: str) -> tuple[float, Peaks]:
    """Run `cmd`, sampling the memory of its process tree: (wall seconds, peaks); exits the
    benchmark with the command's stderr if it fails."""
    import subprocess
    import sys
    import time

    peaks, stop = Peaks(), threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watcher = threading.Thread(target=watch, args=(proc.pid, peaks, stop), daemon=True)
    watcher.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    watcher.join()
    if proc.returncode != 0:
        sys.exit(f"{what} failed ({proc.returncode}):\n{err[-4000:]}")
    return wall, peaks
