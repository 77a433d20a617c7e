"""The coordinator as its managers see it (Kafka's coordinator runtime and shard): the
:class:`CoordinatorRuntime` protocol that :mod:`.membership`, :mod:`.rebalance` and :mod:`.offsets`
are written against, and the :class:`Record` they hand it to write to ``__consumer_offsets``.

It names :class:`~.classic_group.ClassicGroup`, so it lives apart from :mod:`.api` (the result
types), which :mod:`.classic_group` imports: neither of the two imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from compactlog.broker.coordinator.classic_group import ClassicGroup
from compactlog.broker.coordinator.config import GroupCoordinatorConfig
from compactlog.broker.coordinator.delayed import Timer


class Record(NamedTuple):
    """A ``__consumer_offsets`` record to write: key and value bytes (None: a tombstone)."""

    key: bytes
    value: bytes | None


class CoordinatorRuntime(Protocol):
    """The coordinator as its two managers see it (Kafka's coordinator runtime and shard)."""

    config: GroupCoordinatorConfig
    groups: dict[str, ClassicGroup]
    timer: Timer

    @property
    def now(self) -> int: ...

    def append(self, group_id: str, records: Sequence[Record]) -> int:
        """Write ``records`` to the group's partition as one batch; returns an error code."""
        ...

    def get_or_create_group(self, group_id: str) -> ClassicGroup: ...

    def remove_group(self, group_id: str) -> None: ...
