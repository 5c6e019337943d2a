"""What a job is given to run on: `Spark`, a session (classic or Spark Connect: both satisfy
`SparkSessionLike`) or a `LazySpark` that starts one at first use. Jobs hand it to the runtime
(dataflow, tasks), which alone asks what only one kind of session has."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    from pipelines.runtime.session import LazySpark


class SparkSessionLike(Protocol):
    """What every SparkSession offers, classic and Spark Connect alike, that segpipe relies on:
    frames made from data, and the session's runtime settings."""

    @property
    def conf(self) -> Any: ...

    def createDataFrame(self, *args: Any, **kwargs: Any) -> Any: ...


Spark: TypeAlias = "LazySpark | SparkSessionLike"


if TYPE_CHECKING:
    from pyspark.sql import SparkSession as ClassicSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    def _both_are_sessions(classic: ClassicSession, connect: ConnectSession) -> list[SparkSessionLike]:
        """Checked by mypy, never run: both kinds of session satisfy SparkSessionLike."""
        return [classic, connect]
