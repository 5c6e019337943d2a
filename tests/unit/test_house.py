"""The shape of the code, read from its source: `segment_io` never imports Spark, no job imports
another job (what several need lives in pipelines/log, keys, config, output or runtime), a module
is one concept (a warning past 400 lines, a failure past 600), and the formatter's layout is kept
everywhere but in a numba kernel's constant table."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("segment_io", "pipelines")
LONG_LINES, MAX_LINES = 400, 600
# The only places a `# fmt: skip` keeps a layout: constant tables of numba kernels, one per line.
KERNEL_TABLES = ("pipelines/keys/key_digest.py",)


def modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def imported(path: Path) -> set[str]:
    """Every module `path` imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pipelines.jobs import clean` imports pipelines.jobs.clean: both are named.
            names.update([node.module, *(f"{node.module}.{alias.name}" for alias in node.names)])
    return names


def job_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["pipelines", "jobs"] and len(parts) > 2 else None


def test_segment_io_never_imports_spark() -> None:
    spark = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in (ROOT / "segment_io").rglob("*.py")
        for name in imported(p)
        if name.split(".")[0] == "pyspark"
    }
    assert spark == set()


def test_no_job_imports_another_job() -> None:
    crossing = []
    for path in (ROOT / "pipelines" / "jobs").rglob("*.py"):
        own = path.relative_to(ROOT / "pipelines" / "jobs").parts[0]
        crossing += [
            f"{path.relative_to(ROOT)}: {name}" for name in imported(path) if job_of(name) not in (None, own)
        ]
    assert crossing == []


def test_a_module_is_one_concept_not_a_line_count() -> None:
    """Past 400 lines a module is named in a warning (is it still one concept?); past 600 it fails."""
    import warnings

    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in modules()}
    for name, n in sorted(sizes.items()):
        if n > LONG_LINES:
            warnings.warn(f"{name} has {n} lines: is it still one concept?", stacklevel=1)
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_lines_are_laid_out_by_the_formatter() -> None:
    """No `# fmt: skip` packs a line the formatter would split, outside numba kernels' tables."""
    packed = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in (*PACKAGES, "tests", "bench", "dags")
        for path in sorted((ROOT / package).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in KERNEL_TABLES
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "# fmt: skip" in line and "test_house.py" not in path.name
    ]
    assert packed == []


# The hallway's shared parts: argument builders, the console, the entry points. Every other module
# of cli/ is one command, which only turns its arguments into a request for a job.
HALLWAY = {"__init__", "__main__", "console", "entry", "main", "source_args", "spark_args", "key_args"}


def test_no_command_imports_another_commands_functions() -> None:
    """A function one command's module (cli/<command>.py, or run/) defines and another module
    imports is work the hallway does for the rooms: it lives beside the jobs or in log/ instead.
    The parser (cli/main) names every command; the run command and the DAGs reach run/."""
    commands = {
        f"pipelines.cli.{p.stem}" for p in (ROOT / "pipelines" / "cli").glob("*.py") if p.stem not in HALLWAY
    }
    reaching = []
    for path in modules():
        own = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for name in imported(path):
            command = next((c for c in commands if name == c or name.startswith(c + ".")), None)
            if command is not None and command != own and own != "pipelines.cli.main":
                reaching.append(f"{own} imports {name}")
            if name.startswith("pipelines.run.") and not own.startswith(
                ("pipelines.run.", "pipelines.cli.run")
            ):
                reaching.append(f"{own} imports {name}")
    assert reaching == []


def test_segment_io_does_not_import_pipelines() -> None:
    reaching = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in (ROOT / "segment_io").rglob("*.py")
        for name in imported(p)
        if name.startswith("pipelines")
    ]
    assert reaching == []


def test_every_fault_point_is_in_the_one_table() -> None:
    """The points the code places are exactly FAULT_POINTS (tests arm only those: helpers)."""
    from pipelines.runtime.faults import FAULT_POINTS

    placed = set()
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            called = getattr(node.func, "id", None) if isinstance(node, ast.Call) else None
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "fault"
            ):
                called = "fault"  # a point injected as a function (the swaps' `fault`)
            if isinstance(node, ast.Call) and called in ("fault_point", "is_armed", "fault"):
                arg = node.args[0]
                if isinstance(arg, ast.Constant):
                    placed.add(arg.value)
                elif isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant):
                    placed.add(f"{arg.values[0].value}<step>")
    assert placed == set(FAULT_POINTS)


def test_every_job_module_the_commands_name_exists() -> None:
    import importlib.util

    from pipelines.cli.spark_args import JOB_MODULES, VALIDATION_MODULES

    missing = [m for m in (*JOB_MODULES.values(), *VALIDATION_MODULES) if importlib.util.find_spec(m) is None]
    assert missing == []


def test_the_wall_clock_is_read_in_one_place() -> None:
    """Every rule is given a clock (segment_io.clock; pipelines.clock.clock_ms reads it): none
    reads `time.time()` itself, so a test can fix the time of any of them."""
    readers = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in modules()
        if p != ROOT / "segment_io" / "clock.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "time.time()" in line
    ]
    assert readers == []


# What of segment_io still reaches a cluster: the read-only consumer of `--bootstrap-server`
# (the view opens it by URL in Spark's workers too). Whatever writes to a cluster is pipelines'.
READS_A_CLUSTER = ("segment_io/kafka_tier/metadata_live.py",)


def test_segment_io_writes_to_no_cluster() -> None:
    clients = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in (ROOT / "segment_io").rglob("*.py")
        if str(p.relative_to(ROOT)) not in READS_A_CLUSTER
        for name in imported(p)
        if name == "kafka" or name.startswith("kafka.")
    ]
    assert clients == []


def test_runtime_is_spark_plumbing_only() -> None:
    """runtime/ imports nothing of the job frame (output/), the jobs, the command line or run/."""
    above = ("pipelines.output", "pipelines.jobs", "pipelines.cli", "pipelines.run", "pipelines.kafka_tier")
    reaching = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in (ROOT / "pipelines" / "runtime").rglob("*.py")
        for name in imported(p)
        if any(name == a or name.startswith(a + ".") for a in above)
    ]
    assert reaching == []


def _module_names() -> dict[str, Path]:
    names = {}
    for path in modules():
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        names[name.removesuffix(".__init__")] = path
    return names


def _loaded_with(path: Path, known: dict[str, Path]) -> set[str]:
    """The project's modules importing `path` loads before its own body runs on: its module-level
    imports (`from X import Y` names X.Y where that is a module, else X); none inside a function
    or an `if TYPE_CHECKING:` block."""
    out = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                out.add(
                    f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                )
    return out & set(known)


def test_no_module_cycle_at_import_time() -> None:
    known = _module_names()
    graph = {name: _loaded_with(path, known) - {name} for name, path in known.items()}
    cycles = []
    for start in sorted(graph):
        seen, stack = set(), [(start, [start])]
        while stack:  # bounded: each module is entered once per start
            node, trail = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    cycles.append(" -> ".join([*trail, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert cycles == []


# What importing costs enough to be put off until a function needs it: these packages (each 50 ms
# to seconds to import, measured), and the command line's start (every command loads the parser
# of all, so what only one command's run needs is imported when it runs). A module that declares
# numba kernels imports other modules of pipelines inside functions too: what its kernels' cache
# stamp covers is its kernel modules alone (test_kernel_cache).
START_UP_PACKAGES = (
    "pyspark",
    "py4j",
    "numba",
    "great_expectations",
    "pyarrow",
    "pandas",
    "numpy",
    "fsspec",
    "s3fs",
    "kafka",
    "yaml",
    "airflow",
)
COMMAND_LINE_START = ("pipelines.cli.entry", "pipelines.cli.main")


def _top_level_packages(path: Path) -> set[str]:
    """The packages outside the project `path` imports at module level."""
    out = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out - set(PACKAGES)


def _parents(name: str, known: dict[str, Path]) -> list[str]:
    parts = name.split(".")
    return [p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in known]


def _closure(start: str, graph: dict[str, set[str]], known: dict[str, Path]) -> set[str]:
    """The project's modules importing `start` loads (their packages included)."""
    seen, stack = {start}, [start]
    while stack:  # bounded: each module is entered once
        node = stack.pop()
        for nxt in [*graph[node], *_parents(node, known)]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def test_a_function_imports_the_project_only_for_a_start_up_cost() -> None:
    """A module of the project imported inside a function, not at the top, is one that costs its
    importer a start-up: it loads a package of START_UP_PACKAGES the importer does not, or it is
    outside the command line's start while the importer is inside it. Any other is imported at
    the top (where no module cycle may form: test_no_module_cycle_at_import_time)."""
    known = _module_names()
    graph = {name: _loaded_with(path, known) - {name} for name, path in known.items()}
    closures = {name: _closure(name, graph, known) for name in known}
    costly = {
        name: {pkg for m in closures[name] for pkg in _top_level_packages(known[m])} & set(START_UP_PACKAGES)
        for name in known
    }
    start = set().union(*(closures[m] for m in COMMAND_LINE_START))
    kernels = {name for name in known if "segment_io.kernel" in graph[name]}
    free = []
    for name, path in known.items():
        for func in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    wanted = {
                        f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                        for a in node.names
                    }
                elif isinstance(node, ast.Import):
                    wanted = {a.name for a in node.names}
                else:
                    continue
                for target in wanted & set(known):
                    if costly[target] - costly[name]:
                        continue
                    if name in start and target not in start:
                        continue
                    if name in kernels and target.startswith("pipelines.") and target not in kernels:
                        continue
                    free.append(f"{path.relative_to(ROOT)}:{node.lineno}: {target}")
    assert free == []
