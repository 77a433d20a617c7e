"""The raw wire, for the robustness tests (R15-R18): requests no client would send, and record
batches written by hand so that any field can be wrong.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any


# Request header v1 (api_key, api_version, correlation_id, client_id) and response header v0
# (correlation_id) are all the non-flexible versions need (spec 2.2); bodies are written by hand
# with struct so that these tests depend on neither the broker's codec nor a client's internals.
def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | bytes | None) -> bytes:
    if s is None:
        return i16(-1)
    raw = s.encode() if isinstance(s, str) else s
    return i16(len(raw)) + raw


def array(items: Sequence[bytes] | None) -> bytes:
    return i32(-1) if items is None else i32(len(items)) + b"".join(items)


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    payload = i16(api_key) + i16(version) + i32(correlation_id) + string("raw-wire") + body
    return i32(len(payload)) + payload


class Reader:
    """Reads the big-endian fields of a response body; a short body raises ``struct.error``."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(v)

    def i8(self) -> int:
        return self._take(">b")

    def i16(self) -> int:
        return self._take(">h")

    def i32(self) -> int:
        return self._take(">i")

    def i64(self) -> int:
        return self._take(">q")

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        return raw.decode(errors="replace")

    def array(self, item: Callable[[Reader], Any]) -> list[Any]:
        return [item(self) for _ in range(max(self.i32(), 0))]


class Closed(Exception):
    """The broker closed the connection."""


def recv_frame(sock: socket.socket) -> bytes:
    """One size-prefixed frame from ``sock`` (without its size); :class:`Closed` if it ends."""

    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise Closed(f"closed after {len(out)} of {n} bytes")
            out += chunk
        return bytes(out)

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


class Wire:
    """One raw TCP connection to the broker."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.next_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: bytes) -> int:
        correlation_id = self.next_id
        self.next_id += 1
        self.sock.sendall(request_frame(api_key, version, correlation_id, body))
        return correlation_id

    def recv(self) -> tuple[int, bytes]:
        """The next response: (correlation id, body)."""
        frame = recv_frame(self.sock)
        return struct.unpack_from(">i", frame)[0], frame[4:]

    def request(self, api_key: int, version: int, body: bytes) -> bytes:
        correlation_id = self.send(api_key, version, body)
        got, response = self.recv()
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        return response


PRODUCE, METADATA, CREATE_TOPICS, API_VERSIONS = 0, 3, 19, 18


def produce_body(
    partitions: Mapping[tuple[str | bytes, int], bytes], acks: int = -1, timeout_ms: int = 10_000
) -> bytes:
    """Produce v3-v7: one records blob per (topic, partition)."""
    topics: dict[str | bytes, list[bytes]] = {}
    for (topic, partition), records in partitions.items():
        topics.setdefault(topic, []).append(i32(partition) + i32(len(records)) + records)
    return (
        string(None)
        + i16(acks)
        + i32(timeout_ms)
        + array([string(t) + array(ps) for t, ps in topics.items()])
    )


def parse_produce_response(body: bytes) -> dict[tuple[str | None, int], tuple[int, int]]:
    """Produce v5-v7 response: (topic, partition) -> (error code, base offset)."""
    r = Reader(body)
    out = {}
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            partition, error, base_offset = r.i32(), r.i16(), r.i64()
            r.i64()  # log append time
            r.i64()  # log start offset
            out[(topic, partition)] = (error, base_offset)
    return out


def metadata_body(topics: Sequence[str | bytes] | None, auto_create: bool) -> bytes:
    """Metadata v4."""
    return array(None if topics is None else [string(t) for t in topics]) + i8(int(auto_create))


def parse_metadata_topic_errors(body: bytes) -> dict[str | None, int]:
    """Metadata v4 response: topic -> error code."""
    r = Reader(body)
    r.i32()  # throttle
    r.array(lambda b: (b.i32(), b.string(), b.i32(), b.string()))
    r.string()  # cluster id
    r.i32()  # controller
    out = {}
    for _ in range(r.i32()):
        error, name = r.i16(), r.string()
        r.i8()  # internal
        r.array(lambda p: (p.i16(), p.i32(), p.i32(), p.array(Reader.i32), p.array(Reader.i32)))
        out[name] = error
    return out


def create_topics_body(
    topics: Sequence[tuple[str | bytes, int]], configs: Mapping[str, str] | None = None
) -> bytes:
    """CreateTopics v2/v3: (name, partitions) each, replication factor 1."""
    entries = [
        string(name)
        + i32(partitions)
        + i16(1)
        + array([])
        + array([string(k) + string(v) for k, v in (configs or {}).items()])
        for name, partitions in topics
    ]
    return array(entries) + i32(10_000) + i8(0)


def parse_create_topics_response(body: bytes) -> dict[str | None, int]:
    """CreateTopics v2/v3 response: name -> error code."""
    r = Reader(body)
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        name, error = r.string(), r.i16()
        r.string()  # message
        out[name] = error
    return out


# A record batch written by hand, so that any field can be wrong.
NOW_MS = 1_700_000_000_000


def varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)  # zigzag
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record(
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    *,
    headers: int = 0,
    length: int | None = None,
) -> bytes:
    body = (
        i8(0)
        + varint(0)  # timestamp delta
        + varint(offset_delta)
        + (varint(-1) if key is None else varint(len(key)) + key)
        + (varint(-1) if value is None else varint(len(value)) + value)
        + varint(headers)
    )
    return varint(len(body) if length is None else length) + body


def batch(
    records: bytes, count: int, last_offset_delta: int, *, attributes: int = 0, magic: int = 2
) -> bytes:
    after_length = (
        i32(-1)  # partition leader epoch
        + i8(magic)
        + struct.pack(">I", 0)  # crc, set below
        + i16(attributes)
        + i32(last_offset_delta)
        + i64(NOW_MS)
        + i64(NOW_MS)
        + i64(-1)  # producer id
        + i16(-1)
        + i32(-1)
        + i32(count)
        + records
    )
    return fix_crc(i64(0) + i32(len(after_length)) + after_length)


def good_batch(n: int = 2) -> bytes:
    return batch(b"".join(record(i, b"k%d" % i, b"v%d" % i) for i in range(n)), n, n - 1)


# Byte positions in a v2 record batch (spec 2.4).
BATCH_LENGTH_AT, MAGIC_AT, CRC_AT, ATTRIBUTES_AT, COUNT_AT, RECORDS_AT = 8, 16, 17, 21, 57, 61


def fix_crc(batch: bytes | bytearray) -> bytes:
    """Recompute the CRC-32C of a batch (over attributes .. end) after editing it."""
    import crc32c

    out = bytearray(batch)
    struct.pack_into(">I", out, CRC_AT, crc32c.crc32c(bytes(out[ATTRIBUTES_AT:])))
    return bytes(out)
