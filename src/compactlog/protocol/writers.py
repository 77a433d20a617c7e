"""Writers of the protocol primitives: each appends one value to a ``bytearray``.

Values that cannot be written (a string over 32767 UTF-8 bytes, ``None`` in a field that is
not nullable in the version being written, an int out of range) are *our* mistakes, not the
peer's, and raise ``ValueError`` naming the field. The encodings mirror the readers of
:mod:`compactlog.protocol.primitives`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from compactlog.protocol.primitives import INT16, INT32, MAX_STRING_LENGTH

__all__ = [
    "write_array_length",
    "write_bytes",
    "write_compact_array_length",
    "write_compact_bytes",
    "write_compact_nullable_bytes",
    "write_compact_nullable_string",
    "write_compact_string",
    "write_nullable_bytes",
    "write_nullable_string",
    "write_string",
    "write_tagged_fields",
    "write_uuid",
    "write_uvarint",
    "write_varint",
    "write_varlong",
]


def _utf8(value: object, path: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{path}: expected a str, got {type(value).__name__}")
    raw = value.encode("utf-8")
    if len(raw) > MAX_STRING_LENGTH:
        raise ValueError(f"{path}: {len(raw)} UTF-8 bytes exceed {MAX_STRING_LENGTH}")
    return raw


def _buffer(value: object, path: str) -> bytes | bytearray | memoryview:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise ValueError(f"{path}: expected bytes, got {type(value).__name__}")
    return value


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0 or value > 0xFFFF_FFFF:
        raise ValueError(f"unsigned varint {value} outside 0..2**32-1")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"varint {value} outside int32")
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFF_FFFF)


def write_varlong(out: bytearray, value: int) -> None:
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"varlong {value} outside int64")
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def write_uuid(out: bytearray, value: uuid.UUID, path: str) -> None:
    if not isinstance(value, uuid.UUID):
        raise ValueError(f"{path}: expected a uuid.UUID, got {type(value).__name__}")
    out += value.bytes


def write_nullable_string(out: bytearray, value: str | None, path: str) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    raw = _utf8(value, path)
    out += INT16.pack(len(raw))
    out += raw


def write_string(out: bytearray, value: str, path: str) -> None:
    if value is None:
        raise ValueError(f"{path}: None in a field that is not nullable in this version")
    write_nullable_string(out, value, path)


def write_compact_nullable_string(out: bytearray, value: str | None, path: str) -> None:
    if value is None:
        out.append(0)
        return
    raw = _utf8(value, path)
    write_uvarint(out, len(raw) + 1)
    out += raw


def write_compact_string(out: bytearray, value: str, path: str) -> None:
    if value is None:
        raise ValueError(f"{path}: None in a field that is not nullable in this version")
    write_compact_nullable_string(out, value, path)


def write_nullable_bytes(
    out: bytearray, value: bytes | bytearray | memoryview | None, path: str
) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    raw = _buffer(value, path)
    out += INT32.pack(len(raw) if not isinstance(raw, memoryview) else raw.nbytes)
    out += raw


def write_bytes(out: bytearray, value: bytes | bytearray | memoryview, path: str) -> None:
    if value is None:
        raise ValueError(f"{path}: None in a field that is not nullable in this version")
    write_nullable_bytes(out, value, path)


def write_compact_nullable_bytes(
    out: bytearray, value: bytes | bytearray | memoryview | None, path: str
) -> None:
    if value is None:
        out.append(0)
        return
    raw = _buffer(value, path)
    write_uvarint(out, (len(raw) if not isinstance(raw, memoryview) else raw.nbytes) + 1)
    out += raw


def write_compact_bytes(out: bytearray, value: bytes | bytearray | memoryview, path: str) -> None:
    if value is None:
        raise ValueError(f"{path}: None in a field that is not nullable in this version")
    write_compact_nullable_bytes(out, value, path)


def write_array_length(
    out: bytearray, value: Sequence[Any] | None, path: str, nullable: bool
) -> None:
    if value is None:
        if not nullable:
            raise ValueError(f"{path}: None in a field that is not nullable in this version")
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(len(value))


def write_compact_array_length(
    out: bytearray, value: Sequence[Any] | None, path: str, nullable: bool
) -> None:
    if value is None:
        if not nullable:
            raise ValueError(f"{path}: None in a field that is not nullable in this version")
        out.append(0)
        return
    write_uvarint(out, len(value) + 1)


def write_tagged_fields(out: bytearray, fields: Sequence[tuple[int, bytes]]) -> None:
    """A tagged-field section: ``fields`` are (tag, encoded value) pairs in increasing tag order."""
    write_uvarint(out, len(fields))
    for tag, raw in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(raw))
        out += raw
