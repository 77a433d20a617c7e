"""Producing and reading with confluent-kafka (librdkafka's Python binding)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tests.broker.helpers.clients import CLIENT_TIMEOUT_S, Seen, deadline_error


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    codec: str,
    partition: int | None,
    acks: str,
    idempotent: bool | None,
) -> list[tuple[int, int]]:
    from confluent_kafka import KafkaException, Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": bool(idempotent),
            "compression.type": codec,
            "acks": acks,
            "linger.ms": 20,
            "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000),
        }
    )
    results: list[Any] = [None] * len(records)

    def delivered(i: int) -> Callable[[Any, Any], None]:
        def report(err: Any, msg: Any) -> None:
            results[i] = err if err is not None else (msg.partition(), msg.offset())

        return report

    for i, (k, v) in enumerate(records):
        kwargs: dict[str, Any] = {"key": k, "value": v, "on_delivery": delivered(i)}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
    left = producer.flush(CLIENT_TIMEOUT_S)
    assert left == 0, f"confluent-kafka: {left} records not delivered in {CLIENT_TIMEOUT_S} s"
    for r in results:
        if not isinstance(r, tuple):
            raise KafkaException(r)
    return results


def read(
    bootstrap: str,
    topic: str,
    ends: Mapping[int, int],
    group: str | None,
    start: int | None,
    timeout: float,
) -> tuple[list[Seen], dict[int, int]]:
    from confluent_kafka import (
        OFFSET_BEGINNING,
        Consumer,
        KafkaError,
        KafkaException,
        TopicPartition,
    )

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            # The Python binding requires a group id even for assigned partitions.
            "group.id": group or f"unused-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500,
        }
    )
    seen: list[Seen] = []
    positions: dict[int, int] = {}
    try:
        if group is None:
            first = OFFSET_BEGINNING if start is None else start
            consumer.assign([TopicPartition(topic, p, first) for p in ends])
        else:
            consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while True:
            msg = consumer.poll(0.1)
            if msg is not None:
                err = msg.error()
                if err is None:
                    seen.append(Seen(msg.partition(), msg.offset(), msg.key(), msg.value()))
                    positions[msg.partition()] = msg.offset() + 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    # The end-of-partition event carries the fetch position.
                    positions[msg.partition()] = msg.offset()
                else:
                    raise KafkaException(err)
            if all(positions.get(p, -1) >= end for p, end in ends.items()):
                break
            if time.monotonic() > deadline:
                raise AssertionError(deadline_error("confluent-kafka", positions, ends))
        if group is not None and seen:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen, positions
