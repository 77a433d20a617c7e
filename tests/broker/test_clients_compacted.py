"""Consumers on a cleaned compacted topic: across offset gaps and empty batches (spec 5.2).

The topic is written by the clients themselves: idempotent producers (kafka-python,
confluent-kafka, aiokafka), each flush one batch, updating a few keys. The last batch of
kafka-python's producer is then entirely superseded, so the cleaner keeps it as an **empty
batch** (Kafka keeps an active producer's last batch for its sequence state), and every
superseded record leaves a gap. After a roll and a clean through the broker's store, every client
must read exactly the latest value of every key, skip the gaps and the empty batch by their
lastOffsetDelta, and end with its position at the log end offset, from the beginning and from
any offset (spec 5.2's table: a start inside a gap or an empty batch reads from the next record).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.broker.helpers.any_client import produce, read
from tests.broker.helpers.clients import CLIENTS, INSTALLED, client_params, wait_until
from tests.broker.helpers.store import (
    create_topic,
    end_offsets,
    log_end_offset,
    on_broker,
    stored,
    stored_batches,
)

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(60),
    pytest.mark.usefixtures("collect_client_garbage"),
]

TOPIC = "changelog"
KEYS = [b"k%d" % i for i in range(5)]


def build_cleaned_topic(broker: Any) -> dict[bytes, bytes]:
    """Write, roll and clean ``TOPIC``; returns the latest value of every key."""
    create_topic(broker, TOPIC, 1, {"cleanup.policy": "compact"})
    latest: dict[bytes, bytes] = {}

    def send(client: str, records: list[tuple[bytes, bytes]], idempotent: bool | None) -> None:
        produce(client, broker.bootstrap, TOPIC, records, idempotent=idempotent)
        latest.update(records)

    for r in range(3):  # kafka-python 3 is idempotent by default
        send("kafka-python", [(k, b"kp-%d-%s" % (r, k)) for k in KEYS], None)
    if INSTALLED["confluent-kafka"]:
        send("confluent-kafka", [(k, b"ck-%s" % k) for k in KEYS[:3]], True)
    if INSTALLED["aiokafka"]:
        send("aiokafka", [(k, b"ak-%s" % k) for k in KEYS[3:]], True)
        send("aiokafka", [(b"k9", b"ak-k9")], True)
    else:
        send("kafka-python", [(k, b"kp-last-%s" % k) for k in KEYS], None)
    if INSTALLED["kcat"]:
        send("kcat", [(b"k1", b"kcat-k1")], None)

    on_broker(
        broker,
        lambda store: (store.roll(TOPIC, 0), broker.broker.log_manager.clean_log(TOPIC, 0)),
    )
    return latest


def batches(broker: Any) -> list[tuple[int, int, int]]:
    """(base offset, last offset, record count) of every stored batch."""
    return [
        (h.base_offset, h.base_offset + h.last_offset_delta, h.records_count)
        for h in stored_batches(broker, TOPIC)
    ]


@pytest.fixture
def cleaned(broker: Any) -> dict[bytes, bytes]:
    pytest.importorskip("kafka")
    latest = build_cleaned_topic(broker)
    offsets = [r.offset for r in stored(broker, TOPIC)]
    end = log_end_offset(broker, TOPIC)
    assert len(offsets) == len(latest) < end, "cleaning left no gap"
    assert any(count == 0 for _, _, count in batches(broker)), (
        f"no empty batch after cleaning: {batches(broker)}"
    )
    return latest


@pytest.mark.parametrize("client", client_params())
def test_reads_latest_value_per_key_across_gaps(
    broker: Any, cleaned: dict[bytes, bytes], client: str
) -> None:
    ends = end_offsets(broker, TOPIC)
    seen, positions = read(client, broker.bootstrap, TOPIC, ends)
    assert {s.key: s.value for s in seen} == cleaned
    assert len(seen) == len(cleaned), "a key was read twice"
    assert [s.offset for s in seen] == [r.offset for r in stored(broker, TOPIC)]
    assert positions == ends


@pytest.mark.parametrize("client", client_params())
def test_reads_from_offsets_inside_gaps_and_empty_batches(
    broker: Any, cleaned: dict[bytes, bytes], client: str
) -> None:
    """Spec 5.2's table: every start offset reads exactly the records at or after it."""
    records = stored(broker, TOPIC)
    end = log_end_offset(broker, TOPIC)
    kept = {r.offset for r in records}
    empty = [(base, last) for base, last, count in batches(broker) if count == 0]
    starts = {
        min(o for o in range(end) if o not in kept),  # the first gap
        empty[0][0],  # the first offset of an empty batch
        empty[0][1],  # its last offset
        records[-1].offset,  # the last record
        end,  # the high watermark: nothing to read, position stays
    }
    for start in sorted(starts):
        seen, positions = read(client, broker.bootstrap, TOPIC, {0: end}, start=start)
        want = [(r.offset, r.key, r.value) for r in records if r.offset >= start]
        assert [(s.offset, s.key, s.value) for s in seen] == want, f"from offset {start}"
        assert positions == {0: end}, f"from offset {start}"


@pytest.mark.parametrize("group", [False, True], ids=["assigned", "group"])
def test_every_client_agrees_after_cleaning_in_a_group(
    broker: Any, cleaned: dict[bytes, bytes], group: bool
) -> None:
    ends = end_offsets(broker, TOPIC)
    for client in (c for c in CLIENTS if INSTALLED[c]):
        seen, _ = read(
            client, broker.bootstrap, TOPIC, ends, group=f"g-{client}" if group else None
        )
        assert {s.key: s.value for s in seen} == cleaned, client


@pytest.mark.timeout(90)
def test_broker_cleaner_compacts_while_clients_produce(brokers: Any) -> None:
    """The broker's own cleaner (not the test) compacts a topic that rolls every few records;
    every client then reads the last value produced for every key (R10's criterion, tiny)."""
    broker = brokers.start(
        config={"log.cleaner.backoff.ms": 100, "log.cleaner.min.compaction.lag.ms": 0}
    )
    create_topic(
        broker,
        TOPIC,
        1,
        {"cleanup.policy": "compact", "segment.bytes": 1024, "min.cleanable.dirty.ratio": 0.01},
    )
    latest: dict[bytes, bytes] = {}
    producers = [c for c in ("kafka-python", "confluent-kafka", "aiokafka") if INSTALLED[c]]
    for r in range(6):
        client = producers[r % len(producers)]
        records = [(k, b"%s-%d-%s" % (client.encode(), r, k) + b"." * 100) for k in KEYS]
        produce(client, broker.bootstrap, TOPIC, records)
        latest.update(records)
    written = log_end_offset(broker, TOPIC)

    def compacted() -> bool:
        return len(stored(broker, TOPIC)) < written

    wait_until(compacted, "the broker's cleaner to clean the topic", timeout=30)
    ends = end_offsets(broker, TOPIC)
    for client in (c for c in CLIENTS if INSTALLED[c]):
        seen, positions = read(client, broker.bootstrap, TOPIC, ends)
        last = {}
        for s in seen:
            last[s.key] = s.value
        assert last == latest, client
        assert positions == ends, client
