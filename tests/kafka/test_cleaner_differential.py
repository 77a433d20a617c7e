"""The cleaner, differential (issue 15, item 3): Kafka's cleaner and compactlog's on the same log.

The workloads, one topic each (``TOPICS``), run together in one Kafka broker whose cleaner has
the smallest dedupe buffer Kafka accepts (``log.cleaner.dedupe.buffer.size`` must exceed
1 MiB per cleaner thread: 1048577 bytes, 39,321 keys per pass):

* ``fruit-prices``: seed 000 (grape=$2.69, lime=$0.49, grape=null, lime=$1.59), cleaned, then
  cleaned again after the tombstone's horizon;
* ``tombstones``: 300 keys, three versions, a tenth of them deleted, gzip batches of 20; the
  tombstones survive the first cleaning (stamped) and go in the second, new ones get stamped;
* ``min-lag``: ``min.compaction.lag.ms`` of an hour keeps the recent segment out of the
  cleaning; ``max-lag`` / ``max-lag-recent``: a dirty ratio that never qualifies
  (``min.cleanable.dirty.ratio=1``) and ``max.compaction.lag.ms`` of an hour: the old log is
  cleaned anyway, the recent one is not;
* ``wide``: 100,000 keys twice: partial passes (three cleanings of the same log in a row);
* ``keyless``: written as a ``delete`` topic with keyless records, then made ``compact``: the
  cleaner drops keyless records, keeps the round's last batch empty (KAFKA-17076);
* ``codecs``: batches of ten records in every codec, partly superseded: rebuilt, recompressed;
  ``big-codecs``: the same with 600 records of about 300 bytes a batch (many gzip buffers,
  several lz4 blocks, more than a zstd block), byte for byte; ``big-snappy``: the same with
  snappy batches among them, whose rebuilt compressed bytes may differ in a short last block
  (the one difference with a reason, see ``SNAPPY_PAYLOAD`` in tests/kafka/differential.py);
* ``idempotent``: two idempotent producers; the first one's last batch is superseded and kept
  as an empty batch, then dropped once that producer writes again;
* ``compact-delete``: ``compact,delete`` with an hour of retention and a dirty ratio that never
  qualifies: nothing is cleaned, retention (which Kafka's cleaner threads run for such logs)
  deletes the segments older than the hour and moves the log start offset;
* ``index-full``: ``segment.index.bytes`` of 48 and ``index.interval.bytes`` of 0: two
  segments fit a group by their index sizes, but the cleaned segment indexes every batch of
  the group and its time index overflows: Kafka marks the partition uncleanable.

Every stage compares every batch, index entry, checkpoint and log start offset (see
tests/kafka/differential.py), and the figures of the cleaner's summary lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.kafka.differential import (
    Differential,
    Producer,
    RawProducer,
    Round,
    StageResult,
    Topic,
    compare_partition,
    read_batches,
    records_of,
)
from tests.kafka.harness import KafkaBroker

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

HOUR = 3_600_000
MINUTE = 60_000
#: Short enough that the second stage starts past the first stage's horizons.
DELETE_RETENTION_MS = 3000
#: Kafka rolls a segment when a batch's timestamp is segment.ms past the segment's first one.
ROLL = {"segment.ms": str(MINUTE)}
COMPACT = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(DELETE_RETENTION_MS),
    **ROLL,
}
BROKER = {"log.cleaner.dedupe.buffer.size": "1048577", "log.cleaner.threads": "1"}
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

TOPICS = [
    Topic("fruit-prices", 1, COMPACT),
    Topic("tombstones", 1, COMPACT),
    Topic("min-lag", 1, {**COMPACT, "min.compaction.lag.ms": str(HOUR)}),
    Topic(
        "max-lag",
        1,
        {**COMPACT, "min.cleanable.dirty.ratio": "1", "max.compaction.lag.ms": str(HOUR)},
    ),
    Topic(
        "max-lag-recent",
        1,
        {**COMPACT, "min.cleanable.dirty.ratio": "1", "max.compaction.lag.ms": str(HOUR)},
    ),
    Topic("wide", 1, {**COMPACT, "segment.bytes": "1048576"}),
    Topic("keyless", 1, {"cleanup.policy": "delete", "retention.ms": "-1", **ROLL}, COMPACT),
    Topic("codecs", 1, COMPACT),
    Topic("big-codecs", 1, COMPACT),
    Topic("big-snappy", 1, COMPACT),
    Topic("idempotent", 1, COMPACT),
    Topic(
        "compact-delete",
        1,
        {
            **COMPACT,
            "cleanup.policy": "compact,delete",
            "retention.ms": str(HOUR),
            "min.cleanable.dirty.ratio": "1",
        },
        natural=True,
    ),
    Topic("index-full", 1, {**COMPACT, "segment.index.bytes": "48", "index.interval.bytes": "0"}),
]


class Clock:
    """Record timestamps: from three hours ago, one millisecond a batch, and jumps that roll."""

    def __init__(self, start: int) -> None:
        self.t = start

    def tick(self) -> int:
        self.t += 1
        return self.t

    def roll(self) -> int:
        """A timestamp two segment.ms later: the batch that carries it opens a new segment."""
        self.t += 2 * MINUTE
        return self.t


def stage_one(p: RawProducer, producers: dict[str, Producer], start: int) -> None:
    """The first stage's appends; record timestamps from ``start`` (three hours ago)."""
    now = start + 3 * HOUR
    c = Clock(start)
    # seed 000
    for key, value in [
        (b"grape", b"$2.69"),
        (b"lime", b"$0.49"),
        (b"grape", None),
        (b"lime", b"$1.59"),
    ]:
        p.send("fruit-prices", 0, [(key, value)], c.tick())
    p.send("fruit-prices", 0, [(b"kiwi", b"$0.30")], c.roll())

    c = Clock(start)
    for version in range(3):
        for first in range(0, 300, 20):
            records = [
                (
                    b"key-%03d" % k,
                    None if version == 2 and k % 10 == 3 else b"v%d-%d" % (version, k),
                )
                for k in range(first, first + 20)
            ]
            p.send("tombstones", 0, records, c.tick(), compression="gzip")
    p.send("tombstones", 0, [(b"key-000", b"active")], c.roll())

    # min-lag: an old segment with duplicates, a recent one (inside the hour), the active one
    c = Clock(start)
    for i in range(40):
        p.send("min-lag", 0, [(b"k%d" % (i % 10), b"old-%d" % i)], c.tick())
    c = Clock(now - 20 * MINUTE)
    for i in range(20):
        p.send("min-lag", 0, [(b"k%d" % (i % 10), b"recent-%d" % i)], c.tick())
    p.send("min-lag", 0, [(b"k0", b"active")], c.roll())

    for topic, first in (("max-lag", start), ("max-lag-recent", now - 10 * MINUTE)):
        c = Clock(first)
        for i in range(40):
            p.send(topic, 0, [(b"k%d" % (i % 10), b"v-%d" % i)], c.tick())
        p.send(topic, 0, [(b"k0", b"active")], c.roll() if topic == "max-lag" else c.tick())
        if topic == "max-lag-recent":
            # a second segment, still recent, so that a dirty segment exists to be tempted by
            p.send(topic, 0, [(b"k1", b"next")], c.roll())

    c = Clock(start)
    for version in range(2):
        for first in range(0, 100_000, 2000):
            records = [(b"k%06d" % k, b"v%d" % version) for k in range(first, first + 2000)]
            p.send("wide", 0, records, c.tick())

    c = Clock(start)
    for i in range(30):
        key = None if i % 3 == 0 else b"k%d" % (i % 5)
        p.send("keyless", 0, [(key, b"v%d" % i), (None, b"keyless-%d" % i)], c.tick())
    p.send("keyless", 0, [(None, b"only-keyless")], c.tick())  # the round's last batch
    p.send("keyless", 0, [(b"k0", b"active")], c.roll())

    c = Clock(start)
    for i in range(25):
        codec = CODECS[i % 5]
        records = [
            (
                b"k%d" % ((i * 3 + j) % 17),
                None if j == 9 and i % 4 == 0 else b"%s-%d-%d" % (codec.encode(), i, j),
            )
            for j in range(10)
        ]
        p.send("codecs", 0, records, c.tick(), compression=codec)
    p.send("codecs", 0, [(b"k0", b"active")], c.roll())

    c = Clock(start)
    words = [b"alpha", b"bravo", b"charlie", b"delta", b"echo", b"foxtrot", b"golf", b"hotel"]
    for topic, skip in (("big-codecs", "snappy"), ("big-snappy", "")):
        for i, codec in enumerate(CODECS * 2):
            if codec == skip:
                continue
            records = []
            for j in range(600):
                key = b"k%04d" % ((i * 600 + j * 7) % 2000)
                value = b" ".join(
                    words[(i * j + q * q) % 8] + b"%d" % (q * j % 97) for q in range(40)
                )
                records.append((key, value))
            p.send(topic, 0, records, c.tick(), compression=codec)
        p.send(topic, 0, [(b"k0000", b"active")], c.roll())

    c = Clock(start)
    for n in range(20):  # two old segments, then a recent one and the active one
        p.send(
            "compact-delete",
            0,
            [(b"k%d" % (n % 4), b"v%d" % n)],
            c.roll() if n % 5 == 0 else c.tick(),
        )
    c = Clock(now - 10 * MINUTE)
    p.send("compact-delete", 0, [(b"k0", b"recent")], c.tick())
    p.send("compact-delete", 0, [(b"k1", b"active")], c.roll())

    c = Clock(start)
    for n in range(9):
        p.send("index-full", 0, [(b"key-%d" % n, b"value")], c.roll() if n % 3 == 0 else c.tick())
    p.send("index-full", 0, [(b"key-0", b"active")], c.roll())

    c = Clock(start)
    first = producers.setdefault("first", p.init_producer_id())
    second = producers.setdefault("second", p.init_producer_id())
    p.send("idempotent", 0, [(b"a", b"1"), (b"b", b"1")], c.tick(), producer=first)
    p.send("idempotent", 0, [(b"c", b"1")], c.tick(), producer=first)  # first's last batch
    p.send("idempotent", 0, [(b"c", b"2"), (b"a", b"2")], c.tick(), producer=second)
    p.send("idempotent", 0, [(b"d", b"1")], c.tick())
    p.send("idempotent", 0, [(b"d", b"active")], c.roll())


def stage_two(p: RawProducer, producers: dict[str, Producer], start: int) -> None:
    c = Clock(start + 10 * MINUTE)
    p.send("fruit-prices", 0, [(b"melon", b"$3.10")], c.roll())
    p.send(
        "tombstones", 0, [(b"key-001", None), (b"key-002", b"late")], c.tick(), compression="gzip"
    )
    p.send("tombstones", 0, [(b"key-000", b"next")], c.roll())
    p.send("codecs", 0, [(b"k1", b"late"), (b"k2", None)], c.tick(), compression="zstd")
    p.send("codecs", 0, [(b"k3", b"next")], c.roll())
    p.send("idempotent", 0, [(b"e", b"1")], c.tick(), producer=producers["first"])
    p.send("idempotent", 0, [(b"e", b"next")], c.roll())


def report(result: StageResult, stage: str) -> str:
    lines = [f"{stage}: now={result.now}, Kafka cleaned {len(result.kafka_rounds)} times"]
    lines.append(f"  {'partition':<18} {'batches':>7} {'identical':>9} {'allowed':>7}  differences")
    for c in result.comparisons:
        lines.append(
            f"  {c.partition:<18} {c.batches:>7} {c.identical_batches:>9} {len(c.allowed):>7}  "
            f"{len(c.differences)}"
        )
    lines += [f"  allowed: {a}" for c in result.comparisons for a in c.allowed]
    return "\n".join(lines)


def by_log(rounds: list[Round]) -> dict[str, list[Round]]:
    out: dict[str, list[Round]] = {}
    for r in rounds:
        out.setdefault(r.log, []).append(r)
    return out


def check(result: StageResult, stage: str) -> None:
    print(report(result, stage))
    problems = [d for c in result.comparisons for d in c.differences]
    if by_log(result.kafka_rounds) != by_log(result.replay_rounds):
        problems.append(
            f"rounds: Kafka {result.kafka_rounds}\n  compactlog's replay {result.replay_rounds}"
        )
    sections = {log: [r[:3] for r in rs] for log, rs in by_log(result.kafka_rounds).items()}
    natural = {log: [r[:3] for r in rs] for log, rs in by_log(result.natural_rounds).items()}
    if sections != natural:
        problems.append(f"cleanings: Kafka {sections}\n  compactlog {natural}")
    if result.kafka_checkpoint != result.natural_checkpoint:
        problems.append(
            f"cleaner checkpoint: Kafka {result.kafka_checkpoint}, "
            f"compactlog {result.natural_checkpoint}"
        )
    if result.kafka_uncleanable != result.natural_uncleanable:
        problems.append(
            f"uncleanable: Kafka {result.kafka_uncleanable}, "
            f"compactlog {result.natural_uncleanable}"
        )
    if result.kafka_log_start != result.natural_log_start:
        problems.append(
            f"log start offsets: Kafka {result.kafka_log_start}, "
            f"compactlog {result.natural_log_start}"
        )
    assert not problems, "\n".join(problems)


def kept(
    tmp_path: Path, stage: int, topic: str
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Kafka's cleaned partition of a stage: (batch base offset, record offset, key, value), with
    (base, -1, None, None) for an empty batch."""
    out = []
    for log in sorted((tmp_path / f"stage-{stage}" / "kafka" / f"{topic}-0").glob("*.log")):
        for batch in read_batches(log):
            records = [(r[0], r[2], r[3]) for r in records_of(batch.data)]
            base = batch.header["baseOffset"]
            out += [(base, *r) for r in records] or [(base, -1, None, None)]
    return out


def test_kafka_and_compactlog_clean_the_same_logs_the_same_way(
    tmp_path: Path, kafka: Callable[..., KafkaBroker]
) -> None:
    start = int(time.time() * 1000) - 3 * HOUR
    differential = Differential(
        tmp_path, kafka, TOPICS, BROKER, allow_snappy=frozenset({"big-snappy"})
    )
    producers: dict[str, Producer] = {}

    first = differential.stage(lambda p, _: stage_one(p, producers, start))
    check(first, "stage 1")
    cleaned = set(first.kafka_checkpoint)
    assert ("max-lag", 0) in cleaned and ("max-lag-recent", 0) not in cleaned
    assert first.kafka_uncleanable == {"index-full-0"}
    assert first.kafka_log_start[("compact-delete", 0)] == 20  # retention moved it
    # What the workloads are there to show, as Kafka did it (and compactlog, byte for byte):
    # the seed's tombstone survives its first cleaning, stamped; the first idempotent
    # producer's superseded last batch stays as an empty batch; the keyless batch at the end of
    # the cleaned range goes (Kafka 4.4 keeps only the batch ending at the high watermark).
    assert kept(tmp_path, 1, "fruit-prices") == [
        (2, 2, b"grape", None),
        (3, 3, b"lime", b"$1.59"),
        (4, 4, b"kiwi", b"$0.30"),
    ]
    assert (2, -1, None, None) in kept(tmp_path, 1, "idempotent")
    assert [base for base, *_ in kept(tmp_path, 1, "keyless")] == [44, 50, 52, 56, 58, 61]
    # Partial passes: each maps 39,321 keys; the 180,000 dirty records hold no key twice
    # within 39,321 records, so five rounds, each ending where the map filled.
    assert [r.end_offset for r in by_log(first.kafka_rounds)["wide-0"]] == [
        39321,
        78642,
        117963,
        157284,
        180000,
    ]

    # The second stage cleans after every horizon the first one stamped.
    second = differential.stage(
        lambda p, _: stage_two(p, producers, start),
        not_before_ms=max(first.horizons) + 1000,
    )
    check(second, "stage 2")
    # Past the horizon the tombstone goes; once its producer wrote again, the empty batch too.
    assert [key for _, _, key, _ in kept(tmp_path, 2, "fruit-prices")] == [
        b"lime",
        b"kiwi",
        b"melon",
    ]
    assert (2, -1, None, None) not in kept(tmp_path, 2, "idempotent")


def test_the_same_produce_requests_make_the_same_log(
    tmp_path: Path, kafka: Callable[..., KafkaBroker]
) -> None:
    """The append path, differential: stage one's Produce requests (every codec, idempotent
    producers, rolls by timestamp, per-batch index entries) sent to Kafka and to compactlog's
    broker give the same segments, batches and index entries."""
    from compactlog.broker.server import BrokerThread
    from compactlog.storage.store import Store

    start = int(time.time() * 1000) - 3 * HOUR
    broker = kafka(config={"log.cleaner.enable": "false"})
    for topic in TOPICS:
        configs = [a for k, v in topic.config.items() for a in ("--config", f"{k}={v}")]
        done = broker.tool(
            "kafka-topics", "--create", "--topic", topic.name,
            "--partitions", str(topic.partitions), *configs,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    producer = RawProducer(broker.bootstrap)
    stage_one(producer, {}, start)
    producer.close()
    broker.stop()

    ours = tmp_path / "compactlog"
    with Store.open(ours, config=BROKER) as store:
        for topic in TOPICS:
            store.create_topic(topic.name, topic.partitions, topic.config)
    served = BrokerThread(ours, config={**BROKER, "log.cleaner.enable": "false"}).start()
    try:
        producer = RawProducer(served.bootstrap)
        stage_one(producer, {}, start)
        producer.close()
    finally:
        served.stop()

    comparisons = [compare_partition(broker.data_dir, ours, f"{t.name}-0") for t in TOPICS]
    problems = [d for c in comparisons for d in c.differences]
    assert sum(c.batches for c in comparisons) > 300
    assert not problems, "\n".join(problems)
