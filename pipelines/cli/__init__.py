"""The `segpipe` command line: one module per command (Spark is imported only by the commands
that run it)."""

from pipelines.runtime.worker_daemon import hold_to_one_thread

# Before numpy and pyarrow load (an operator's own setting wins): no BLAS threads and no allocator
# thread, so that the driver runs one thread when a local master's worker processes start and they
# can fork from it (runtime.local_workers) instead of from a server that imports everything again.
hold_to_one_thread()
