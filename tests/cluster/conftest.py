"""Fixtures for the tests on a Spark standalone cluster (marked `cluster`): the cluster, an
executor Python that has segpipe's dependencies but not segpipe (so the code the executors run
is the archive the submission ships), the archive itself (SeaweedFS's S3 endpoint is the root conftest's `seaweed_env`)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode
from tests.cluster.standalone import Cluster, standalone

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with standalone(workers=2, cores=1) as running:
        yield running


@pytest.fixture(scope="session")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A virtualenv whose only packages are this one's third-party ones (as on executor hosts
    where they are installed): `import pipelines` fails there unless the archive is shipped."""
    env = tmp_path_factory.mktemp("executor-env") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(env)], check=True)
    site = env / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    # A path line, not the packages' own .pth files: the editable install of segpipe stays out.
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = str(env / "bin" / "python")
    probe = subprocess.run(
        [python, "-c", "import numba, pyarrow, pyspark; import pipelines"], capture_output=True, cwd=env
    )
    assert probe.returncode != ExitCode.OK and b"No module named 'pipelines'" in probe.stderr, probe.stderr
    return python


@pytest.fixture(scope="session")
def segpipe_archive() -> Path:
    out = subprocess.run([str(ROOT / "scripts" / "pack-segpipe")], check=True, capture_output=True, text=True)
    return ROOT / out.stdout.strip()
