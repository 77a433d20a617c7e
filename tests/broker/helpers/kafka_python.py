"""Producing and reading with kafka-python.

Importing this module imports kafka-python's parts the tests use, once, with its import-time
DeprecationWarning silenced (tests/broker/conftest.py imports it before any test module does).
"""

from __future__ import annotations

import importlib.util
import time
import warnings
from collections.abc import Mapping, Sequence

from tests.broker.helpers.clients import (
    CLIENT_TIMEOUT_S,
    PY_CONSUMER_SETTINGS,
    Seen,
    deadline_error,
)

if importlib.util.find_spec("kafka") is not None:
    with warnings.catch_warnings():
        # kafka-python 3.0 builds its protocol classes at import time with
        # importlib.resources.read_text, deprecated in Python 3.11: import every part the tests
        # use here, once, so that no later import warns (warnings are errors in this suite).
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka
        import kafka.admin
        import kafka.coordinator.assignors.roundrobin
        import kafka.errors  # noqa: F401


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    codec: str,
    partition: int | None,
    acks: str,
    idempotent: bool | None,
) -> list[tuple[int, int]]:
    from kafka import KafkaProducer

    extra = {} if idempotent is None else {"enable_idempotence": idempotent}
    producer = KafkaProducer(
        **extra,
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        acks=-1 if acks == "all" else int(acks),
        linger_ms=20,
        request_timeout_ms=10_000,
        max_block_ms=10_000,
        retries=2,
    )
    try:
        futures = [producer.send(topic, key=k, value=v, partition=partition) for k, v in records]
        producer.flush(timeout=CLIENT_TIMEOUT_S)
        return [(m.partition, m.offset) for m in (f.get(timeout=1) for f in futures)]
    finally:
        producer.close(timeout=5)


def read(
    bootstrap: str,
    topic: str,
    ends: Mapping[int, int],
    group: str | None,
    start: int | None,
    timeout: float,
) -> tuple[list[Seen], dict[int, int]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        **PY_CONSUMER_SETTINGS,
    )
    seen: list[Seen] = []
    positions: dict[int, int] = {}
    try:
        tps = [TopicPartition(topic, p) for p in ends]
        if group is None:
            consumer.assign(tps)
        else:
            consumer.subscribe([topic])
        if start is not None:
            assert group is None
            for tp in tps:
                consumer.seek(tp, start)
        deadline = time.monotonic() + timeout
        while True:
            for tp, messages in consumer.poll(timeout_ms=100).items():
                seen += [Seen(tp.partition, m.offset, m.key, m.value) for m in messages]
            assigned = consumer.assignment()
            if {tp.partition for tp in assigned} == set(ends):
                positions = {tp.partition: consumer.position(tp) for tp in assigned}
                if all(positions[p] >= end for p, end in ends.items()):
                    break
            if time.monotonic() > deadline:
                raise AssertionError(deadline_error("kafka-python", positions, ends))
        if group is not None:
            consumer.commit()
    finally:
        consumer.close()
    return seen, positions
