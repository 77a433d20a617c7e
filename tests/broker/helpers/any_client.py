"""``produce`` and ``read`` with any of the four clients, chosen by its name (the ids of
:data:`~tests.broker.helpers.clients.CLIENTS`), so that one test runs over every client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from tests.broker.helpers import aiokafka_client, confluent, kafka_python, kcat
from tests.broker.helpers.clients import CLIENT_TIMEOUT_S, Seen


def produce(
    client: str,
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    codec: str = "none",
    partition: int | None = None,
    acks: str = "all",
    idempotent: bool | None = None,
) -> list[tuple[int, int]]:
    """Produce ``records`` with ``client``; returns (partition, offset) per record in order (kcat
    reports none: an empty list). Raises when any record is not acknowledged.

    ``idempotent``: None keeps the client's default (kafka-python 3 is idempotent by default,
    the others are not)."""
    if client == "kafka-python":
        return kafka_python.produce(bootstrap, topic, records, codec, partition, acks, idempotent)
    if client == "confluent-kafka":
        return confluent.produce(bootstrap, topic, records, codec, partition, acks, idempotent)
    if client == "aiokafka":
        return asyncio.run(
            aiokafka_client.produce(bootstrap, topic, records, codec, partition, acks, idempotent)
        )
    if client == "kcat":
        kcat.produce(bootstrap, topic, records, codec, partition)
        return []
    raise ValueError(client)


def read(
    client: str,
    bootstrap: str,
    topic: str,
    ends: Mapping[int, int],
    *,
    group: str | None = None,
    start: int | None = None,
    timeout: float = CLIENT_TIMEOUT_S,
) -> tuple[list[Seen], dict[int, int]]:
    """Read ``topic`` from the beginning (or from offset ``start`` in every partition) until the
    position of every partition in ``ends`` reaches its end offset. ``group``: subscribe in that
    consumer group (and commit at the end) instead of assigning the partitions.

    Returns the records seen, in the order seen, and the final position per partition (for
    kcat, which has no position, the end offsets once it exited at the end of every partition).
    """
    if client == "kafka-python":
        return kafka_python.read(bootstrap, topic, ends, group, start, timeout)
    if client == "confluent-kafka":
        return confluent.read(bootstrap, topic, ends, group, start, timeout)
    if client == "aiokafka":
        return asyncio.run(aiokafka_client.read(bootstrap, topic, ends, group, start, timeout))
    if client == "kcat":
        return kcat.read(bootstrap, topic, ends, group, start, timeout)
    raise ValueError(client)
