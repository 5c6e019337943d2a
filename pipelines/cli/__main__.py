"""`python -m pipelines.cli ...`, and the application file spark-submit runs
(`spark-submit [options] pipelines/cli/__main__.py clean SRC DST ...`)."""

import os
import sys

if not __package__:
    # Run as a file, this directory leads sys.path, where its modules would shadow top-level
    # names (`config`, `tools`, ...) for every library: take it off and use the installed package.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]

from pipelines.cli.main import command

# Only when run: a local master's worker processes fork from a server (multiprocessing's
# forkserver) that imports the application file again as `__mp_main__`, and would otherwise run
# the whole command a second time there, beside the driver.
if __name__ == "__main__":
    sys.exit(command())
