"""The real Apache Kafka beside compactlog: a KRaft broker, Kafka's tools, its Java clients.

Everything runs from the jars that ``scripts/setup-env.sh`` resolves from Maven Central through
``tests/kafka/pom.xml`` into ``.kafka/libs`` (nothing is downloaded here). Each piece is a plain
``java -cp .kafka/libs/* <main class>`` process, the way Kafka's own ``bin/*.sh`` scripts start
them:

* :class:`KafkaBroker`: a single-node KRaft broker (``process.roles=broker,controller``) on
  127.0.0.1 over a log directory of the caller's choosing, formatted on first start, stopped
  cleanly (SIGTERM, as ``kafka-server-stop.sh``) or with SIGKILL. Its log goes to
  ``server.log`` and the cleaner's to ``log-cleaner.log`` in the broker's work directory, as
  Kafka's own log4j2 configuration splits them.
* :func:`run_tool`: one of Kafka's command-line tools by its script name (``kafka-topics``,
  ``kafka-dump-log``, ...), with the tools' logging (WARN and above, to stderr).
* :func:`java_classes` / :func:`run_java`: Java programs of the test suite (``tests/kafka/java``)
  compiled once against the same jars.

:func:`unavailable` says, in one line, why this tier cannot run here (no ``java``, no jars).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from compactlog.storage.checkpoint import parse_checkpoint
from compactlog.storage.kraft_metadata import random_uuid

#: The Kafka release the tier runs; tests/kafka/pom.xml pins the same one.
KAFKA_VERSION = "4.4.0"

ROOT = Path(__file__).resolve().parents[2]
#: Where scripts/setup-env.sh puts the jars (``mvn dependency:copy-dependencies``).
LIBS = Path(os.environ.get("COMPACTLOG_KAFKA_LIBS", ROOT / ".kafka" / "libs"))
JAVA_SOURCES = Path(__file__).resolve().parent / "java"

#: Kafka's ``bin/<script>.sh`` names and the main class each one runs in Kafka 4.x.
TOOLS: Mapping[str, str] = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
}

#: JVM options of the short-lived tool processes: they start in about a second; the serial
#: collector and C1 alone shave a third off that and are plenty for a tool's work.
TOOL_JVM_OPTS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss4m")

#: The broker's heap: Kafka's scripts default to 1 GiB; the cleaner's 128 MiB dedupe buffer
#: (``log.cleaner.dedupe.buffer.size``) and a test's few topics fit well in 768 MiB.
BROKER_HEAP = os.environ.get("COMPACTLOG_KAFKA_HEAP", "768m")

#: Settings of every test broker: one node that is its own controller, replication factor 1
#: for Kafka's internal topics, and groups that form at once (Kafka's 3 s initial rebalance
#: delay only slows tests; the same is set on compactlog's broker where tests compare them).
BASE_CONFIG: Mapping[str, str] = {
    "process.roles": "broker,controller",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

_LOG4J_BROKER = """\
Configuration:
  Appenders:
    File:
      - name: SERVER
        fileName: "{server}"
        PatternLayout: {{pattern: "[%d] %p %m (%c)%n"}}
      - name: CLEANER
        fileName: "{cleaner}"
        PatternLayout: {{pattern: "[%d{{UNIX_MILLIS}}] %p %m (%c)%n"}}
  Loggers:
    Root:
      level: INFO
      AppenderRef: [{{ref: SERVER}}]
    Logger:
      - name: org.apache.kafka.storage.internals.log.LogCleaner
        level: INFO
        additivity: false
        AppenderRef: [{{ref: CLEANER}}]
      - name: org.apache.kafka.storage.internals.log.LogCleaner$CleanerThread
        level: INFO
        additivity: false
        AppenderRef: [{{ref: CLEANER}}]
      - name: org.apache.kafka.storage.internals.log.LogCleanerManager
        level: INFO
        additivity: false
        AppenderRef: [{{ref: CLEANER}}]
      - name: org.apache.kafka.storage.internals.log.Cleaner
        level: INFO
        additivity: false
        AppenderRef: [{{ref: CLEANER}}]
"""

_LOG4J_TOOLS = """\
Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout: {pattern: "[%d] %p %m (%c)%n"}
  Loggers:
    Root:
      level: WARN
      AppenderRef: [{ref: STDERR}]
"""


class KafkaUnavailable(RuntimeError):
    """Java or Kafka's jars are missing: the ``kafka`` tier cannot run here."""


def unavailable() -> str | None:
    """Why the Kafka tier cannot run on this machine, in one line; ``None`` when it can."""
    if shutil.which("java") is None:
        return "no java on PATH (the kafka tier runs Apache Kafka; it needs Java 17+)"
    jar = LIBS / f"kafka_2.13-{KAFKA_VERSION}.jar"
    if not jar.is_file():
        return (
            f"Kafka {KAFKA_VERSION}'s jars are not in {LIBS} "
            "(scripts/setup-env.sh fetches them with mvn from tests/kafka/pom.xml)"
        )
    return None


def _classpath(extra: Sequence[Path] = ()) -> str:
    reason = unavailable()
    if reason is not None:
        raise KafkaUnavailable(reason)
    return os.pathsep.join([*(str(p) for p in extra), str(LIBS / "*")])


def _config_file(path: Path, text: str) -> Path:
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def tools_log4j() -> Path:
    return _config_file(ROOT / ".kafka" / "tools-log4j2.yaml", _LOG4J_TOOLS)


def run_tool(
    tool: str,
    *args: str,
    input: str | None = None,
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools by its script name; stdout and stderr come back as text."""
    return _run_main(TOOLS[tool], args, [], input, timeout, env)


def _run_main(
    main_class: str,
    args: Sequence[str],
    classpath: Sequence[Path],
    input: str | None,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """A short-lived JVM running ``main_class`` with the tools' options and logging."""
    command = [
        "java",
        *TOOL_JVM_OPTS,
        f"-Dlog4j2.configurationFile={tools_log4j()}",
        "-cp",
        _classpath(classpath),
        main_class,
        *args,
    ]
    return subprocess.run(
        command,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
        preexec_fn=_die_with_parent,
    )


def java_classes() -> Path:
    """The suite's Java programs (tests/kafka/java/*.java), compiled once per source version."""
    sources = sorted(JAVA_SOURCES.glob("*.java"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    digest.update(KAFKA_VERSION.encode())
    out = ROOT / ".kafka" / f"classes-{digest.hexdigest()[:16]}"
    if not (out / ".done").exists():
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        subprocess.run(
            ["javac", "-nowarn", "-cp", _classpath(), "-d", str(tmp), *map(str, sources)],
            check=True,
            capture_output=True,
            text=True,
        )
        (tmp / ".done").touch()
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return out


def run_java(
    main_class: str,
    *args: str,
    input: str | None = None,
    timeout: float = 180.0,
) -> subprocess.CompletedProcess[str]:
    """Run a main class of tests/kafka/java against Kafka's jars."""
    return _run_main(main_class, args, [java_classes()], input, timeout)


class Consumed(NamedTuple):
    """One record as a consumer sees it, in one shape for Kafka's Java consumer and the store."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def java_consume(bootstrap: str, topic: str, isolation: str | None = None) -> list[Consumed]:
    """Every record of ``topic`` as Kafka's Java consumer reads it (tests/kafka/java/ConsumeAll),
    partition by partition, from the log start to the end offset at the start of the read."""
    args = [bootstrap, topic] + ([isolation] if isolation else [])
    done = run_java("ConsumeAll", *args)
    if done.returncode != 0:
        raise RuntimeError(f"ConsumeAll {topic} failed ({done.returncode}):\n{done.stderr}")
    records = []
    for line in done.stdout.splitlines():
        r = json.loads(line)
        headers = tuple((base64.b64decode(k).decode(), _unb64(v)) for k, v in r["headers"])
        records.append(
            Consumed(
                r["partition"],
                r["offset"],
                r["timestamp"],
                _unb64(r["key"]),
                _unb64(r["value"]),
                headers,
            )
        )
    return records


def store_view(store: Any, topic: str) -> list[Consumed]:
    """Every record of ``topic`` as compactlog's ``Store.read`` returns it, in the same shape."""
    return [
        Consumed(p, r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
        for p in range(store.partitions(topic))
        for r in store.read(topic, p, store.log_start_offset(topic, p))
    ]


def _die_with_parent() -> None:
    """``preexec_fn`` of every Java process: SIGKILL it when the process that started it dies,
    so that a test run killed or crashed mid-way leaves no Kafka broker behind (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class KafkaBroker:
    """One real Kafka broker (KRaft, combined broker and controller) on 127.0.0.1.

    ``data_dir`` is its single ``log.dirs`` entry: formatted (``kafka-storage format``) when it
    has no ``meta.properties`` yet, reused as it is otherwise, so that a test can stop the
    broker, look at or change its files, and start it again over them. ``config`` adds to or
    overrides :data:`BASE_CONFIG` with Kafka's broker setting names.
    """

    def __init__(
        self,
        workdir: Path,
        data_dir: Path | None = None,
        config: Mapping[str, object] | None = None,
        node_id: int = 1,
        heap: str = BROKER_HEAP,
    ) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir or workdir / "data"
        self.node_id = node_id
        self.heap = heap
        self.port = free_port()
        self.controller_port = free_port()
        self.config: dict[str, str] = {k: str(v) for k, v in (config or {}).items()}
        self.process: subprocess.Popen[bytes] | None = None
        self.server_log = self.workdir / "server.log"
        self.cleaner_log = self.workdir / "log-cleaner.log"
        self.cluster_id = random_uuid()

    # -- configuration ----------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        return {
            **BASE_CONFIG,
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{self.node_id}@127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.config,
        }

    def _write_config(self) -> Path:
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        _config_file(
            self.workdir / "log4j2.yaml",
            _LOG4J_BROKER.format(server=self.server_log, cleaner=self.cleaner_log),
        )
        return path

    def format(self) -> None:
        """``kafka-storage format`` the data directory (done by :meth:`start` when needed)."""
        properties = self._write_config()
        done = run_tool("kafka-storage", "format", "-t", self.cluster_id, "-c", str(properties))
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{done.stdout}{done.stderr}")

    # -- life cycle -------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> KafkaBroker:
        if not (self.data_dir / "meta.properties").exists():
            self.format()
        properties = self._write_config()
        mark = self.server_log.stat().st_size if self.server_log.exists() else 0
        command = [
            "java",
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.yaml'}",
            f"-Dkafka.logs.dir={self.workdir}",
            "-cp",
            _classpath(),
            "kafka.Kafka",
            str(properties),
        ]
        with (self.workdir / "process.out").open("ab") as out:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only async-signal-safe calls
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"Kafka exited with {self.process.returncode} while starting:\n"
                    + self.log_tail()
                )
            if "Kafka Server started" in self._log_since(mark):
                return self
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"Kafka did not start in {timeout} s:\n{self.log_tail()}")

    def _log_since(self, mark: int) -> str:
        try:
            with self.server_log.open("rb") as f:
                f.seek(mark)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 90.0) -> int:
        """A clean shutdown (SIGTERM), as ``kafka-server-stop.sh``: the broker writes its
        checkpoints and the clean-shutdown marker before it exits."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL: no checkpoint, no marker, whatever the page cache holds stays."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        text = ""
        for path in (self.server_log, self.workdir / "process.out"):
            if path.exists():
                text += (
                    f"--- {path.name}\n"
                    + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
                    + "\n"
                )
        return text

    # -- what a test asks of it -------------------------------------------------------------
    def tool(self, tool: str, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        """Run a Kafka tool with ``--bootstrap-server`` pointing at this broker."""
        return run_tool(tool, "--bootstrap-server", self.bootstrap, *args, **kwargs)  # type: ignore[arg-type]

    def cleaner_checkpoint(self) -> dict[tuple[str, int], int]:
        """The ``cleaner-offset-checkpoint`` of the log directory (first dirty offsets)."""
        return read_offset_checkpoint(self.data_dir / "cleaner-offset-checkpoint")

    def wait_for(self, predicate: object, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():  # type: ignore[operator]
                return
            if not self.running:
                raise RuntimeError(f"Kafka exited while waiting for {what}:\n{self.log_tail()}")
            time.sleep(0.1)
        raise TimeoutError(f"Kafka: no {what} after {timeout} s:\n{self.log_tail()}")

    def cleaner_summaries(self) -> list[CleanerSummary]:
        """The cleaner's summary messages so far, in the order they were logged."""
        if not self.cleaner_log.exists():
            return []
        text = self.cleaner_log.read_text(errors="replace")
        return [
            CleanerSummary(int(m["ms"]), m["log"], int(m["fdo"]), int(m["end"]), m["text"])
            for m in _SUMMARY.finditer(text)
        ]

    def uncleanable(self) -> set[str]:
        """The partitions (``<topic>-<partition>``) Kafka's cleaner marked uncleanable."""
        if not self.cleaner_log.exists():
            return set()
        return set(_UNCLEANABLE.findall(self.cleaner_log.read_text(errors="replace")))


_UNCLEANABLE = re.compile(r"Marking its partition \((\S+)\) as uncleanable")


class CleanerSummary(NamedTuple):
    """One ``Log cleaner thread N cleaned log ...`` message of Kafka's cleaner log."""

    logged_ms: int  # when it was logged: the end of that cleaning
    log: str  # <topic>-<partition>
    first_dirty_offset: int
    end_offset: int
    text: str


_SUMMARY = re.compile(
    r"^\[(?P<ms>\d+)\] INFO (?:\[[^\]]*\]: )?"
    r"(?P<text>\s*Log cleaner thread \d+ cleaned log (?P<log>\S+) "
    r"\(dirty section = \[(?P<fdo>\d+), (?P<end>\d+)\]\).*?reduction[^\n]*)",
    re.MULTILINE | re.DOTALL,
)


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """An offset checkpoint file (Kafka's format; a missing file has no entries)."""
    if not path.exists():
        return {}
    return parse_checkpoint(path.read_bytes(), str(path))


def write_offset_checkpoint(path: Path, entries: Mapping[tuple[str, int], int]) -> None:
    """Write ``entries`` in Kafka's offset checkpoint format (as Kafka does, via a .tmp file)."""
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for (t, p), o in entries.items()]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


@contextlib.contextmanager
def running(broker: KafkaBroker) -> Iterator[KafkaBroker]:
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
