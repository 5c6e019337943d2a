"""An Azure Blob Storage endpoint for the tests of this folder: Azurite (tests/azure/azurite.py),
one per module; its connection string in the variable adlfs reads (here and in segpipe's
subprocesses), so `az://container/path` reaches it. Where Azurite cannot be installed (no Node.js)
these tests skip, except where SEGPIPE_REQUIRE_AZURE is set (CI), which fails them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from tests.azure.azurite import AzuriteUnavailable, azurite

VARIABLE = "AZURE_STORAGE_CONNECTION_STRING"


@contextmanager
def connected(connection: str) -> Iterator[dict[str, str]]:
    """adlfs's variable set to `connection` while the block runs, and no client of another one."""
    import adlfs

    saved = os.environ.get(VARIABLE)
    os.environ[VARIABLE] = connection
    adlfs.AzureBlobFileSystem.clear_instance_cache()
    try:
        yield {VARIABLE: connection}
    finally:
        adlfs.AzureBlobFileSystem.clear_instance_cache()
        if saved is None:
            os.environ.pop(VARIABLE, None)
        else:
            os.environ[VARIABLE] = saved


@pytest.fixture(scope="module")
def azure_env() -> Iterator[dict[str, str]]:
    with ExitStack() as stack:
        try:
            connection = stack.enter_context(azurite())
        except AzuriteUnavailable as exc:
            if os.environ.get("SEGPIPE_REQUIRE_AZURE"):
                raise
            pytest.skip(str(exc))
        yield stack.enter_context(connected(connection))
