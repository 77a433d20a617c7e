"""compactlog reads Kafka's files (issue 15, test item 2): a real Kafka 4.4 broker writes a log
directory, stops cleanly or is SIGKILLed, and compactlog opens what it left.

One broker run writes every topic once (module fixture ``written``):

* ``codecs``: a delete topic, one partition per codec (none, gzip, snappy, lz4, zstd), each
  from its own idempotent producer: headers (one with a null value, one empty), null keys, null
  and empty values, records with explicit timestamps from 2000 and with the producer's clock;
* ``rolled``: rounds of records two hours apart in record time with ``segment.ms`` one hour, so
  Kafka rolls a segment per round (Kafka 4.x refuses ``segment.bytes`` below 1 MiB);
* ``compacted``: ``cleanup.policy=compact``, cleaned by Kafka's own cleaner (the test waits for
  ``cleaner-offset-checkpoint``), with tombstones; then ``min.cleanable.dirty.ratio`` goes to
  0.99 (a ConfigRecord in the metadata log) and more rounds leave a dirty section for
  compactlog's offline ``clean``;
* ``txn``: committed and aborted transactions (a ``.txnindex``, control batches);
* a committed consumer group offset, so ``__consumer_offsets`` exists beside
  ``__transaction_state``.

Kafka's Java consumer reads every topic before the clean stop; the copy of the directory taken
then is the *clean* case. The broker then starts again over the original, one more write is
acknowledged, and SIGKILL follows at once: the copy taken then is the *killed* case, whose
expected records are the clean ones plus the acknowledged write.

For each case compactlog must: adopt exactly Kafka's topics with their configs and ids; read
the same records, offsets, log start and end offsets as Kafka's consumer; ``verify`` with no
problem; run ``dump-log``, ``cleaner-status`` and ``explain``; leave every file it does not own
byte for byte as it was; and leave a directory Kafka starts over and serves the same records
from. Offline ``clean`` keeps the latest record per key.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compactlog.cli.main import main
from compactlog.records import Compression
from compactlog.storage.kraft_metadata import METADATA_DIR
from compactlog.storage.store import Store
from tests.kafka.harness import (
    Consumed,
    KafkaBroker,
    java_consume,
    read_offset_checkpoint,
    running,
    store_view,
)

pytestmark = pytest.mark.kafka

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: 2000-01-01T00:00:00Z: record time far in the past (topics keep it with retention.ms=-1).
T_OLD = 946_684_800_000
HOUR = 3_600_000
KEYS = [f"key-{i}".encode() for i in range(8)]

TOPIC_CONFIGS: dict[str, tuple[int, dict[str, str]]] = {
    "codecs": (len(CODECS), {"retention.ms": "-1"}),
    "rolled": (1, {"retention.ms": "-1", "segment.ms": str(HOUR)}),
    "compacted": (
        1,
        {
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "segment.ms": str(HOUR),
            "retention.ms": "-1",
        },
    ),
    "txn": (1, {"retention.ms": "-1"}),
}
TOPICS = tuple(TOPIC_CONFIGS)
#: What the compacted topic's dirty ratio threshold becomes after Kafka's cleaning.
LATER_RATIO = "0.99"

BROKER_CONFIG = {
    "log.cleaner.backoff.ms": 200,
    "auto.create.topics.enable": "false",
}

#: Files of a Kafka log directory compactlog does not own (besides all of __cluster_metadata-0).
FOREIGN_NAMES = frozenset(
    {
        "meta.properties",
        "bootstrap.checkpoint",
        "replication-offset-checkpoint",
        "leader-epoch-checkpoint",
        "partition.metadata",
        "quorum-state",
    }
)


# --------------------------------------------------------------------------------------------
# Writing with Kafka


@dataclass
class Written:
    """What Kafka wrote and said about it, for one shutdown kind."""

    kind: str
    data: Path
    records: dict[str, list[Consumed]]
    offsets: dict[tuple[str, int], tuple[int, int]]
    topic_ids: dict[str, str]
    configs: dict[str, dict[str, str]]
    topics: set[str] = field(default_factory=set)


def _producer(bootstrap: str, **config: Any) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 20,
            **config,
        }
    )


class Acks:
    """Delivery reports as the records Kafka stored (offset and timestamp from the broker; the
    headers as sent, since a delivery report does not carry them)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, Consumed]] = []
        self.errors: list[str] = []

    def sent(self, headers: tuple[tuple[str, bytes | None], ...] = ()) -> Any:
        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
                return
            record = Consumed(
                msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(), msg.value(), headers
            )
            self.records.append((msg.topic(), record))

        return delivered


def _flush(producer: Any, acks: Acks) -> None:
    assert producer.flush(60) == 0, "messages left unacknowledged"
    assert not acks.errors, acks.errors


def _write_codecs(bootstrap: str, acks: Acks, rounds: int = 3) -> None:
    for partition, codec in enumerate(CODECS):
        producer = _producer(bootstrap, **{"compression.type": codec})
        for r in range(rounds):
            for i in range(40):
                key = None if i % 7 == 0 else f"{codec}-{r}-{i}".encode()
                value = None if i % 11 == 5 else b"" if i % 13 == 6 else (codec * 20).encode()
                headers = [("h", f"{r}/{i}".encode()), ("null", None), ("empty", b"")]
                producer.produce(
                    "codecs",
                    value=value,
                    key=key,
                    partition=partition,
                    headers=headers if i % 3 else [],
                    timestamp=T_OLD + r * 1000 + i if i % 2 else 0,
                    on_delivery=acks.sent(),
                )
            _flush(producer, acks)


def _write_rounds(bootstrap: str, acks: Acks, topic: str, rounds: range, tombstone: int) -> None:
    """One flush per round, each two hours of record time after the previous: with
    ``segment.ms`` one hour, Kafka starts a segment with every round."""
    producer = _producer(bootstrap)
    for r in rounds:
        for i, key in enumerate(KEYS):
            value = None if (i + r) % tombstone == 0 else f"{topic}-{r}-{i}".encode()
            producer.produce(
                topic,
                value=value,
                key=key,
                partition=0,
                timestamp=T_OLD + r * 2 * HOUR + i,
                on_delivery=acks.sent(),
            )
        _flush(producer, acks)


def _write_transactions(bootstrap: str) -> None:
    producer = _producer(bootstrap, **{"transactional.id": "compactlog-reads-kafka"})
    producer.init_transactions(60)
    for n, commit in enumerate((True, False, True, False, True)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce("txn", key=f"t{n}-{i}".encode(), value=b"x" * i, partition=0)
        producer.flush(60)  # the records reach the log before an abort (it purges the queue)
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)


def _commit_group_offset(bootstrap: str) -> None:
    """A committed offset, so that ``__consumer_offsets`` exists; the first commits meet
    NOT_COORDINATOR while Kafka creates and loads that topic, so they are retried."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reads-kafka"})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                consumer.commit(offsets=[TopicPartition("codecs", 0, 3)], asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)  # kept alive until the futures are done
    futures = admin.create_topics(
        [NewTopic(t, n, 1, config=c) for t, (n, c) in TOPIC_CONFIGS.items()]
    )
    for future in futures.values():
        future.result(60)


def _set_ratio(bootstrap: str, value: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource(
        "topic",
        "compacted",
        incremental_configs=[
            ConfigEntry(
                "min.cleanable.dirty.ratio",
                value,
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    admin = _admin(bootstrap)  # kept alive until the futures are done
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(60)


def _kafkas_view(broker: KafkaBroker, kind: str, data: Path) -> Written:
    """What the running broker says: every topic by Kafka's Java consumer, the log start and
    end offsets, topic ids and topic config overrides."""
    from confluent_kafka import TopicCollection, TopicPartition
    from confluent_kafka.admin import ConfigResource, ConfigSource, OffsetSpec

    admin = _admin(broker.bootstrap)
    records = {topic: java_consume(broker.bootstrap, topic) for topic in TOPICS}
    offsets: dict[tuple[str, int], tuple[int, int]] = {}
    for spec, slot in ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 1)):
        request = {
            TopicPartition(t, p): spec for t, (n, _) in TOPIC_CONFIGS.items() for p in range(n)
        }
        for tp, future in admin.list_offsets(request).items():
            pair = list(offsets.get((tp.topic, tp.partition), (0, 0)))
            pair[slot] = future.result(60).offset
            offsets[(tp.topic, tp.partition)] = (pair[0], pair[1])
    names = set(admin.list_topics(timeout=60).topics)
    described = admin.describe_topics(TopicCollection(sorted(names)))
    # confluent-kafka prints a Uuid in standard base64; Kafka (and compactlog) in the URL-safe
    # alphabet, as partition.metadata shows.
    topic_ids = {
        name: str(f.result(60).topic_id).replace("+", "-").replace("/", "_")
        for name, f in described.items()
    }
    configs = {}
    for resource, future in admin.describe_configs(
        [ConfigResource("topic", name) for name in sorted(names)]
    ).items():
        configs[resource.name] = {
            name: entry.value
            for name, entry in future.result(60).items()
            if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        }
    return Written(kind, data, records, offsets, topic_ids, configs, names)


def _write_tail(bootstrap: str) -> Acks:
    """The killed case's last acknowledged write: a batch at the end of ``codecs-3`` and one
    in a new segment of ``rolled``."""
    tail = Acks()
    producer = _producer(bootstrap, **{"compression.type": "lz4"})
    headers = (("tail", b"1"),)
    for i in range(5):
        producer.produce(
            "codecs", key=b"tail-%d" % i, value=b"after the restart", partition=3,
            headers=list(headers), timestamp=T_OLD + HOUR + i, on_delivery=tail.sent(headers),
        )  # fmt: skip
        producer.produce(
            "rolled", key=KEYS[i], value=b"tail", partition=0,
            timestamp=T_OLD + 20 * HOUR + i, on_delivery=tail.sent(),
        )  # fmt: skip
    _flush(producer, tail)
    return tail


def _copy(src: Path, dst: Path) -> Path:
    """A copy that keeps sparse files sparse (a killed Kafka leaves 10 MiB pre-allocated
    indexes in every partition)."""
    subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True)
    return dst


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Written]]:
    """Kafka writes every topic; the clean and the killed copies with what Kafka said."""
    work = tmp_path_factory.mktemp("kafka")
    broker = KafkaBroker(work / "broker", config=BROKER_CONFIG)
    try:
        broker.start()
        bootstrap = broker.bootstrap
        _create_topics(bootstrap)
        acks = Acks()
        _write_codecs(bootstrap, acks)
        _write_rounds(bootstrap, acks, "rolled", range(5), tombstone=100)
        _write_rounds(bootstrap, acks, "compacted", range(4), tombstone=5)
        broker.wait_for(
            lambda: ("compacted", 0) in broker.cleaner_checkpoint(),
            "a cleaning of compacted-0 by Kafka's cleaner",
        )
        _set_ratio(bootstrap, LATER_RATIO)
        _write_rounds(bootstrap, acks, "compacted", range(4, 7), tombstone=5)
        _write_transactions(bootstrap)
        _commit_group_offset(bootstrap)
        clean = _kafkas_view(broker, "clean", work / "clean")
        broker.stop()
        _copy(broker.data_dir, clean.data)

        # The killed case: one more acknowledged write, then SIGKILL at once.
        broker.start()
        tail = _write_tail(broker.bootstrap)
        broker.kill()
        killed = Written(
            "killed",
            _copy(broker.data_dir, work / "killed"),
            {topic: list(records) for topic, records in clean.records.items()},
            dict(clean.offsets),
            clean.topic_ids,
            clean.configs,
            clean.topics,
        )
        for topic, record in tail.records:
            killed.records[topic].append(record)
            start, end = killed.offsets[(topic, record.partition)]
            killed.offsets[(topic, record.partition)] = (start, max(end, record.offset + 1))
        for records in killed.records.values():
            records.sort(key=lambda r: (r.partition, r.offset))
        yield {"clean": clean, "killed": killed}
    finally:
        broker.kill()


@pytest.fixture(params=["clean", "killed"])
def case(request: pytest.FixtureRequest, written: dict[str, Written]) -> Written:
    return written[request.param]


# --------------------------------------------------------------------------------------------
# What compactlog must leave as it is


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def kafka_files(data: Path) -> dict[str, str]:
    """Hashes of the files compactlog does not own (the metadata log, Kafka's own files) and of
    the data it must not rewrite when it only reads: ``.log``, ``.txnindex`` and producer
    ``.snapshot`` files. Indexes, the offset checkpoints compactlog keeps, the marker and the
    ``.deleted`` leftovers (removed at load, by Kafka's rule too) are compactlog's to write."""
    found = {}
    for path in sorted(data.rglob("*")):
        if not path.is_file():
            continue
        name = str(path.relative_to(data))
        if (
            name.startswith(METADATA_DIR + os.sep)
            or path.name in FOREIGN_NAMES
            or path.suffix in (".log", ".txnindex", ".snapshot")
        ):
            found[name] = _digest(path)
    return found


def assert_left_alone(before: dict[str, str], data: Path, context: str) -> None:
    """Every file of ``before`` is still there, byte for byte, but for producer snapshots that
    Kafka's own loader removes as strays (``removeStraySnapshots``: at no segment's base
    offset, and a newer snapshot exists); only producer snapshots are new."""
    after = kafka_files(data)
    changed = sorted(
        name
        for name, digest in before.items()
        if after.get(name) != digest and not _stray_snapshot(data, name, after)
    )
    assert not changed, f"{context} changed or removed: {changed}"
    added = sorted(set(after) - set(before))
    assert all(name.endswith(".snapshot") for name in added), f"{context} added {added}"


def _stray_snapshot(data: Path, name: str, after: dict[str, str]) -> bool:
    path = data / name
    if path.suffix != ".snapshot" or path.exists():
        return False
    offset = int(path.stem)
    bases = {int(p.stem) for p in path.parent.glob("*.log")}
    newer = [p for p in path.parent.glob("*.snapshot") if int(p.stem) > offset]
    return offset not in bases and bool(newer)


def cli(data: Path, *args: str) -> Any:
    result = CliRunner().invoke(main, ["--data-dir", str(data), *args])
    assert result.exit_code == 0, (args, result.exit_code, result.stdout, result.stderr)
    return result


# --------------------------------------------------------------------------------------------
# The tests


def test_the_store_adopts_kafkas_topics_and_reads_what_kafkas_consumer_reads(
    case: Written, tmp_path: Path
) -> None:
    data = _copy(case.data, tmp_path / "data")
    before = kafka_files(data)
    with Store.open(data) as store:
        assert store.had_clean_shutdown == (case.kind == "clean")
        assert set(store.topics()) == case.topics
        assert "__consumer_offsets" in case.topics and "__transaction_state" in case.topics
        for name in sorted(case.topics):
            info = store.topic_info(name)
            assert (info.topic_id, info.overrides) == (case.topic_ids[name], case.configs[name])
        assert store.topic_config("compacted").compact
        assert store.topic_info("compacted").overrides["min.cleanable.dirty.ratio"] == LATER_RATIO
        assert len(case.records["compacted"]) < 7 * len(KEYS)  # Kafka's cleaner removed some
        for topic in TOPICS:
            assert store_view(store, topic) == case.records[topic], topic
            for partition in range(store.partitions(topic)):
                assert (
                    store.log_start_offset(topic, partition),
                    store.log_end_offset(topic, partition),
                ) == case.offsets[(topic, partition)], (topic, partition)
        for partition, codec in enumerate(CODECS):
            batches = store.log("codecs", partition).iter_batches(0)
            assert {b.header.compression for b in batches} == {Compression.from_name(codec)}
        # Producer state from Kafka's snapshots (plus, after the kill, the replayed tail): one
        # idempotent producer per codec partition, its last sequence its record count - 1.
        for partition in range(len(CODECS)):
            count = sum(r.partition == partition for r in case.records["codecs"])
            sequences = [s.last_sequence for s in store.producer_state("codecs", partition)]
            tail = 5 if case.kind == "killed" and partition == 3 else 0
            assert sorted(sequences) == sorted([count - tail - 1] + ([tail - 1] if tail else []))
        (txn_producer,) = store.producer_state("txn", 0)
        assert txn_producer.current_txn_start_offset == -1  # every transaction ended
        assert len(store.segments("rolled", 0)) >= 5
        assert any(data.glob("txn-0/*.txnindex"))
        assert any(data.glob("compacted-0/*.snapshot"))
    # What the records cover, so that the comparisons above mean something.
    codecs = case.records["codecs"]
    assert any(r.key is None for r in codecs) and any(r.value is None for r in codecs)
    assert any(r.value == b"" for r in codecs) and any(r.timestamp < T_OLD + HOUR for r in codecs)
    assert any(("null", None) in r.headers for r in codecs)
    assert any(r.value is None for r in case.records["compacted"])  # tombstones
    assert_left_alone(before, data, "opening and closing")
    marker = (data / ".kafka_cleanshutdown").read_text()
    assert json.loads(marker)["version"] == 0
    if case.kind == "clean":
        assert marker == (case.data / ".kafka_cleanshutdown").read_text()
    assert not (data / METADATA_DIR / "compactlog").exists()
    with Store.open(data) as again:  # a later open reads compactlog-topics.json, same catalog
        assert again.topic_info("compacted") == store.topic_info("compacted")


def test_verify_finds_no_problem(case: Written, tmp_path: Path) -> None:
    data = _copy(case.data, tmp_path / "data")
    before = {str(p): _digest(p) for p in sorted(data.rglob("*")) if p.is_file()}
    result = cli(data, "verify")
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("OK: "), result.stdout
    assert all(line.startswith("note: ") for line in lines[:-1]), result.stdout
    assert sum(METADATA_DIR in line for line in lines) == 1
    assert before == {str(p): _digest(p) for p in sorted(data.rglob("*")) if p.is_file()}


def test_dump_log_cleaner_status_and_explain(case: Written, tmp_path: Path) -> None:
    data = _copy(case.data, tmp_path / "data")
    before = kafka_files(data)
    compacted = data / "compacted-0"
    first = sorted(compacted.glob("*.log"))[0]
    files = [
        first,
        first.with_suffix(".index"),
        first.with_suffix(".timeindex"),
        sorted(compacted.glob("*.snapshot"))[-1],
        *sorted((data / "txn-0").glob("*.txnindex")),
        data / "recovery-point-offset-checkpoint",
    ]
    dumped = cli(data, "dump-log", *map(str, files)).stdout
    assert dumped.count("Dumping ") == len(files)
    assert "baseOffset: " in dumped and "producerId: " in dumped
    status = json.loads(cli(data, "cleaner-status", "compacted", "--json").stdout)["partitions"]
    kafka_checkpoint = read_offset_checkpoint(data / "cleaner-offset-checkpoint")
    assert status[0]["checkpoint"] == kafka_checkpoint[("compacted", 0)]  # Kafka's cleaning
    assert status[0]["min_cleanable_dirty_ratio"] == float(LATER_RATIO)
    explained = cli(data, "explain", "compacted", KEYS[1].decode()).stdout
    stored = [r for r in case.records["compacted"] if r.key == KEYS[1]]
    assert all(f"offset {r.offset} " in explained for r in stored), explained
    assert_left_alone(before, data, "dump-log, cleaner-status and explain")


def test_offline_clean_keeps_the_latest_record_per_key(
    written: dict[str, Written], tmp_path: Path
) -> None:
    case = written["clean"]
    data = _copy(case.data, tmp_path / "data")
    latest = {r.key: r for r in case.records["compacted"]}
    cli(data, "clean", "compacted")
    with Store.open(data) as store:
        records = store_view(store, "compacted")
        first_uncleanable = store.segments("compacted", 0)[-1].base_offset
        bases = {s.base_offset for s in store.segments("compacted", 0)}
    cleaned = [r for r in records if r.offset < first_uncleanable]
    assert len(records) < len(case.records["compacted"])
    assert len({r.key for r in cleaned}) == len(cleaned)  # one record per key left
    assert {r.key: r for r in records} == latest  # and it is the latest
    # A segment the cleaning removed took its indexes and producer snapshot with it.
    leftovers = [
        p.name
        for p in (data / "compacted-0").iterdir()
        if p.name[:20].isdigit() and p.suffix != ".deleted" and int(p.name[:20]) not in bases
        and p.suffix != ".snapshot"
    ]  # fmt: skip
    assert not leftovers


def test_kafka_starts_over_a_directory_compactlog_closed(case: Written, tmp_path: Path) -> None:
    data = _copy(case.data, tmp_path / "data")
    Store.open(data).close()
    cli(data, "verify")
    cli(data, "cleaner-status")
    broker = KafkaBroker(tmp_path / "kafka", data_dir=data, config=BROKER_CONFIG)
    with running(broker):
        topics = TOPICS if case.kind == "clean" else ("codecs", "rolled")
        for topic in topics:
            assert java_consume(broker.bootstrap, topic) == case.records[topic], topic
    log = broker.server_log.read_text(errors="replace")
    assert "since clean shutdown file was found" in log
    if case.kind == "clean":
        # compactlog kept Kafka's broker epoch: the controller sees a clean restart.
        assert "Unable to read the broker epoch" not in log
        assert "handleBrokerUncleanShutdown" not in log
    assert not [p.name for p in data.iterdir() if p.name.endswith("-stray")]
