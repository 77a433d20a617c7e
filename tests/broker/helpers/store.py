"""A running broker's store, read and written from the test: every call runs on the broker's
event loop (:func:`on_broker`), the only thread that may touch the store of a running broker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from tests.broker.helpers.clients import Seen

T = TypeVar("T")


def on_broker(broker: Any, fn: Callable[[Any], T]) -> T:
    """``fn(store)`` on the broker's event loop: the store of a running broker is used from its
    loop thread only (server module docstring), so a test touches it through here."""
    store = broker.broker.store
    result: T = broker.call(lambda: fn(store))
    return result


def create_topic(
    broker: Any, name: str, partitions: int = 1, config: Mapping[str, Any] | None = None
) -> None:
    """Create a topic through the broker's store (the admin tests create them with clients)."""
    on_broker(broker, lambda store: store.create_topic(name, partitions, dict(config or {})))


def append(
    broker: Any,
    topic: str,
    partition: int,
    records: Sequence[tuple[bytes | None, bytes | None]],
    timestamp: int | None = None,
) -> int:
    """``Store.append`` of one batch on the broker's loop; returns its first offset."""
    return on_broker(broker, lambda store: store.append(topic, partition, records, timestamp))


def stored(broker: Any, topic: str) -> list[Seen]:
    """Every record of ``topic`` in the store, partition by partition, in offset order."""

    def read_all(store: Any) -> list[Seen]:
        out = []
        for p in range(store.partitions(topic)):
            start = store.log_start_offset(topic, p)
            out += [Seen(p, r.offset, r.key, r.value) for r in store.read(topic, p, start)]
        return out

    return on_broker(broker, read_all)


def end_offsets(broker: Any, topic: str) -> dict[int, int]:
    return on_broker(
        broker,
        lambda store: {p: store.log_end_offset(topic, p) for p in range(store.partitions(topic))},
    )


def stored_batches(broker: Any, topic: str, partition: int = 0) -> list[Any]:
    """The header (:class:`~compactlog.records.batch.BatchHeader`) of every stored batch."""

    def headers(store: Any) -> list[Any]:
        log = store.log(topic, partition)
        return [b.header for b in log.iter_batches(log.log_start_offset)]

    return on_broker(broker, headers)


def stored_codecs(broker: Any, topic: str, partition: int = 0) -> list[int]:
    """The compression id (attributes bits 0-2) of every stored batch of a partition."""
    return [h.attributes & 0x07 for h in stored_batches(broker, topic, partition)]


def log_end_offset(broker: Any, topic: str, partition: int = 0) -> int:
    return on_broker(broker, lambda store: store.log_end_offset(topic, partition))


def log_start_offset(broker: Any, topic: str, partition: int = 0) -> int:
    return on_broker(broker, lambda store: store.log_start_offset(topic, partition))


def topics(broker: Any) -> list[str]:
    return on_broker(broker, lambda store: store.topics())
