"""Azurite, Microsoft's Azure Storage emulator, for the tests: its npm package installed once per
machine into segpipe's cache (outside the repository, like the Kafka jars), and its Blob service
started on a free port of 127.0.0.1 with its objects in memory. The server dies with the process
that started it (PR_SET_PDEATHSIG), so a killed test run leaves none behind."""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

VERSION = "3.37.0"
CACHE = Path(os.environ.get("SEGPIPE_CACHE", Path.home() / ".cache" / "segpipe")) / f"azurite-{VERSION}"
INSTALL_TIMEOUT_S = 600
START_TIMEOUT_S = 60
# Azurite's one account, with the key its documentation publishes for it.
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class AzuriteUnavailable(RuntimeError):
    pass


def installed() -> Path:
    """The Blob service's launcher, installed with npm on first use (one process at a time, a
    lock beside the cache; a stopped install leaves nothing that looks complete)."""
    launcher = CACHE / "node_modules" / ".bin" / "azurite-blob"
    done = CACHE / ".complete"
    if done.exists():
        return launcher
    if shutil.which("npm") is None or shutil.which("node") is None:
        raise AzuriteUnavailable("node and npm are not on PATH: Azurite cannot be installed")
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE.with_name(CACHE.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # bounded: the holder's install ends within its timeout
        if done.exists():
            return launcher
        partial = CACHE.with_name(f"{CACHE.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        proc = subprocess.run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--omit=dev",
                "--prefix",
                str(partial),
                f"azurite@{VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
        if proc.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise AzuriteUnavailable(f"npm install azurite@{VERSION} failed: {proc.stderr[-2000:]}")
        shutil.rmtree(CACHE, ignore_errors=True)
        partial.rename(CACHE)
        done.touch()
    return launcher


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@contextmanager
def azurite() -> Iterator[str]:
    """Azurite's Blob service on a free port of 127.0.0.1: its connection string."""
    launcher = installed()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence", "--silent"]
    proc = subprocess.Popen(
        [str(launcher), *args, "--skipApiVersionCheck", "--loose"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_die_with_parent,  # the child has no threads yet: safe
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise AzuriteUnavailable(
                    f"Azurite exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}"
                )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AzuriteUnavailable(
                        f"Azurite did not listen on 127.0.0.1:{port} in {START_TIMEOUT_S} s"
                    ) from None
                time.sleep(0.1)
        yield (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};"
        )
    finally:
        proc.kill()  # it keeps its connections' sockets open a while on SIGTERM
        proc.wait(timeout=30)


if __name__ == "__main__":  # CI installs it before the suite: the install is no test's time
    print(f"Azurite {VERSION}: {installed()}")
