"""PySpark's Python worker daemon, started with numba's compiler back end already loaded.

Spark forks every Python worker from this daemon. The first numba call in a process costs about
0.4 s (loading LLVM), paid here once instead of by every worker; each worker still imports
segpipe itself. Nothing that starts a thread is imported before the fork: numpy is held to one
BLAS thread, and pyarrow (which starts one) is left to the workers.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from numba import njit


@njit(cache=True)
def _first_call(x: int) -> int:
    return x + 1


def main() -> None:
    _first_call(1)
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
