"""Kafka's own Java clients against ``compactlog serve`` and against Kafka 4.4, side by side.

The scenarios the Python clients run in tests/broker/test_clients_*.py, with Kafka's
``KafkaProducer`` (idempotent, its default), ``KafkaConsumer`` (classic group protocol, its
default) and ``Admin``, as the programs of tests/kafka/java print them (JSON lines). Each runs
against both brokers (tests/kafka/tools.py: node id 1, the same settings) and the outcomes are
compared; where they cannot be equal the test says why and compares what must agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.harness import (
    LIBS,
    TOOL_JVM_OPTS,
    Consumed,
    java_classes,
    java_consume,
    run_java,
    run_tool,
    tools_log4j,
)
from tests.kafka.tools import SHARED_CONFIG, BrokerPair, eventually

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: Record timestamps: an hour ago, so that Kafka 4.4's message.timestamp.after.max.ms (one hour
#: ahead) never refuses one, at whole seconds apart.
BASE_TS = (int(time.time()) - 3600) * 1000
#: The cleaner settings of the cleaned-topic scenario, on both brokers.
CLEANER_CONFIG = {"log.cleaner.backoff.ms": 200}


@pytest.fixture
def pair(kafka: Callable[..., Any], compactlog_serve: Callable[..., Any]) -> BrokerPair:
    compactlog = compactlog_serve({**SHARED_CONFIG, **CLEANER_CONFIG}).start()
    return BrokerPair(kafka(config=CLEANER_CONFIG), compactlog)


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def java_both(pair: BrokerPair, main_class: str, *args: str) -> tuple[list[Any], list[Any]]:
    """``main_class BOOTSTRAP args`` against both brokers at once: their JSON lines."""
    java_classes()  # compiled once, before two threads would both compile them

    def one(bootstrap: str) -> list[Any]:
        done = run_java(main_class, bootstrap, *args)
        assert done.returncode == 0, f"{main_class} against {bootstrap}:\n{done.stderr}"
        return _lines(done.stdout)

    with ThreadPoolExecutor(2) as pool:
        kafka, compactlog = pool.map(one, [b for _, b, _ in pair.brokers])
    return kafka, compactlog


def consume_both(pair: BrokerPair, topic: str) -> tuple[list[Consumed], list[Consumed]]:
    java_classes()
    with ThreadPoolExecutor(2) as pool:
        kafka, compactlog = pool.map(
            lambda b: java_consume(b, topic), [b for _, b, _ in pair.brokers]
        )
    return kafka, compactlog


def dump_log(pair: BrokerPair, topic: str, partition: int) -> tuple[str, str]:
    """``kafka-dump-log --print-data-log`` of the partition's segments on each broker's disk."""
    out = []
    for _, _, data_dir in pair.brokers:
        directory = Path(data_dir) / f"{topic}-{partition}"
        files = ",".join(str(p) for p in sorted(directory.glob("*.log")))
        done = run_tool("kafka-dump-log", "--files", files, "--print-data-log")
        assert done.returncode == 0, done.stderr
        out.append(done.stdout.replace(str(directory), "<partition dir>"))
    return out[0], out[1]


# --- produce with every codec, read back ---------------------------------------------------------
def test_produce_every_codec_and_read_back(pair: BrokerPair) -> None:
    pair.same("kafka-topics", "--create", "--topic", "codecs", "--partitions", "2")
    for i, codec in enumerate(CODECS):
        kafka, compactlog = java_both(
            pair, "Produce", "codecs", codec, "12", "5", codec, str(BASE_TS + i * 100_000)
        )
        assert compactlog == kafka
        assert [r.get("error") for r in kafka] == [None] * 12
    kafka_read, compactlog_read = consume_both(pair, "codecs")
    assert compactlog_read == kafka_read
    assert len(kafka_read) == 60
    for record in kafka_read:  # what Produce sent: value "{codec}-{i}", headers, timestamps
        assert record.value is not None
        codec, i = record.value.decode().rsplit("-", 1)
        n = int(i)
        assert record.key == b"k%d" % (n % 5)
        assert record.headers == (("i", i.encode()),) + ((("none", None),) if n % 3 == 0 else ())
        assert record.timestamp == BASE_TS + CODECS.index(codec) * 100_000 + n * 1000
    # The same batches on disk, byte for byte (offsets, codecs, sizes, CRCs), as Kafka's own
    # kafka-dump-log reads them.
    for partition in (0, 1):
        kafka_dump, compactlog_dump = dump_log(pair, "codecs", partition)
        assert compactlog_dump == kafka_dump
        for codec in CODECS:
            assert f"compresscodec: {codec}" in kafka_dump


def test_keyless_records_to_a_compacted_topic_are_refused(pair: BrokerPair) -> None:
    pair.same("kafka-topics", "--create", "--topic", "compacted", "--config",
              "cleanup.policy=compact")  # fmt: skip
    kafka, compactlog = java_both(
        pair, "Produce", "compacted", "none", "3", "3", "x", str(BASE_TS), "-1", "keyless"
    )
    assert (
        compactlog
        == kafka
        == [
            {
                "error": "InvalidRecordException",
                "message": "Compacted topic cannot accept message without key in topic partition "
                "compacted-0",
            }
        ]
        * 3
    )
    ends = pair.same("kafka-get-offsets", "--topic", "compacted")
    assert ends.lines() == ["compacted:0:0"]  # nothing appended


# --- a consumer group of two Java consumers ------------------------------------------------------
class Member:
    """A GroupMember process: its JSON lines as they come, and a way to make it leave."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        command = [
            "java", *TOOL_JVM_OPTS, f"-Dlog4j2.configurationFile={tools_log4j()}",
            "-cp", f"{java_classes()}:{LIBS / '*'}", "GroupMember", bootstrap, topic, group,
        ]  # fmt: skip
        # stderr joins stdout, whose JSON lines are all the test reads (the rest shows in a
        # failure's captured output)
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:
            for line in self.process.stdout:
                if line.startswith("{"):
                    self.lines.append(json.loads(line))
                else:
                    print(line, end="")

    def assignment(self) -> list[int] | None:
        """The partitions of its last assignment (None before the first)."""
        found = None
        for line in self.lines:
            if "assigned" in line:
                found = line["assigned"]
            elif "revoked" in line:
                found = []
        return found

    def records(self) -> set[tuple[int, int, str]]:
        return {(r["partition"], r["offset"], r["value"]) for r in self.lines if "offset" in r}

    def leave(self, timeout: float = 60.0) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write("leave\n")
        self.process.stdin.close()
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(30)
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        member.kill()


def test_a_group_of_two_consumers_rebalances_on_leave_and_commits(
    pair: BrokerPair, members: list[Member]
) -> None:
    pair.same("kafka-topics", "--create", "--topic", "shared", "--partitions", "6")
    for part in range(6):
        java_both(pair, "Produce", "shared", "none", "5", "5", f"p{part}", str(BASE_TS), str(part))
    bootstraps = [b for _, b, _ in pair.brokers]
    first = [Member(b, "shared", "pair") for b in bootstraps]
    members.extend(first)
    eventually(lambda: all(m.assignment() == list(range(6)) for m in first), "one member with all")
    eventually(lambda: all(len(m.records()) == 30 for m in first), "every record read")
    second = [Member(b, "shared", "pair") for b in bootstraps]
    members.extend(second)

    def halves() -> bool:
        return all(
            sorted([a.assignment() or [], b.assignment() or []]) == [[0, 1, 2], [3, 4, 5]]
            for a, b in zip(first, second, strict=True)
        )

    eventually(halves, "the six partitions split three and three on both brokers")
    # More records while both are members: each reads its own half.
    for part in range(6):
        java_both(pair, "Produce", "shared", "none", "2", "2", f"q{part}", str(BASE_TS), str(part))
    pairs = list(zip(first, second, strict=True))
    eventually(lambda: all(len(a.records() | b.records()) == 42 for a, b in pairs), "new records")
    for b in second:
        assert b.leave() == 0 and b.lines[-1] == {"closed": True}
    # The one left takes every partition again (its last assignment event says so).
    eventually(lambda: all(m.assignment() == list(range(6)) for m in first), "all back to one")
    for a in first:
        assert a.leave() == 0
    # What each broker's group read, and committed: every record once at least, the same.
    seen = [a.records() | b.records() for a, b in zip(first, second, strict=True)]
    assert seen[0] == seen[1] and len(seen[0]) == 42
    described = pair.same("kafka-consumer-groups", "--describe", "--group", "pair")
    rows = [line.split() for line in described.lines()[2:]]
    assert [(r[2], r[3], r[4]) for r in rows] == [(str(p), "7", "7") for p in range(6)]


# --- committed offsets across a restart ---------------------------------------------------------
def _restart(pair: BrokerPair) -> None:
    """A clean stop and a start over the same data directory, on the same port."""
    pair.kafka.stop()
    assert pair.compactlog.terminate() == 0
    pair.kafka.start()
    pair.compactlog.start()


def test_committed_offsets_survive_a_broker_restart(pair: BrokerPair) -> None:
    pair.same("kafka-topics", "--create", "--topic", "durable", "--partitions", "3")
    java_both(pair, "Produce", "durable", "gzip", "30", "9", "before", str(BASE_TS))
    kafka, compactlog = java_both(pair, "ConsumeGroup", "durable", "keeper")
    assert compactlog[-1] == kafka[-1]
    committed = kafka[-1]["committed"]
    assert sum(committed.values()) == 30
    assert sorted(map(str, compactlog[:-1]), key=str) == sorted(map(str, kafka[:-1]), key=str)

    _restart(pair)

    before = pair.same("kafka-consumer-groups", "--describe", "--group", "keeper", "--offsets")
    assert [line.split()[3] for line in before.lines()[2:]] == [
        str(committed[str(p)]) for p in range(3)
    ]
    java_both(pair, "Produce", "durable", "none", "3", "3", "after", str(BASE_TS + 60_000))
    kafka, compactlog = java_both(pair, "ConsumeGroup", "durable", "keeper")
    # Only the records appended after the restart, from where the group had committed.
    assert sorted(str(r) for r in compactlog) == sorted(str(r) for r in kafka)
    assert sorted(r["value"] for r in kafka if "value" in r) == ["after-0", "after-1", "after-2"]


# --- a cleaned compacted topic, read across its gaps ---------------------------------------------
def test_a_cleaned_topic_is_read_across_its_gaps(pair: BrokerPair) -> None:
    """Idempotent producers update five keys in batches that each start a new segment
    (segment.ms); both brokers' cleaners clean every segment but the active one. Kafka's Java
    consumer then reads the same survivors at the same offsets from both, skipping the gaps and
    the empty batches (an active producer's last batch, kept for its sequence state)."""
    pair.same("kafka-topics", "--create", "--topic", "changelog", "--config",
              "cleanup.policy=compact", "--config", "segment.ms=1000", "--config",
              "min.cleanable.dirty.ratio=0.01", "--config", "min.compaction.lag.ms=0")  # fmt: skip
    rounds = 5
    for r in range(rounds):
        time.sleep(1.2)  # the next append rolls the segment (older than segment.ms)
        count = 5 if r < rounds - 1 else 2
        java_both(pair, "Produce", "changelog", CODECS[r], str(count), "5", f"r{r}",
                  str(BASE_TS + r * 10_000))  # fmt: skip
    written = 4 * 5 + 2

    def cleaned() -> bool:
        kafka, compactlog = consume_both(pair, "changelog")
        return len(kafka) < written and len(compactlog) < written and kafka == compactlog

    eventually(cleaned, "both cleaners to clean the same segments", timeout=120)
    kafka_read, compactlog_read = consume_both(pair, "changelog")
    assert compactlog_read == kafka_read
    latest = {r.key: r.value for r in kafka_read}
    assert latest == {
        **{b"k%d" % k: b"r3-%d" % k for k in range(5)},
        b"k0": b"r4-0",
        b"k1": b"r4-1",
    }
    offsets = [r.offset for r in kafka_read]
    assert offsets != list(range(len(offsets))), "no gap left by the cleaning"
    kafka_dump, compactlog_dump = dump_log(pair, "changelog", 0)
    assert "count: 0" in kafka_dump  # an empty batch kept
    # The cleaned segments hold the same batches; they may be split into files differently
    # (each broker's cleaner groups segments by its own size limits), so compare the batches.
    assert _batches(compactlog_dump) == _batches(kafka_dump)


def _batches(dump: str) -> list[str]:
    """The batch lines of a kafka-dump-log output (offsets, counts, producer, timestamps, size,
    codec, CRC) without their positions in the file, and the record lines."""
    out = []
    for line in dump.splitlines():
        if line.startswith("baseOffset:"):
            head, _, tail = line.partition(" position: ")
            out.append(head + " " + tail.split(" ", 1)[1])
        elif line.startswith("| offset:"):
            out.append(line)
    return out


# --- Admin ---------------------------------------------------------------------------------------
def test_admin_calls(pair: BrokerPair) -> None:
    kafka, compactlog = java_both(pair, "AdminCalls", str(BASE_TS))
    if os.environ.get("COMPACTLOG_SHOW_TOOLS"):
        for theirs, ours in zip(kafka, compactlog, strict=False):
            print("K", json.dumps(theirs))
            if ours != theirs:
                print("C", json.dumps(ours))
    assert [line["op"] for line in compactlog] == [line["op"] for line in kafka]
    for theirs, ours in zip(kafka, compactlog, strict=True):
        assert ours == theirs
