"""Kafka reads compactlog's files (issue 15, item 1).

compactlog writes a data directory with every feature of the format: every codec, headers,
null keys and values, tombstones with and without a stamped delete horizon, segments rolled by
size and by time, a log cleaned twice, an idempotent producer's batches and its snapshots,
``LogAppendTime``. Then Kafka's own code reads it:

* ``kafka-dump-log --deep-iteration --print-data-log`` over every file prints exactly what
  ``compactlog dump-log`` prints (every batch's header fields, CRC validity and position, every
  record, every index entry, every producer snapshot), and its index checks pass;
* a real Kafka broker started over those partitions (after a clean shutdown, and after an
  unclean one with every recovery point at 0, so that Kafka re-reads and re-validates every
  batch and rebuilds every index) serves every record to Kafka's Java consumer with the same
  offsets, keys, values, headers and timestamps, truncating nothing.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from compactlog.records import build_batch
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.kafka.harness import (
    Consumed,
    KafkaBroker,
    java_consume,
    read_offset_checkpoint,
    run_tool,
    store_view,
    write_offset_checkpoint,
)
from tests.managed import manager_of, open_managed

pytestmark = pytest.mark.kafka

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

#: name -> (partitions, compactlog's topic configs, the same topic's configs on Kafka). Kafka
#: 4.x refuses segment.bytes below 1 MiB (KIP-1030), so tiny segments exist only in the files.
TOPICS: dict[str, tuple[int, dict[str, str], dict[str, str]]] = {
    "events": (
        2,
        {"segment.bytes": "3000", "index.interval.bytes": "128", "retention.ms": "-1"},
        {"retention.ms": "-1"},
    ),
    "prices": (
        1,
        {
            "cleanup.policy": "compact",
            "segment.bytes": "1500",
            "index.interval.bytes": "128",
            "delete.retention.ms": "1000",
            "min.cleanable.dirty.ratio": "0.01",
        },
        {"cleanup.policy": "compact", "delete.retention.ms": "1000"},
    ),
    "ticks": (
        1,
        {"message.timestamp.type": "LogAppendTime", "segment.ms": "100", "retention.ms": "-1"},
        {"message.timestamp.type": "LogAppendTime", "retention.ms": "-1"},
    ),
}


def write_workload(store: Store, clock: ManualClock) -> None:
    """Every feature of the format, into the topics of :data:`TOPICS` (created here unless the
    store has them already, as in a Kafka log directory, where they get compactlog's configs)."""
    for name, (partitions, config, _) in TOPICS.items():
        if name in store.topics():
            store.alter_config(name, config)
        else:
            store.create_topic(name, partitions, config)

    # events: three records a batch (a keyed one with headers, a null header value among
    # them; a keyless one; a null value), each batch with the next codec; one batch of large
    # records; segments rolled by size.
    for i in range(90):
        records = [
            (b"key-%d" % (3 * i), b"value-%d-0" % i, (("h1", b"x"), ("h2", None), ("h1", b""))),
            (None, b"value-%d-1" % i),
            (b"key-%d" % (3 * i + 2), None),
        ]
        store.append(
            "events", i % 2, records, timestamp=clock.advance(10), compression=CODECS[i % 5]
        )
    store.append(
        "events",
        0,
        [(b"big-%d" % j, b"x" * 2000) for j in range(20)],
        timestamp=clock.advance(10),
        compression="lz4",
    )

    # prices: updates and tombstones of seven keys, then an idempotent producer's batches;
    # cleaned (tombstones get their horizon), more updates, cleaned again after the horizon
    # (the first tombstones go), new tombstones cleaned once (they stay, stamped).
    for i in range(80):
        value = None if i % 11 == 0 else b"price-%d" % i
        store.append(
            "prices",
            0,
            [(b"fruit-%d" % (i % 7), value)],
            timestamp=clock.advance(10),
            compression=CODECS[i % 5],
        )
    for seq in range(5):
        batch = build_batch(
            [(b"fruit-%d" % seq, b"idempotent-%d" % seq)],
            timestamps=clock.advance(10),
            producer_id=7,
            producer_epoch=0,
            base_sequence=seq,
        )
        store.append_batch("prices", 0, batch)
    store.roll("prices", 0)
    manager_of(store).clean_log("prices", 0)
    clock.advance(2000)
    for i in range(10):
        store.append("prices", 0, [(b"fruit-%d" % (i % 4), b"later-%d" % i)], timestamp=clock.now)
    store.roll("prices", 0)
    manager_of(store).clean_log("prices", 0)
    store.append("prices", 0, [(b"fruit-5", None), (b"fruit-6", None)], timestamp=clock.advance(10))
    store.roll("prices", 0)
    manager_of(store).clean_log("prices", 0)
    store.append("prices", 0, [(b"fruit-0", b"active")], timestamp=clock.advance(10))

    # ticks: LogAppendTime (the broker's clock replaces the producer's timestamps), a segment
    # rolled every 100 ms of it.
    for i in range(10):
        clock.advance(60)
        store.append("ticks", 0, [(b"tick-%d" % i, b"tock-%d" % i)], timestamp=0)


@dataclass
class Written:
    """compactlog's closed data directory and what compactlog read from it before closing."""

    data_dir: Path
    views: dict[str, list[Consumed]]
    log_start: dict[tuple[str, int], int]
    log_end: dict[tuple[str, int], int]

    def files(self, *suffixes: str) -> list[Path]:
        return sorted(
            p
            for topic, (partitions, _, _) in TOPICS.items()
            for partition in range(partitions)
            for p in (self.data_dir / f"{topic}-{partition}").iterdir()
            if p.suffix in suffixes
        )


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    data_dir = tmp_path_factory.mktemp("compactlog") / "data"
    # Recent timestamps: a Kafka broker started over these files keeps them (its retention).
    clock = ManualClock(int(time.time() * 1000) - 3_600_000)
    with open_managed(data_dir, clock=clock) as store:
        write_workload(store, clock)
        views = {topic: store_view(store, topic) for topic in TOPICS}
        tps = [(t, p) for t, (n, _, _) in TOPICS.items() for p in range(n)]
        log_start = {tp: store.log_start_offset(*tp) for tp in tps}
        log_end = {tp: store.log_end_offset(*tp) for tp in tps}
    return Written(data_dir, views, log_start, log_end)


def compactlog_dump(files: list[Path]) -> list[str]:
    from click.testing import CliRunner

    from compactlog.cli.main import main

    result = CliRunner().invoke(main, ["dump-log", *map(str, files)])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def kafka_dump(*args: str, files: list[Path]) -> tuple[list[str], list[str]]:
    done = run_tool("kafka-dump-log", *args, "--files", ",".join(map(str, files)))
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr.splitlines()


def test_the_workload_has_what_the_checks_need(written: Written) -> None:
    """The features the other tests claim to cover are really in the files."""
    assert len(written.files(".log")) > 10  # rolled by size and time
    dump = "\n".join(compactlog_dump(written.files(".log", ".index", ".timeindex", ".snapshot")))
    for codec in CODECS:
        assert f"compresscodec: {codec} " in dump
    assert "deleteHorizonMs: OptionalLong[" in dump  # a stamped tombstone batch
    assert "producerId: 7 producerEpoch: 0 coordinatorEpoch" in dump  # a producer snapshot
    assert "LogAppendTime: " in dump
    assert "headerKeys: [h1,h2,h1]" in dump
    assert "keySize: -1 " in dump and "valueSize: -1 " in dump
    assert "\noffset: " in dump and "\ntimestamp: " in dump  # index entries
    offsets = [r.offset for r in written.views["prices"]]
    assert offsets != list(range(offsets[0], offsets[0] + len(offsets)))  # cleaned: gaps


def test_kafka_dump_log_prints_what_compactlog_dump_log_prints(written: Written) -> None:
    files = written.files(".log", ".index", ".timeindex", ".snapshot")
    stdout, stderr = kafka_dump("--deep-iteration", "--print-data-log", files=files)
    assert stdout == compactlog_dump(files)
    assert "isvalid: false" not in "\n".join(stdout)
    # Kafka's only remark: offsets that do not follow each other (compaction's gaps, and a
    # segment that does not start at 0, which it prints as "-1 is followed by <base>").
    remarks = [line for line in stderr if not line.startswith(("Non-consecutive", "  "))]
    assert remarks == []


def test_kafka_index_checks_pass(written: Written) -> None:
    """``kafka-dump-log --deep-iteration --index-sanity-check`` over every file: each index
    passes Kafka's start-up sanity check, every batch is valid; and ``--verify-index-only``
    finds no index entry that misses its batch or its timestamp."""
    indexes = written.files(".index", ".timeindex")
    files = written.files(".log", ".index", ".timeindex", ".snapshot")
    stdout, stderr = kafka_dump("--deep-iteration", "--index-sanity-check", files=files)
    assert "isvalid: false" not in "\n".join(stdout)
    verdicts = [line for line in stdout if line.endswith(("sanity check.", "is empty."))]
    assert len(verdicts) == len(indexes)
    assert all(v.endswith(("passed sanity check.", "is empty.")) for v in verdicts), verdicts
    assert sum(v.endswith("passed sanity check.") for v in verdicts) > 10
    stdout, stderr = kafka_dump("--verify-index-only", files=indexes)
    assert [line for line in stdout if not line.startswith("Dumping ")] == [
        f"{p} is empty." for p in indexes if p.suffix == ".index" and p.stat().st_size == 0
    ]
    assert stderr == []


def kafka_with_topics(make: Callable[..., KafkaBroker]) -> KafkaBroker:
    """A stopped Kafka broker (cleaner off) whose controller created :data:`TOPICS`."""
    broker = make(config={"log.cleaner.enable": "false"})
    for topic, (partitions, _, kafka_config) in TOPICS.items():
        configs = [arg for k, v in kafka_config.items() for arg in ("--config", f"{k}={v}")]
        done = broker.tool(
            "kafka-topics", "--create", "--topic", topic, "--partitions", str(partitions), *configs
        )
        assert done.returncode == 0, done.stderr
    broker.stop()
    return broker


def assert_kafka_logged_no_damage(broker: KafkaBroker) -> None:
    log = broker.server_log.read_text()
    for sign in ("Found invalid", "Corrupt", "corrupt", "Truncat", "truncat", "ERROR"):
        assert sign not in log, [line for line in log.splitlines() if sign in line][:5]


def kafka_over(written: Written, make: Callable[..., KafkaBroker], recover: bool) -> KafkaBroker:
    """A Kafka broker whose partitions hold compactlog's files.

    Kafka creates the topics (so that its controller knows them), stops; each partition's
    segment and snapshot files are replaced by compactlog's, and the checkpoints take
    compactlog's log start offsets, recovery points and first dirty offsets. ``recover``
    removes the clean-shutdown marker and sets every recovery point to 0: Kafka then re-reads
    every batch of every segment, as after a crash, and rebuilds every index.
    """
    broker = kafka_with_topics(make)

    for topic, (partitions, _, _) in TOPICS.items():
        for partition in range(partitions):
            theirs = broker.data_dir / f"{topic}-{partition}"
            for path in theirs.iterdir():
                if path.suffix in (".log", ".index", ".timeindex", ".snapshot", ".txnindex"):
                    path.unlink()
            for path in (written.data_dir / f"{topic}-{partition}").iterdir():
                if path.suffix in (".log", ".index", ".timeindex", ".snapshot"):
                    shutil.copy2(path, theirs / path.name)

    def merge(name: str, ours: dict[tuple[str, int], int]) -> None:
        path = broker.data_dir / name
        write_offset_checkpoint(path, {**read_offset_checkpoint(path), **ours})

    ends = dict(written.log_end)
    merge("log-start-offset-checkpoint", written.log_start)
    merge("recovery-point-offset-checkpoint", {tp: 0 for tp in ends} if recover else ends)
    merge("replication-offset-checkpoint", ends)  # the high watermark: all of it
    merge(
        "cleaner-offset-checkpoint",
        read_offset_checkpoint(written.data_dir / "cleaner-offset-checkpoint"),
    )
    if recover:
        (broker.data_dir / ".kafka_cleanshutdown").unlink()
    broker.start()
    return broker


@pytest.mark.parametrize("recover", [False, True], ids=["clean-start", "recover-every-batch"])
def test_a_kafka_broker_serves_compactlog_partitions(
    written: Written, kafka: Callable[..., KafkaBroker], recover: bool
) -> None:
    broker = kafka_over(written, kafka, recover)
    sizes = {p.relative_to(written.data_dir): p.stat().st_size for p in written.files(".log")}
    for topic in TOPICS:
        assert java_consume(broker.bootstrap, topic) == written.views[topic], topic
    offsets = broker.tool("kafka-get-offsets", "--time", "-1")
    assert offsets.returncode == 0, offsets.stderr
    for line in offsets.stdout.splitlines():
        topic, partition, end = line.split(":")
        if topic in TOPICS:
            assert int(end) == written.log_end[(topic, int(partition))], line
    earliest = broker.tool("kafka-get-offsets", "--time", "-2")
    for line in earliest.stdout.splitlines():
        topic, partition, start = line.split(":")
        if topic in TOPICS:
            assert int(start) == written.log_start[(topic, int(partition))], line
    broker.stop()

    assert_kafka_logged_no_damage(broker)
    if recover:
        assert "Recovering unflushed segment" in broker.server_log.read_text()
    # Kafka cut nothing: every segment kept every byte compactlog wrote.
    for relative, size in sizes.items():
        assert (broker.data_dir / relative).stat().st_size == size, relative


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "corpus"


@pytest.mark.parametrize("case", sorted(p.name for p in GOLDEN.iterdir()))
def test_kafka_dump_log_prints_the_golden_corpus_as_compactlog_does(case: str) -> None:
    """R21's golden corpus (every file kind, transactions, a torn tail) read by Kafka's tool."""
    files = sorted(p for p in (GOLDEN / case).rglob("0*") if p.is_file())
    done = run_tool(
        "kafka-dump-log",
        "--deep-iteration",
        "--print-data-log",
        "--files",
        ",".join(map(str, files)),
    )
    assert done.returncode == 0, done.stderr
    from click.testing import CliRunner

    from compactlog.cli.main import main

    ours = CliRunner().invoke(main, ["dump-log", *map(str, files)])
    # compactlog also names the torn tail, on stderr, with exit 3; Kafka's tool says nothing.
    assert ours.exit_code == (3 if case == "torn-tail" else 0), ours.output
    assert done.stdout == ours.stdout


def test_compactlog_writes_into_a_kafka_log_dir_and_kafka_serves_it(
    kafka: Callable[..., KafkaBroker],
) -> None:
    """In place: Kafka creates the topics and stops; compactlog opens Kafka's own log directory
    (its catalog from Kafka's metadata log), writes and cleans the whole workload there, and
    closes; Kafka starts over the directory as compactlog left it (compactlog's segments,
    indexes, snapshots, checkpoints and clean-shutdown marker) and serves every record."""
    broker = kafka_with_topics(kafka)

    clock = ManualClock(int(time.time() * 1000) - 3_600_000)
    with open_managed(broker.data_dir, clock=clock) as store:
        assert set(TOPICS) <= set(store.topics())
        write_workload(store, clock)
        views = {topic: store_view(store, topic) for topic in TOPICS}
    assert len(views["events"]) == 290 and len(views["prices"]) < 100  # cleaned

    broker.start()
    for topic in TOPICS:
        assert java_consume(broker.bootstrap, topic) == views[topic], topic
    broker.stop()
    assert_kafka_logged_no_damage(broker)
