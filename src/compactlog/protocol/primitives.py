"""Reading the primitive types of the Kafka protocol: a bounds-checked :class:`Reader`.

Every number read from the peer that says how many bytes or items follow is checked against
the bytes that are really left (and, for strings, against Kafka's own limit) *before* anything
is allocated, so a 5-byte frame cannot make us build a list of two billion entries. Malformed
input raises :class:`~compactlog.errors.ProtocolError` whose message starts with the field's
path (``FetchRequest v11.topics[].partitions[].fetch_offset``), then says which number was
wrong and where. ``struct.error`` and ``IndexError`` cannot happen (every read is bounds-checked
first); ``UnicodeDecodeError`` is wrapped, chained with ``from``.

Both the classic encodings (int16-length strings, int32-length bytes and arrays, -1 for null)
and the flexible ones of KIP-482 (unsigned varint of length + 1, 0 for null; tagged-field
sections) are here. The writers are in :mod:`compactlog.protocol.writers`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

from compactlog.errors import ProtocolError

__all__ = [
    "BOOL",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "MAX_STRING_LENGTH",
    "MAX_UVARINT32_BYTES",
    "MAX_VARLONG_BYTES",
    "UINT32",
    "Reader",
]

# Kafka writes every string, compact or not, with at most 32767 UTF-8 bytes (Short.MAX_VALUE):
# the non-flexible length is an int16 and the generated compact readers keep the same limit.
MAX_STRING_LENGTH = 0x7FFF
# An unsigned varint holding 32 bits takes at most 5 bytes; a longer one is corrupt, not large.
MAX_UVARINT32_BYTES = 5
# A zig-zag varlong (64 bits) takes at most 10 bytes.
MAX_VARLONG_BYTES = 10

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT32 = struct.Struct(">I")
BOOL = struct.Struct(">?")


class Reader:
    """Reads protocol primitives from ``buf`` starting at ``pos``; every read is bounds-checked.

    ``path`` arguments name the field being read; they start the error message.
    """

    __slots__ = ("buf", "end", "pos")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0) -> None:
        view = data if isinstance(data, memoryview) else memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self.buf = view
        self.pos = pos
        self.end = len(view)

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def fail(self, path: str, what: str) -> ProtocolError:
        """The error for field ``path``: ``what`` says which number was wrong."""
        return ProtocolError(f"{path}: {what} (at byte {self.pos} of {self.end})")

    def _short(self, path: str, need: int) -> ProtocolError:
        return self.fail(path, f"needs {need} bytes, only {self.end - self.pos} left")

    # --- fixed width --------------------------------------------------------------------------
    def fixed(self, st: struct.Struct, path: str) -> tuple[Any, ...]:
        """Several fixed-width fields at once (one ``struct`` call for a run of fields)."""
        p = self.pos
        q = p + st.size
        if q > self.end:
            raise self._short(path, st.size)
        self.pos = q
        return st.unpack_from(self.buf, p)

    def fixed_run(self, st: struct.Struct, layout: tuple[tuple[str, int], ...]) -> tuple[Any, ...]:
        """Like :meth:`fixed` for a run of fields; ``layout`` is (path, end offset) per field so
        that a short read names the first field that does not fit."""
        p = self.pos
        q = p + st.size
        if q > self.end:
            left = self.end - p
            start = 0
            for path, end in layout:
                if end > left:
                    self.pos = p + start  # for the message: where the cut field starts
                    raise self._short(path, end - start)
                start = end
        self.pos = q
        return st.unpack_from(self.buf, p)

    def int8(self, path: str) -> int:
        return int(self.fixed(INT8, path)[0])

    def int16(self, path: str) -> int:
        return int(self.fixed(INT16, path)[0])

    def int32(self, path: str) -> int:
        return int(self.fixed(INT32, path)[0])

    def int64(self, path: str) -> int:
        return int(self.fixed(INT64, path)[0])

    def uint32(self, path: str) -> int:
        return int(self.fixed(UINT32, path)[0])

    def boolean(self, path: str) -> bool:
        # Kafka reads a boolean as "byte != 0"; so do we.
        return bool(self.fixed(BOOL, path)[0])

    # --- varints ------------------------------------------------------------------------------
    def _unsigned(self, path: str, max_bytes: int) -> int:
        buf, p, end = self.buf, self.pos, self.end
        value = shift = 0
        for i in range(max_bytes):
            if p + i >= end:
                raise self.fail(path, f"varint truncated after {i} bytes")
            b = buf[p + i]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = p + i + 1
                return value
            shift += 7
        raise self.fail(path, f"varint longer than {max_bytes} bytes")

    def uvarint(self, path: str) -> int:
        """An unsigned varint of at most 32 bits (lengths, counts and tags of KIP-482)."""
        start = self.pos
        value = self._unsigned(path, MAX_UVARINT32_BYTES)
        if value > 0xFFFF_FFFF:
            self.pos = start
            raise self.fail(path, f"unsigned varint {value} does not fit in 32 bits")
        return value

    def varint(self, path: str) -> int:
        """A zig-zag varint (32 bits)."""
        raw = self.uvarint(path)
        return (raw >> 1) ^ -(raw & 1)

    def varlong(self, path: str) -> int:
        """A zig-zag varlong (64 bits)."""
        start = self.pos
        raw = self._unsigned(path, MAX_VARLONG_BYTES)
        if raw > 0xFFFF_FFFF_FFFF_FFFF:
            self.pos = start
            raise self.fail(path, f"varlong {raw} does not fit in 64 bits")
        return (raw >> 1) ^ -(raw & 1)

    # --- raw slices ---------------------------------------------------------------------------
    def take(self, n: int, path: str) -> memoryview:
        """The next ``n`` bytes as a zero-copy view (``n`` already checked to be >= 0)."""
        p = self.pos
        if n > self.end - p:
            raise self.fail(path, f"length {n} exceeds the {self.end - p} bytes left")
        self.pos = p + n
        return self.buf[p : p + n]

    def _text(self, n: int, path: str) -> str:
        if n > MAX_STRING_LENGTH:
            raise self.fail(path, f"string length {n} exceeds {MAX_STRING_LENGTH}")
        raw = self.take(n, path)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(path, f"string is not valid UTF-8 ({e.reason})") from e

    def uuid(self, path: str) -> UUID:
        """A Kafka ``Uuid``: 16 bytes, most significant first."""
        return UUID(bytes=bytes(self.take(16, path)))

    # --- strings ------------------------------------------------------------------------------
    def nullable_string(self, path: str) -> str | None:
        n = self.int16(path)
        if n < 0:
            if n == -1:
                return None
            raise self.fail(path, f"string length {n} is negative")
        return self._text(n, path)

    def string(self, path: str) -> str:
        s = self.nullable_string(path)
        if s is None:
            raise self.fail(path, "null string in a field that is not nullable")
        return s

    def compact_nullable_string(self, path: str) -> str | None:
        n = self.uvarint(path)
        return None if n == 0 else self._text(n - 1, path)

    def compact_string(self, path: str) -> str:
        n = self.uvarint(path)
        if n == 0:
            raise self.fail(path, "null string in a field that is not nullable")
        return self._text(n - 1, path)

    # --- bytes and records --------------------------------------------------------------------
    def nullable_bytes(self, path: str) -> bytes | None:
        n = self.int32(path)
        if n < 0:
            if n == -1:
                return None
            raise self.fail(path, f"bytes length {n} is negative")
        return bytes(self.take(n, path))

    def bytes_(self, path: str) -> bytes:
        b = self.nullable_bytes(path)
        if b is None:
            raise self.fail(path, "null bytes in a field that is not nullable")
        return b

    def compact_nullable_bytes(self, path: str) -> bytes | None:
        n = self.uvarint(path)
        return None if n == 0 else bytes(self.take(n - 1, path))

    def compact_bytes(self, path: str) -> bytes:
        b = self.compact_nullable_bytes(path)
        if b is None:
            raise self.fail(path, "null bytes in a field that is not nullable")
        return b

    # --- arrays -------------------------------------------------------------------------------
    def _count(self, n: int, min_item_size: int, path: str) -> int:
        # Each item takes at least min_item_size bytes, so a count the bytes left cannot hold
        # is corrupt: reject it before building anything. Items are counted as one byte at
        # least, so even an array of empty structs cannot claim two billion entries.
        if n * max(min_item_size, 1) > self.end - self.pos:
            raise self.fail(
                path,
                f"array of {n} items of at least {min_item_size} bytes exceeds the "
                f"{self.end - self.pos} bytes left",
            )
        return n

    def array_length(self, path: str, min_item_size: int, nullable: bool) -> int | None:
        n = self.int32(path)
        if n < 0:
            if n == -1 and nullable:
                return None
            what = "null array in a field that is not nullable" if n == -1 else "negative"
            raise self.fail(path, f"array length {n}: {what}")
        return self._count(n, min_item_size, path)

    def compact_array_length(self, path: str, min_item_size: int, nullable: bool) -> int | None:
        n = self.uvarint(path)
        if n == 0:
            if nullable:
                return None
            raise self.fail(path, "null array in a field that is not nullable")
        return self._count(n - 1, min_item_size, path)

    # --- tagged fields (KIP-482) --------------------------------------------------------------
    def tagged_fields(
        self, path: str, known: Mapping[int, Callable[[Reader], Any]]
    ) -> dict[int, Any]:
        """Reads a tagged-field section; decodes the tags in ``known``, skips the others.

        Tags must be strictly increasing, and a known field must fill exactly its declared size.
        """
        count = self.uvarint(path + "<tagged fields>")
        self._count(count, 2, path + "<tagged fields>")  # a tag and a size: 2 bytes at least
        found: dict[int, Any] = {}
        last = -1
        for _ in range(count):
            tag = self.uvarint(path + "<tag>")
            if tag <= last:
                raise self.fail(path, f"tag {tag} follows tag {last}: tags must increase")
            last = tag
            size = self.uvarint(f"{path}<tag {tag} size>")
            body = self.take(size, f"{path}<tag {tag}>")
            decode = known.get(tag)
            if decode is not None:
                sub = Reader(body)
                found[tag] = decode(sub)
                if sub.pos != sub.end:
                    raise self.fail(
                        path, f"tag {tag} declares {size} bytes but its value used {sub.pos}"
                    )
        return found
