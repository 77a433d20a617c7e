"""Produce and consume with the four real clients, every codec, with and without a group.

* Each client produces keyed records with each codec; the store then holds exactly those records,
  in order, in batches of that codec (spec 1.4 item 2: old librdkafka silently sends gzip, snappy
  and lz4 uncompressed when the broker's advertised versions are wrong).
* Each client reads back, from the beginning, a topic that every client wrote with every codec,
  alone (assigned partitions) and in a consumer group; it sees exactly what the store holds and
  its positions reach the end offsets.
* A record without a key sent to a compacted topic is refused with INVALID_RECORD (87) by every
  client as spec section 3 measured it, and nothing is appended.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.helpers.any_client import produce, read
from tests.broker.helpers.clients import (
    CLIENTS,
    CODEC_IDS,
    CODECS,
    INSTALLED,
    by_partition,
    client_params,
    keyed_records,
    needs_aiokafka,
    needs_confluent,
    needs_kafka_python,
    needs_kcat,
)
from tests.broker.helpers.kcat import kcat
from tests.broker.helpers.server import Brokers
from tests.broker.helpers.store import (
    create_topic,
    end_offsets,
    log_end_offset,
    stored,
    stored_codecs,
)

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(60),
    pytest.mark.usefixtures("collect_client_garbage"),
]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", client_params())
def test_produce_keyed_records_with_codec(broker: Any, client: str, codec: str) -> None:
    create_topic(broker, "t", 1)
    records = keyed_records(20, keys=7, tag=f"{client}-{codec}")
    acked = produce(client, broker.bootstrap, "t", records, codec=codec)

    assert [(r.key, r.value) for r in stored(broker, "t")] == records
    assert [r.offset for r in stored(broker, "t")] == list(range(20))
    if acked:  # kcat reports no offsets
        assert acked == [(0, i) for i in range(20)]
    codecs = stored_codecs(broker, "t")
    assert codecs and set(codecs) == {CODEC_IDS[codec]}, (
        f"{client} with {codec}: stored batches have compression ids {codecs}"
    )


# --- consuming a topic every client wrote with every codec ---------------------------------------
MIXED_TOPIC = "mixed"
MIXED_PARTITIONS = 2


@pytest.fixture(scope="module")
def mixed_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data directory holding ``mixed``: 2 partitions, written by every installed client with
    every codec (built once per module; each test serves a copy)."""
    data_dir = tmp_path_factory.mktemp("mixed") / "data"
    brokers = Brokers(data_dir)
    b = brokers.start()
    try:
        create_topic(b, MIXED_TOPIC, MIXED_PARTITIONS)
        for client in (c for c in CLIENTS if INSTALLED[c]):
            for codec in CODECS:
                for partition in range(MIXED_PARTITIONS):
                    records = keyed_records(5, keys=3, tag=f"{client}-{codec}-{partition}")
                    produce(
                        client, b.bootstrap, MIXED_TOPIC, records, codec=codec, partition=partition
                    )
    finally:
        brokers.stop_all()
    yield data_dir


@pytest.fixture
def mixed_broker(mixed_data_dir: Path, tmp_path: Path, brokers: Brokers) -> Any:
    copy = tmp_path / "mixed-copy"
    shutil.copytree(mixed_data_dir, copy)
    return brokers.start(copy)


@pytest.mark.parametrize("group", [False, True], ids=["assigned", "group"])
@pytest.mark.parametrize("client", client_params())
def test_consume_every_codec_from_the_beginning(
    mixed_broker: Any, client: str, group: bool
) -> None:
    expected = by_partition(stored(mixed_broker, MIXED_TOPIC))
    ends = end_offsets(mixed_broker, MIXED_TOPIC)
    assert all(len(expected[p]) == ends[p] > 0 for p in ends)
    assert {c for p in ends for c in stored_codecs(mixed_broker, MIXED_TOPIC, p)} == set(
        CODEC_IDS.values()
    )

    seen, positions = read(
        client, mixed_broker.bootstrap, MIXED_TOPIC, ends, group=f"g-{client}" if group else None
    )
    assert by_partition(seen) == expected
    assert positions == ends


# --- a keyless record to a compacted topic -------------------------------------------------------
@needs_kafka_python
def test_keyless_record_to_compacted_topic_kafka_python(broker: Any) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    create_topic(broker, "c", 1, {"cleanup.policy": "compact"})
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000, max_block_ms=10_000
    )
    try:
        with pytest.raises(InvalidRecordError):
            producer.send("c", value=b"no key").get(timeout=20)
    finally:
        producer.close(timeout=5)
    assert log_end_offset(broker, "c") == 0


@needs_confluent
def test_keyless_record_to_compacted_topic_confluent(broker: Any) -> None:
    from confluent_kafka import KafkaError, Producer

    create_topic(broker, "c", 1, {"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 20_000})
    errors: list[Any] = []
    producer.produce("c", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(20) == 0
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD, errors[0]
    assert log_end_offset(broker, "c") == 0


@needs_aiokafka
def test_keyless_record_to_compacted_topic_aiokafka(broker: Any) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import UnknownError

    create_topic(broker, "c", 1, {"cleanup.policy": "compact"})

    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        await asyncio.wait_for(producer.start(), 20)
        try:
            # aiokafka 0.14's error table has no entry for 87: it raises UnknownError (spec 3).
            with pytest.raises(UnknownError):
                await asyncio.wait_for(producer.send_and_wait("c", value=b"no key"), 20)
        finally:
            await producer.stop()

    asyncio.run(send())
    assert log_end_offset(broker, "c") == 0


@needs_kcat
def test_keyless_record_to_compacted_topic_kcat(broker: Any) -> None:
    create_topic(broker, "c", 1, {"cleanup.policy": "compact"})
    done = kcat(broker.bootstrap, "-P", "-t", "c", input=b"no key\n", check=False)
    assert done.returncode == 1
    assert b"Broker: Broker failed to validate record" in done.stderr, done.stderr
    assert log_end_offset(broker, "c") == 0


@needs_kafka_python
def test_keyless_record_to_a_delete_topic_is_accepted(broker: Any) -> None:
    """The refusal is the compacted topic's: the same record to a ``delete`` topic is stored."""
    create_topic(broker, "d", 1)
    assert produce("kafka-python", broker.bootstrap, "d", [(None, b"no key")]) == [(0, 0)]
    assert stored(broker, "d")[0].key is None
