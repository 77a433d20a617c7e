"""Producing and reading with aiokafka (each call runs its own event loop).

Not named ``aiokafka.py``: a module named like the client's package would shadow it wherever
this directory is on ``sys.path``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

from tests.broker.helpers.clients import (
    CLIENT_TIMEOUT_S,
    PY_CONSUMER_SETTINGS,
    Seen,
    deadline_error,
)


async def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    codec: str,
    partition: int | None,
    acks: str,
    idempotent: bool | None,
) -> list[tuple[int, int]]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=bool(idempotent),
        compression_type=None if codec == "none" else codec,
        acks=-1 if acks == "all" else int(acks),
        linger_ms=20,
        request_timeout_ms=10_000,
    )
    await asyncio.wait_for(producer.start(), CLIENT_TIMEOUT_S)
    try:
        futures = [
            await producer.send(topic, key=k, value=v, partition=partition) for k, v in records
        ]
        metas = await asyncio.wait_for(asyncio.gather(*futures), CLIENT_TIMEOUT_S)
        return [(m.partition, m.offset) for m in metas]
    finally:
        await producer.stop()


async def read(
    bootstrap: str,
    topic: str,
    ends: Mapping[int, int],
    group: str | None,
    start: int | None,
    timeout: float,
) -> tuple[list[Seen], dict[int, int]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        **PY_CONSUMER_SETTINGS,
    )
    await asyncio.wait_for(consumer.start(), CLIENT_TIMEOUT_S)
    seen: list[Seen] = []
    positions: dict[int, int] = {}
    try:
        tps = [TopicPartition(topic, p) for p in ends]
        if group is None:
            consumer.assign(tps)
        else:
            consumer.subscribe([topic])
        if start is not None:
            for tp in tps:
                consumer.seek(tp, start)
        deadline = time.monotonic() + timeout
        while True:
            batches = await consumer.getmany(timeout_ms=100)
            for tp, messages in batches.items():
                seen += [Seen(tp.partition, m.offset, m.key, m.value) for m in messages]
            assigned = consumer.assignment()
            if {tp.partition for tp in assigned} == set(ends):
                positions = {tp.partition: await consumer.position(tp) for tp in assigned}
                if all(positions[p] >= end for p, end in ends.items()):
                    break
            if time.monotonic() > deadline:
                raise AssertionError(deadline_error("aiokafka", positions, ends))
        if group is not None:
            await consumer.commit()
    finally:
        await consumer.stop()
    return seen, positions
