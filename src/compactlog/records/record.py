"""What one record looks like in Python, on both sides of the format: :class:`Record` as read
(with its :data:`Header` tuples), :data:`RecordInput` as given to
:func:`~compactlog.records.batch.build_batch`, and the :data:`Buffer` types they are read from.

The modules that read (:mod:`~compactlog.records.columns`) and write
(:mod:`~compactlog.records._encode`, :mod:`~compactlog.records.batch`) all import these shapes
from here, so none of them has to import another for its types.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence

Buffer = bytes | bytearray | memoryview

Header = tuple[str, bytes | None]


class Record(typing.NamedTuple):
    """One record as read: absolute offset and timestamp, key, value, headers."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


RecordInput = (
    tuple[Buffer | None, Buffer | None]
    | tuple[Buffer | None, Buffer | None, Sequence[tuple[str, Buffer | None]]]
)
