"""Compiled kernels are cached by module, not by path, and stamped with the kernel sources'
digest (segment_io.kernel): a copy of segpipe at another path, or zipped as a Spark Connect
client sends it, loads what another copy compiled; a copy whose kernel sources differ anywhere
(not only in the kernel's own file) compiles its own; a change elsewhere in pipelines does not."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from segment_io.kernel import KERNEL_IMPORT, ModuleCacheLocator, ModuleZipCacheLocator
from tests.helpers import REPO

pytestmark = pytest.mark.unit

# Run in a fresh interpreter with one copy of segpipe first on its path: one kernel, called once.
PROBE = """
import json
import numpy as np
import segment_io.format.checksums as c
empty = np.zeros(0, np.int64)
result = c.first_bad_v2_crc(np.zeros(8, np.uint8), empty, empty, empty, empty)
stats = c.first_bad_v2_crc.stats
print(json.dumps({"file": c.__file__, "result": int(result), "hits": sum(stats.cache_hits.values()),
                  "misses": sum(stats.cache_misses.values()),
                  "locator": type(c.first_bad_v2_crc._cache._impl.locator).__name__}))
"""


def _copy(at: Path) -> Path:
    for package in ("segment_io", "pipelines"):
        shutil.copytree(REPO / package, at / package, ignore=shutil.ignore_patterns("__pycache__"))
    return at


def _probe(copy: Path, cache: Path, cwd: Path) -> dict[str, object]:
    env = {"PYTHONPATH": str(copy), "NUMBA_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert str(seen["file"]).startswith(str(copy)), seen  # the copy, not the installed segpipe
    assert seen["result"] == -1
    return seen


def test_a_copy_elsewhere_loads_what_another_copy_compiled(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _probe(_copy(tmp_path / "a"), cache, tmp_path)
    assert (first["misses"], first["hits"], first["locator"]) == (1, 0, ModuleCacheLocator.__name__)
    assert (cache / "segpipe" / "segment_io.format.checksums").is_dir()
    second = _probe(_copy(tmp_path / "b"), cache, tmp_path)
    assert (second["misses"], second["hits"]) == (0, 1)

    from pipelines.runtime.connect_artifacts import package_zip

    zipped = tmp_path / "segpipe.zip"
    shutil.copy(package_zip(), zipped)  # the copy a Spark Connect client sends
    sent = _probe(zipped, cache, tmp_path)
    assert (sent["misses"], sent["hits"], sent["locator"]) == (0, 1, ModuleZipCacheLocator.__name__)

    elsewhere = _copy(tmp_path / "c")
    with (elsewhere / "pipelines" / "cli" / "main.py").open("a") as source:
        source.write("# changed\n")
    assert (_probe(elsewhere, cache, tmp_path)["hits"]) == 1  # no kernel source changed

    # A change to another module of segment_io (the kernel inlines and folds in other modules).
    changed = _copy(tmp_path / "d")
    with (changed / "segment_io" / "format" / "native.py").open("a") as source:
        source.write("# changed\n")
    assert _probe(changed, cache, tmp_path)["misses"] == 1


def test_a_module_of_pipelines_that_declares_kernels_imports_only_kernel_modules_of_pipelines() -> None:
    """What the stamp covers in pipelines (segment_io.kernel): its kernel modules alone. A kernel
    module importing another module of pipelines could fold that module's constants into its
    kernels unstamped."""
    sources = {p: p.read_bytes() for p in (REPO / "pipelines").rglob("*.py")}
    kernels = {p for p, data in sources.items() if KERNEL_IMPORT in data}
    assert len(kernels) >= 4
    for path in kernels:
        for node in ast.parse(sources[path]).body:  # what the module holds as it runs (not TYPE_CHECKING's)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pipelines"):
                module = REPO / Path(*str(node.module).split("."))
                imported = (
                    module.with_suffix(".py")
                    if module.with_suffix(".py").exists()
                    else module / "__init__.py"
                )
                assert imported in kernels, f"{path.relative_to(REPO)} imports {node.module}"


RACE = """
import json, os, sys, threading, time
import numpy as np
import segment_io.format.checksums as c
go = sys.argv[1]
deadline = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < deadline:  # both call the kernel at once
    time.sleep(0.005)
empty = np.zeros(0, np.int64)
results = []
def call():
    results.append(int(c.first_bad_v2_crc(np.zeros(8, np.uint8), empty, empty, empty, empty)))
threads = [threading.Thread(target=call) for _ in range(2)]  # two threads of the process, too
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
stats = c.first_bad_v2_crc.stats
print(json.dumps({"results": results, "hits": sum(stats.cache_hits.values()),
                  "misses": sum(stats.cache_misses.values())}))
"""


def test_processes_that_miss_a_kernel_at_once_compile_it_once(tmp_path: Path) -> None:
    """Two processes, two threads each, call a kernel no cache holds yet at the same moment: one
    compiles it, the other process waits for it and loads what the first saved (each would
    otherwise compile it)."""
    env = {"PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    go = tmp_path / "go"
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    command = [sys.executable, "-c", RACE, str(go)]
    procs = [subprocess.Popen(command, env=env, cwd=tmp_path, text=True, **pipes) for _ in range(2)]
    try:
        go.touch()
        seen = []
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-3000:]
            seen.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            proc.kill()
    assert [s["results"] for s in seen] == [[-1, -1], [-1, -1]]
    assert sorted((s["misses"], s["hits"]) for s in seen) == [(0, 1), (1, 0)], seen
