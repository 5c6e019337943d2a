"""Apache Kafka's own broker for tests: one combined broker+controller JVM (KRaft) on 127.0.0.1 with
free ports, its log directory wherever the test says. The jars come from Maven Central through
`tests/kafka/pom.xml` into a cache outside the repository (`$SEGPIPE_CACHE_DIR`, by default
`~/.cache/segpipe`), fetched once per pom.

    .venv/bin/python -m tests.kafka.broker      # fetch the jars; print how to run a broker by hand
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.runtime.class_archive import QUIET
from segment_io.exit_codes import ExitCode

POM = Path(__file__).with_name("pom.xml")  # the current release
TIERED_POM = Path(__file__).with_name("pom-tiered.xml")  # the release with LocalTieredStorage
START_TIMEOUT_S = 90.0  # a cold JVM on 2 busy cores answers in about 10 s
STOP_TIMEOUT_S = 30.0  # a clean shutdown flushes and checkpoints; killed after this
FETCH_TIMEOUT_S = 600.0
START_ATTEMPTS = 3  # fresh ports after a start that could not bind its own
BIND_FAILED = "Address already in use"
BROKER_MAIN = "kafka.Kafka"
# The one error a healthy broker+controller logs: as it restarts on a busy machine, its broker side
# may ask to register before its controller side has become the active controller; the controller
# answers "not controller" (logged at ERROR with the request) and the broker asks again.
REGISTRATION_RETRY = ("apiKey=CONTROLLER_REGISTRATION", "NotControllerException")
# For a broker serving a log a test put in its log directory (restored, cut) and compares with
# segpipe's view of it: neither the cleaner nor retention and the other scheduled log tasks may
# change it meanwhile (on a busy machine the cleaner's first pass, 15 s after the start, came in
# the middle of such a comparison).
AS_PLACED = {"log.cleaner.enable": "false", "log.initial.task.delay.ms": str(3_600_000)}


class BrokerUnavailable(RuntimeError):
    """Java or Maven is missing, or the jars could not be fetched: the tests that need a broker
    cannot run here (they skip with this reason, or fail where SEGPIPE_REQUIRE_KAFKA=1)."""


def cache_dir(pom: Path = POM) -> Path:
    root = Path(os.environ.get("SEGPIPE_CACHE_DIR", Path.home() / ".cache" / "segpipe"))
    return root / f"kafka-{hashlib.sha256(pom.read_bytes()).hexdigest()[:12]}"


def class_archive(pom: Path = POM) -> Path:
    """The class-data archive of `pom`'s broker, beside its jars."""
    return cache_dir(pom) / "broker.jsa"


def jars(pom: Path = POM) -> Path:
    """The directory of the jars `pom` names, fetched through Maven on first use (atomically: a
    fetch that stops half way leaves nothing that looks complete). One process fetches at a time
    (a lock file beside them): the two test workers start their first brokers together on a new
    machine, and a second fetch that replaced the first's directory would pull the jars from
    under the JVM already running on them."""
    libs = cache_dir(pom) / "libs"
    if (libs / ".complete").exists():
        return libs
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise BrokerUnavailable(f"{tool} not on PATH: Kafka's broker cannot be fetched or run")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with open(libs.with_name("libs.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # bounded: the holder's fetch ends within FETCH_TIMEOUT_S
        if (libs / ".complete").exists():  # fetched by the process this one waited for
            return libs
        return _fetch(pom, libs)


def _fetch(pom: Path, libs: Path) -> Path:
    """Maven's copy of `pom`'s jars made `libs`, whole or not at all (the caller holds the lock)."""
    partial = libs.with_name(f"libs.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        proc = subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={partial}",
            ],
            capture_output=True,
            text=True,
            timeout=FETCH_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise BrokerUnavailable(f"fetching Kafka's jars took over {FETCH_TIMEOUT_S:.0f} s") from exc
    if proc.returncode != ExitCode.OK:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        raise BrokerUnavailable("fetching Kafka's jars through Maven failed: " + " | ".join(tail))
    (partial / ".complete").touch()
    shutil.rmtree(libs, ignore_errors=True)
    partial.rename(libs)
    return libs


def cluster_id() -> str:
    """A random cluster id as Kafka makes one: a UUID in URL-safe base64 that does not start with
    "-" (the storage tool would read it as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


LOG4J2 = """
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
"""


@dataclass
class Broker:
    """One KRaft broker+controller. `start()` formats its storage the first time; `stop()` shuts
    it down cleanly (killed if it hangs). Its log is `home/server.log`."""

    home: Path
    settings: dict[str, str] = field(default_factory=dict)  # broker configs on top of the defaults
    pom: Path = POM  # which release
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    _archive_partial: Path | None = field(default=None, repr=False)

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def server_log(self) -> Path:
        return self.home / "server.log"

    def _properties(self) -> Path:
        configs = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            # The controller logs an event slower than this at ERROR (2 s by default): on two cores
            # under the whole suite it says nothing of the data, and errors() must stay empty.
            "controller.performance.always.log.threshold.ms": "60000",
            **self.settings,
        }
        path = self.home / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in configs.items()))
        return path

    def _java(self, main: str, *args: str) -> list[str]:
        log4j = self.home / "log4j2.properties"
        log4j.write_text(LOG4J2.format(log=self.server_log))
        return [
            "java",
            "-Xmx512m",
            "-XX:TieredStopAtLevel=1",
            *self._class_archive(main),
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            f"{jars(self.pom)}/*",
            main,
            *args,
        ]

    def _class_archive(self, main: str) -> list[str]:
        """JVM options that map the release's class archive (the classes a broker loads, stored
        once: about 2.5 of a start's 5.5 s of CPU); without one yet, a broker's JVM writes it as
        it exits (`_keep_class_archive`). The JVM ignores an archive another JVM wrote."""
        final = class_archive(self.pom)
        if final.is_file():
            return [f"-XX:SharedArchiveFile={final}", *QUIET.split()]
        if main != BROKER_MAIN:
            return []
        self._archive_partial = final.with_name(f"{final.name}.partial-{os.getpid()}-{id(self)}")
        return [f"-XX:ArchiveClassesAtExit={self._archive_partial}", *QUIET.split()]

    def _keep_class_archive(self, clean_exit: bool) -> None:
        """Publish the archive this broker's JVM wrote as it exited (whole: it exited by itself),
        or drop it (killed while writing)."""
        partial, self._archive_partial = self._archive_partial, None
        if partial is None or not partial.exists():
            return
        if clean_exit:
            partial.replace(class_archive(self.pom))
        else:
            partial.unlink(missing_ok=True)

    def start(self) -> Broker:
        """Start the broker and wait until it answers as itself. Its ports were free when picked,
        but a stopped broker's ports are anyone's (another test's broker or client may hold one by
        the time it restarts): a start that cannot bind picks fresh ports and tries again, and
        readiness is taken only from a broker with this one's cluster id, so a client never talks
        to another test's broker."""
        self.home.mkdir(parents=True, exist_ok=True)
        for attempt in range(START_ATTEMPTS):
            properties = self._properties()
            if not (self.log_dir / "meta.properties").exists():
                subprocess.run(
                    self._java(
                        "kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", str(properties)
                    ),
                    check=True,
                    capture_output=True,
                    timeout=120,
                )
            seen = len(self.log_lines(BIND_FAILED))
            self.proc = subprocess.Popen(
                self._java(BROKER_MAIN, str(properties)),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            if self._wait_ready(time.monotonic() + START_TIMEOUT_S):
                return self
            self._keep_class_archive(clean_exit=False)
            if len(self.log_lines(BIND_FAILED)) == seen or attempt + 1 == START_ATTEMPTS:
                break
            self.port, self.controller_port = free_port(), free_port()
        raise RuntimeError(f"Kafka's broker exited with {self.proc.returncode}; see {self.server_log}")

    def cluster(self) -> str:
        """This broker's cluster id, as its storage was formatted."""
        for line in (self.log_dir / "meta.properties").read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.partition("=")[2].strip()
        raise RuntimeError(f"{self.log_dir}/meta.properties names no cluster.id")

    def _wait_ready(self, deadline: float) -> bool:
        """True once this broker (its cluster id) answers; False if its process exited."""
        from kafka.admin import KafkaAdminClient

        ours = self.cluster()
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return False
            try:
                # The client only once the port takes connections: kafka-python's bootstrap retries
                # a refused connection with a backoff that grows to 30 s, and that backoff (not the
                # broker) was most of a start on a busy machine (30 s for a broker up in 11).
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap,
                    request_timeout_ms=3000,
                    reconnect_backoff_max_ms=500,
                    bootstrap_timeout_ms=5000,
                )
                try:
                    described = admin.describe_cluster()
                    if described.get("cluster_id") == ours and described.get("brokers"):
                        return True
                finally:
                    admin.close()
            except Exception:  # not listening yet, or not registered yet
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(
                    f"Kafka's broker did not start in {START_TIMEOUT_S:.0f} s; see {self.server_log}"
                )
            time.sleep(0.25)  # bounded by the deadline

    def stop(self) -> None:
        """A clean shutdown (SIGTERM): Kafka flushes, writes its checkpoints and its clean-shutdown
        marker. Killed if it has not exited in STOP_TIMEOUT_S."""
        if self.proc is None or self.proc.poll() is not None:
            self._keep_class_archive(clean_exit=False)
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(
                f"Kafka's broker did not stop in {STOP_TIMEOUT_S:.0f} s and was killed"
            ) from None
        self._keep_class_archive(clean_exit=True)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._keep_class_archive(clean_exit=False)

    def _log_text(self) -> str:
        return self.server_log.read_text(errors="replace") if self.server_log.exists() else ""

    def log_lines(self, *needles: str) -> list[str]:
        """Lines of the broker's log that contain any of `needles`."""
        return [line for line in self._log_text().splitlines() if any(n in line for n in needles)]

    def errors(self) -> list[str]:
        """The errors the broker logged (each with the lines after it: its exception), but the
        registration a restarting broker retries (REGISTRATION_RETRY)."""
        entries: list[str] = []
        for line in self._log_text().splitlines():
            if line.startswith("[") or not entries:  # each entry begins with its time
                entries.append(line)
            else:
                entries[-1] += "\n" + line
        return [
            e
            for e in entries
            if " ERROR " in e.partition("\n")[0] and not all(mark in e for mark in REGISTRATION_RETRY)
        ]


def main() -> None:
    libs = jars()
    print(f"Kafka's broker jars: {libs} ({sum(1 for _ in libs.glob('*.jar'))} jars)")
    tool = f"java -cp '{libs}/*' kafka.tools.StorageTool"
    print("Run a broker by hand (KRaft, one node; server.properties as in Kafka's config/server.properties):")
    print(f"  {tool} format -t $({tool} random-uuid) -c server.properties --standalone")
    print(f"  java -cp '{libs}/*' kafka.Kafka server.properties")
    print("The tests start their own (tests/kafka/, marked `kafka`): .venv/bin/python -m pytest -m kafka")


if __name__ == "__main__":
    main()
