"""A driver that spark-submit launched: its JVM already runs (started by spark-submit, which
passes the driver the port and secret of its gateway), and the master it was submitted to is
that JVM's `spark.master` property, read without starting Spark."""

from __future__ import annotations

import os
from functools import cache

# What spark-submit sets in the environment of the Python driver it launches.
GATEWAY_PORT = "PYSPARK_GATEWAY_PORT"
GATEWAY_SECRET = "PYSPARK_GATEWAY_SECRET"
SPARK_MASTER = "spark.master"  # Spark's setting (and JVM property) naming the master
ANSWER_TIMEOUT_S = 10.0  # the submitter's JVM answers in milliseconds; this bounds a stuck one


def under_spark_submit() -> bool:
    """Whether spark-submit launched this driver (its JVM then already runs)."""
    return bool(os.environ.get(GATEWAY_PORT))


def submitted_master() -> str | None:
    """The master spark-submit was given (its --master, --conf or spark-defaults.conf: all set the
    JVM's `spark.master` property), or None where this driver was not submitted or the JVM does
    not answer (the run then treats the master as not local, and Spark reports its own error)."""
    port = os.environ.get(GATEWAY_PORT)
    if not port:
        return None
    return _master_of(port, os.environ.get(GATEWAY_SECRET, ""))


@cache
def _master_of(port: str, secret: str) -> str | None:
    """One question to the submitter's gateway over a connection of its own, closed at once:
    pyspark itself (about a second to import) loads only where the run starts Spark."""
    from py4j.java_gateway import GatewayParameters, JavaGateway
    from py4j.protocol import Py4JError

    try:
        gateway = JavaGateway(
            gateway_parameters=GatewayParameters(
                port=int(port), auth_token=secret, read_timeout=ANSWER_TIMEOUT_S
            )
        )
    except ValueError:  # not a port
        return None
    try:
        master = gateway.jvm.java.lang.System.getProperty(SPARK_MASTER)
    except (Py4JError, OSError):  # refused, reset or timed out: no answer
        return None
    finally:
        gateway.close(keep_callback_server=False, close_callback_server_connections=False)
    return str(master) if master else None
