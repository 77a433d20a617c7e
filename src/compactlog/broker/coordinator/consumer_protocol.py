"""The consumer's *embedded* protocol: the subscription a classic consumer puts in its JoinGroup
``metadata`` and the assignment its SyncGroup carries (Kafka's ``ConsumerProtocolSubscription``
and ``ConsumerProtocolAssignment``, encoded by ``ConsumerProtocol``).

The group coordinator needs both when a group changes protocol online (KIP-848's migration): a
classic member's subscription becomes a consumer-group member's subscribed topics and owned
partitions, and the consumer group hands its assignment to a classic member as a
``ConsumerProtocolAssignment``.

Both are non-flexible structs (int16-length strings, int32-length bytes and arrays) after an
int16 version. Kafka reads a version above the latest known one as the latest (new versions may
only add fields at the end), writes it as the latest, and refuses a negative one; a struct that
ends before the fields of its version is refused too::

    ConsumerProtocolSubscription                  since
    --------------------------------------------  -----
    version:int16
    topics:[string]                               v0
    userData:bytes?                               v0    (null: length -1)
    ownedPartitions:[topic:string                 v1
                     partitions:[int32]]
    generationId:int32                            v2    (-1 when absent)
    rackId:string?                                v3

    ConsumerProtocolAssignment                    since
    --------------------------------------------  -----
    version:int16
    assignedPartitions:[topic:string              v0
                        partitions:[int32]]
    userData:bytes?                               v0

Every failure to decode is one :class:`~compactlog.errors.ProtocolError` naming the struct, the
field and the byte where it went wrong.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from compactlog.errors import ProtocolError

#: The latest version of both structs (Kafka 4.4); a newer one is read as this one.
LATEST_VERSION = 3

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True)
class Assignment:
    version: int
    assigned_partitions: TopicPartitions
    user_data: bytes | None = None


def topic_partitions(partitions: Mapping[str, Iterable[int]]) -> TopicPartitions:
    """``{topic: partitions}`` as the structs hold it: topics and partitions sorted."""
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(partitions.items()) if ps)


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def fail(self, field: str, problem: str) -> ProtocolError:
        return ProtocolError(f"{self.what}: {field} at byte {self.pos}: {problem}")

    def take(self, n: int, field: str) -> bytes:
        if self.pos + n > len(self.data):
            raise self.fail(field, f"needs {n} byte(s) but only {len(self.data) - self.pos} remain")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self, field: str) -> int:
        return int(_INT16.unpack(self.take(2, field))[0])

    def int32(self, field: str) -> int:
        return int(_INT32.unpack(self.take(4, field))[0])

    def string(self, field: str, nullable: bool = False) -> str | None:
        length = self.int16(field)
        if length == -1 and nullable:
            return None
        if length < 0:
            raise self.fail(field, f"invalid length {length}")
        raw = self.take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(field, f"not UTF-8 ({exc.reason})") from exc

    def name(self, field: str) -> str:
        value = self.string(field)
        assert value is not None
        return value

    def nullable_bytes(self, field: str) -> bytes | None:
        length = self.int32(field)
        if length == -1:
            return None
        if length < 0:
            raise self.fail(field, f"invalid length {length}")
        return self.take(length, field)

    def count(self, field: str, min_size: int) -> int:
        n = self.int32(field)
        # A count the remaining bytes cannot hold is corrupt; checking it first keeps a bad
        # count from driving a long loop.
        if n < 0 or n * min_size > len(self.data) - self.pos:
            raise self.fail(field, f"invalid count {n} for {len(self.data) - self.pos} bytes left")
        return n

    def version(self) -> int:
        """The struct's version; the fields read are those of ``min(version, LATEST)``."""
        version = self.int16("version")
        if version < 0:
            raise self.fail("version", f"unsupported version {version}")
        return version

    def topic_partitions(self, field: str) -> TopicPartitions:
        out = []
        for _ in range(self.count(field, 6)):
            topic = self.name(f"{field}.topic")
            n = self.count(f"{field}.partitions", 4)
            out.append((topic, tuple(self.int32(f"{field}.partition") for _ in range(n))))
        return tuple(out)


def decode_subscription(data: bytes) -> Subscription:
    """A JoinGroup member's ``metadata`` for the protocol type "consumer"."""
    r = _Reader(bytes(data), "ConsumerProtocolSubscription")
    version = r.version()
    topics = tuple(r.name("topics") for _ in range(r.count("topics", 2)))
    user_data = r.nullable_bytes("userData")
    owned: TopicPartitions = ()
    generation_id = -1
    rack_id = None
    if version >= 1:
        owned = r.topic_partitions("ownedPartitions")
    if version >= 2:
        generation_id = r.int32("generationId")
    if version >= 3:
        rack_id = r.string("rackId", nullable=True)
    return Subscription(version, topics, user_data, owned, generation_id, rack_id)


def decode_assignment(data: bytes) -> Assignment:
    """A SyncGroup ``assignment`` for the protocol type "consumer"."""
    r = _Reader(bytes(data), "ConsumerProtocolAssignment")
    version = r.version()
    assigned = r.topic_partitions("assignedPartitions")
    return Assignment(version, assigned, r.nullable_bytes("userData"))


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(_INT16.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(_INT32.pack(v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        raw = v.encode("utf-8")
        self.int16(len(raw))
        self.parts.append(raw)

    def nullable_bytes(self, v: bytes | None) -> None:
        if v is None:
            self.int32(-1)
            return
        self.int32(len(v))
        self.parts.append(bytes(v))

    def topic_partitions(self, value: TopicPartitions) -> None:
        self.int32(len(value))
        for topic, partitions in value:
            self.string(topic)
            self.int32(len(partitions))
            for p in partitions:
                self.int32(p)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def _write_version(w: _Writer, version: int) -> int:
    """Writes (and returns) the version to encode: a newer one than Kafka's latest is written
    as the latest, as Kafka does."""
    if version < 0:
        raise ValueError(f"consumer protocol version {version} is negative")
    version = min(version, LATEST_VERSION)
    w.int16(version)
    return version


def encode_subscription(s: Subscription) -> bytes:
    w = _Writer()
    version = _write_version(w, s.version)
    w.int32(len(s.topics))
    for topic in s.topics:
        w.string(topic)
    w.nullable_bytes(s.user_data)
    if version >= 1:
        w.topic_partitions(s.owned_partitions)
    if version >= 2:
        w.int32(s.generation_id)
    if version >= 3:
        w.string(s.rack_id)
    return w.getvalue()


def encode_assignment(a: Assignment) -> bytes:
    """Kafka answers a classic member in the version of its subscription (any version has the
    same layout: the fields added later are the subscription's)."""
    w = _Writer()
    _write_version(w, a.version)
    w.topic_partitions(a.assigned_partitions)
    w.nullable_bytes(a.user_data)
    return w.getvalue()
