"""The `segpipe` command line: one module per command (Spark is imported only by the commands
that run it)."""
