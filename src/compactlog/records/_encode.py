"""The records section of a v2 batch: what :func:`~compactlog.records.batch.build_batch` puts
after the 61-byte header, before compression (the record layout is in
:mod:`compactlog.records.batch`, which also writes the header around the section).

This is the producer's hot loop; :func:`_encode_records` says how it stays fast.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat

from compactlog.records.record import Buffer, RecordInput
from compactlog.records.varint import (
    VARINT_TABLE,
    VARINT_TABLE_MAX,
    encode_varint,
    encode_varlong,
)

_NULL = VARINT_TABLE[0]  # varint -1: null key / value
_ZERO = VARINT_TABLE[1]  # varint 0: attributes byte, zero deltas, no headers


def _encode_headers(headers: Sequence[tuple[str, Buffer | None]]) -> list[Buffer]:
    parts: list[Buffer] = [encode_varint(len(headers))]
    for name, value in headers:
        encoded = name.encode("utf-8")
        parts.append(encode_varint(len(encoded)))
        parts.append(encoded)
        if value is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(value)))
            parts.append(value)
    return parts


def _varint_bytes(numbers: Iterable[int], varlong: bool) -> list[bytes]:
    table = VARINT_TABLE
    table_max = VARINT_TABLE_MAX
    encode = encode_varlong if varlong else encode_varint
    return [table[x + 1] if -1 <= x <= table_max else encode(x) for x in numbers]


# attributes + timestampDelta 0 + offsetDelta i, for i = 0 .. VARINT_TABLE_MAX: the start of
# every record of a batch whose records share one timestamp (build_batch's default).
_SAME_TIMESTAMP_PREFIXES: tuple[bytes, ...] = tuple(
    _ZERO + _ZERO + VARINT_TABLE[i + 1] for i in range(VARINT_TABLE_MAX + 1)
)


def _record_prefixes(
    n: int, timestamp_deltas: Sequence[int] | int, offset_deltas: Sequence[int] | None
) -> Sequence[bytes]:
    """The attributes byte, timestampDelta and offsetDelta of each record, as one piece."""
    if offset_deltas is None and timestamp_deltas == 0 and n <= len(_SAME_TIMESTAMP_PREFIXES):
        return _SAME_TIMESTAMP_PREFIXES[:n]
    if offset_deltas is None and n <= VARINT_TABLE_MAX:
        od_bytes: Sequence[bytes] = VARINT_TABLE[1 : n + 1]
    else:
        od_bytes = _varint_bytes(range(n) if offset_deltas is None else offset_deltas, False)
    if isinstance(timestamp_deltas, int):
        heads: Iterable[bytes] = repeat(_ZERO + encode_varlong(timestamp_deltas), n)
    else:
        heads = map(bytes.__add__, repeat(_ZERO), _varint_bytes(timestamp_deltas, varlong=True))
    # map(bytes.__add__, ...) concatenates in C, without a Python frame per record.
    return list(map(bytes.__add__, heads, od_bytes))


def _encode_records(
    records: Sequence[RecordInput],
    timestamp_deltas: Sequence[int] | int,
    offset_deltas: Sequence[int] | None,
) -> bytes:
    """The uncompressed records section.

    This is the producer's hot loop, so it avoids per-field function calls: varints of small
    numbers come from precomputed tables, the first three fields of a record travel as one
    piece, each record adds its pieces to one list with a single ``+=`` (no bytes are
    concatenated), and the list is joined once.
    """
    prefixes = _record_prefixes(len(records), timestamp_deltas, offset_deltas)
    try:
        return _encode_pairs(records, prefixes)
    except ValueError:  # a record with headers (or bad input): the general path sorts it out
        return _encode_records_with_headers(records, prefixes)


def _encode_pairs(records: Sequence[RecordInput], prefixes: Sequence[bytes]) -> bytes:
    """Records given as (key, value) pairs; raises ValueError on a (key, value, headers)."""
    table = VARINT_TABLE
    table_max = VARINT_TABLE_MAX
    null = _NULL
    zero = _ZERO
    empty = b""
    parts: list[Buffer] = []
    # mypy cannot see that unpacking a 3-tuple raises ValueError (the caller's signal).
    for prefix, (key, value) in zip(prefixes, records, strict=True):  # type: ignore[misc]
        if key is None:
            key_len_bytes = null
            key_size = 0
            key = empty
        else:
            key_size = len(key)
            key_len_bytes = (
                table[key_size + 1] if key_size <= table_max else encode_varint(key_size)
            )
        if value is None:
            value_len_bytes = null
            value_size = 0
            value = empty
        else:
            value_size = len(value)
            value_len_bytes = (
                table[value_size + 1] if value_size <= table_max else encode_varint(value_size)
            )
        # prefix + key + value + headersCount (1 byte: no headers)
        length = len(prefix) + len(key_len_bytes) + key_size + len(value_len_bytes) + value_size + 1
        parts += (
            table[length + 1] if length <= table_max else encode_varint(length),
            prefix,
            key_len_bytes,
            key,
            value_len_bytes,
            value,
            zero,
        )
    return b"".join(parts)


def _encode_records_with_headers(
    records: Sequence[RecordInput], prefixes: Sequence[bytes]
) -> bytes:
    """The general form of :func:`_encode_pairs`, for records that may carry headers."""
    parts: list[Buffer] = []
    for prefix, record in zip(prefixes, records, strict=True):
        if not 2 <= len(record) <= 3:
            raise ValueError(f"a record is (key, value) or (key, value, headers), not {record!r}")
        body: list[Buffer] = [prefix]
        for field in record[:2]:
            if field is None:
                body.append(_NULL)
            else:
                body.append(encode_varint(len(field)))
                body.append(field)
        headers = record[2] if len(record) == 3 else None
        if headers:
            body += _encode_headers(headers)
        else:
            body.append(_ZERO)
        parts.append(encode_varint(sum(map(len, body))))
        parts += body
    return b"".join(parts)
