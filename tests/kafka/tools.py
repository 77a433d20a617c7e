"""Kafka's tools run side by side against a real Kafka 4.4 broker and ``compactlog serve``.

:class:`BrokerPair` holds one of each, both with node id 1 and the same group settings, and
runs a tool invocation against both at once (two JVMs in parallel: the machines this runs on
have few cores, and each tool start costs about a second of CPU). :meth:`BrokerPair.same` then
checks that the two outcomes are the same: exit status, stdout and stderr, after the
normalisations of :data:`NORMALISATIONS`, each of which names what must differ between two
brokers and why. Everything else must be byte for byte what Kafka's tools print against Kafka.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.broker.helpers.server import CliBroker
from tests.kafka.harness import LIBS, TOOL_JVM_OPTS, TOOLS, KafkaBroker, run_tool, tools_log4j

#: Broker settings both brokers share: Kafka's harness runs node 1 with groups that form at once.
SHARED_CONFIG = {"node.id": 1, "group.initial.rebalance.delay.ms": 0}


@dataclass(frozen=True)
class Outcome:
    """What one tool invocation did: exit status and output, normalised."""

    returncode: int
    stdout: str
    stderr: str

    def lines(self) -> list[str]:
        return self.stdout.splitlines()


@dataclass(frozen=True)
class Normalisation:
    """One difference that two brokers must show, and why."""

    pattern: re.Pattern[str]
    replacement: str | Callable[[re.Match[str]], str]
    why: str


def _rule(pattern: str, replacement: str, why: str, flags: int = 0) -> Normalisation:
    return Normalisation(re.compile(pattern, flags), replacement, why)


#: Applied to every stdout and stderr, in order. Broker-specific ones (ports, log directories)
#: are added per broker by :meth:`BrokerPair.normalise`.
NORMALISATIONS: tuple[Normalisation, ...] = (
    _rule(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]", "[<time>]",
          "log lines carry the time they were written", re.M),
    _rule(r"TopicId: [A-Za-z0-9_-]{22}", "TopicId: <topic id>",
          "topic ids are random (Uuid.randomUuid) per topic and broker"),
    _rule(r"\b(console-consumer|consumer-[\w.-]+-\d+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-"
          r"[0-9a-f]{4}-[0-9a-f]{12}\b", r"\1-<member uuid>",
          "member ids are the client id plus a random UUID chosen by the coordinator"),
    _rule(r"(?<=\s)[A-Za-z0-9_-]{22}(?= +/\d)", "<member uuid>",
          "a KIP-848 member id is a random Uuid the consumer chooses (KIP-1082)"),
    _rule(r"console-consumer-\d+\b", "console-consumer-<n>",
          "a console consumer without --group joins a group named with a random number"),
)  # fmt: skip


class BrokerPair:
    """A Kafka 4.4 broker and ``compactlog serve`` side by side; both running after start."""

    def __init__(self, kafka: KafkaBroker, compactlog: CliBroker) -> None:
        self.kafka = kafka
        self.compactlog = compactlog

    @property
    def brokers(self) -> tuple[tuple[str, str, Path], ...]:
        """(name, bootstrap, log directory) of each broker."""
        return (
            ("kafka", self.kafka.bootstrap, self.kafka.data_dir),
            ("compactlog", self.compactlog.bootstrap, self.compactlog.data_dir),
        )

    def normalise(self, text: str, bootstrap: str, log_dir: Path) -> str:
        port = bootstrap.rsplit(":", 1)[1]
        # Each broker listens on a free port of its own, and has its own log directory.
        text = text.replace(f"127.0.0.1:{port}", "127.0.0.1:<port>")
        text = text.replace(str(log_dir), "<log dir>")
        for rule in NORMALISATIONS:
            text = rule.pattern.sub(rule.replacement, text)  # type: ignore[arg-type]
        return text

    def run(
        self, tool: str, *args: str, input: str | None = None, bootstrap: bool = True
    ) -> tuple[Outcome, Outcome]:
        """``tool args`` against Kafka and against compactlog, in parallel; normalised."""

        def one(bootstrap_server: str, log_dir: Path) -> Outcome:
            extra = ("--bootstrap-server", bootstrap_server) if bootstrap else ()
            done = run_tool(tool, *extra, *args, input=input)
            return Outcome(
                done.returncode,
                self.normalise(done.stdout, bootstrap_server, log_dir),
                self.normalise(done.stderr, bootstrap_server, log_dir),
            )

        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(one, b, d) for _, b, d in self.brokers]
            kafka, compactlog = (f.result() for f in futures)
        return kafka, compactlog

    def same(
        self,
        tool: str,
        *args: str,
        input: str | None = None,
        returncode: int = 0,
        sort_stdout: str | None = None,
    ) -> Outcome:
        """Run on both, require the same outcome with ``returncode``; return Kafka's.

        ``sort_stdout`` names why the order of stdout lines may differ (it is then compared
        sorted), for output whose order depends on timing, not on the broker.
        """
        kafka, compactlog = self.run(tool, *args, input=input)
        where = f"{tool} {' '.join(args)}"
        if os.environ.get("COMPACTLOG_SHOW_TOOLS"):  # see what the tools print, with pytest -s
            print(f"\n$ {where}  (exit {kafka.returncode} / {compactlog.returncode})")
            print(kafka.stdout + kafka.stderr, end="")
        if sort_stdout is not None:
            kafka = Outcome(kafka.returncode, _sorted(kafka.stdout), kafka.stderr)
            compactlog = Outcome(
                compactlog.returncode, _sorted(compactlog.stdout), compactlog.stderr
            )
        assert compactlog == kafka, (
            f"{where}: compactlog differs from Kafka\n{_diff(kafka, compactlog)}"
        )
        assert kafka.returncode == returncode, f"{where}: exit {kafka.returncode}\n{kafka}"
        return kafka


def _sorted(text: str) -> str:
    return "".join(sorted(text.splitlines(keepends=True)))


def _diff(kafka: Outcome, compactlog: Outcome) -> str:
    out = [f"exit: kafka {kafka.returncode}, compactlog {compactlog.returncode}"]
    for name in ("stdout", "stderr"):
        a, b = getattr(kafka, name), getattr(compactlog, name)
        if a != b:
            out.append(f"--- {name}")
            out += difflib.unified_diff(
                a.splitlines(), b.splitlines(), "kafka", "compactlog", lineterm=""
            )
    return "\n".join(out)


def start_pair(
    kafka: Callable[..., KafkaBroker], compactlog_serve: Callable[..., CliBroker]
) -> BrokerPair:
    """Start both brokers (Kafka's settings from the harness, compactlog's to match them)."""
    compactlog = compactlog_serve(SHARED_CONFIG).start()
    return BrokerPair(kafka(), compactlog)


class Background:
    """A tool left running (a console consumer in a group) on both brokers; stopped with
    SIGTERM, which runs the tools' shutdown hooks (the consumer leaves its group)."""

    def __init__(self, pair: BrokerPair, tool: str, *args: str) -> None:
        self.processes: list[subprocess.Popen[str]] = []
        for _, bootstrap, _ in pair.brokers:
            command = [
                "java", *TOOL_JVM_OPTS, f"-Dlog4j2.configurationFile={tools_log4j()}",
                "-cp", str(LIBS / "*"), TOOLS[tool], "--bootstrap-server", bootstrap, *args,
            ]  # fmt: skip
            self.processes.append(
                subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )

    def stop(self, timeout: float = 60.0) -> list[tuple[int, str, str]]:
        results = []
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
            try:
                out, err = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                out, err = process.communicate()
            results.append((process.returncode, out, err))
        return results


def eventually(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """``check()`` until it returns something true (returned), every half second."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {timeout} s")
        time.sleep(0.5)
