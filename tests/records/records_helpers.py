"""Helpers for the record-format tests.

They encode batches and records *independently* of compactlog (struct, crc32c and a six-line
varint), so that tests of the reader do not depend on the writer they check. (A plain module
rather than conftest.py, whose module name other test directories share.)
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c


def zz(n: int) -> bytes:
    """Zig-zag varint, written from the spec (2.4) without using compactlog."""
    u = (n << 1) ^ (n >> 63)
    u &= (1 << 64) - 1
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def record_bytes(
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[bytes, bytes | None]] = (),
    *,
    ts_delta: int = 0,
    offset_delta: int = 0,
    attributes: int = 0,
    length_adjust: int = 0,
    header_count: int | None = None,
) -> bytes:
    """One record (spec 2.4). Header keys are raw bytes so tests can write invalid UTF-8;
    ``length_adjust`` and ``header_count`` let a test write a wrong length or count."""
    body = bytearray([attributes])
    body += zz(ts_delta) + zz(offset_delta)
    for field in (key, value):
        if field is None:
            body += zz(-1)
        else:
            body += zz(len(field)) + field
    body += zz(len(headers) if header_count is None else header_count)
    for hkey, hvalue in headers:
        body += zz(len(hkey)) + hkey
        body += zz(-1) if hvalue is None else zz(len(hvalue)) + hvalue
    return zz(len(body) + length_adjust) + bytes(body)


def raw_batch(
    section: bytes,
    *,
    count: int,
    attributes: int = 0,
    base_offset: int = 0,
    last_offset_delta: int | None = None,
    base_timestamp: int = 0,
    max_timestamp: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    magic: int = 2,
    crc: int | None = None,
    batch_length: int | None = None,
) -> bytes:
    """A batch around an arbitrary records section, with a correct CRC unless ``crc`` is
    given (spec 2.1)."""
    if last_offset_delta is None:
        last_offset_delta = max(count - 1, 0)
    tail = struct.pack(
        ">hiqqqhii",
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    if crc is None:
        crc = crc32c.crc32c(tail + section)
    if batch_length is None:
        batch_length = 49 + len(section)
    head = struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, magic, crc)
    return head + tail + section
