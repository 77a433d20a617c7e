"""The records of ``__consumer_offsets``, byte for byte as Kafka writes them, and group placement.

Kafka's group coordinator keeps its state in the internal compacted topic ``__consumer_offsets``
(apache/kafka ``group-coordinator/src/main/resources/common/message/*.json``). Every record's key
and value start with an int16 *version*; the key's version names the record type:

=========  ====================  ===============================================================
key ver.   key                   value
=========  ====================  ===============================================================
0, 1       OffsetCommitKey       OffsetCommitValue v0-v4 (null value: the offset is deleted)
2          GroupMetadataKey      GroupMetadataValue v0-v4 (null value: the group is deleted)
3-8        consumer groups       KIP-848 records; not used by classic groups, skipped on load
9 and up   share groups          skipped on load
=========  ====================  ===============================================================

Layouts (non-flexible versions: big-endian integers, ``string`` = int16 length + UTF-8,
``string?`` = the same with length -1 for null, ``bytes`` = int32 length + bytes, arrays =
int32 count + elements)::

    OffsetCommitKey v0/v1   group:string  topic:string  partition:int32
    GroupMetadataKey v2     group:string

    OffsetCommitValue       offset:int64
                            leaderEpoch:int32          v3+ (-1: none)
                            metadata:string
                            commitTimestamp:int64
                            expireTimestamp:int64      v1 only (-1: none)

    GroupMetadataValue      protocolType:string  generation:int32  protocol:string?
                            leader:string?  currentStateTimestamp:int64 (v2+, -1: none)
                            members:[]  memberId:string
                                        groupInstanceId:string?    v3+
                                        clientId:string  clientHost:string
                                        rebalanceTimeout:int32     v1+
                                        sessionTimeout:int32
                                        subscription:bytes  assignment:bytes

Version 4 of both values is *flexible* (compact lengths as unsigned varints holding length + 1,
and a tagged-field section after each struct). Kafka still writes the highest non-flexible
versions (``MetadataVersion.offsetCommitValueVersion`` / ``groupMetadataValueVersion``): commits
as OffsetCommitValue v3 (v1 when the commit carries an explicit retention, the only version with
an expire timestamp), group metadata as GroupMetadataValue v3. So do we; version 4 is read only.

Every decoding problem raises :class:`~compactlog.errors.CorruptRecordError` naming the record,
the field and the numbers; nothing lower-level escapes.

Placement: a group lives in partition ``Utils.abs(groupId.hashCode()) % partitions``
(``GroupCoordinatorService.partitionFor``), with Java's ``String.hashCode`` over UTF-16 code
units in 32-bit arithmetic, and Kafka's ``Utils.abs``, which maps ``Integer.MIN_VALUE`` to 0
where ``Math.abs`` would return it unchanged (negative).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from compactlog.errors import CorruptRecordError
from compactlog.records.varint import decode_unsigned_varint

OFFSETS_TOPIC = "__consumer_offsets"

#: ``offsets.topic.num.partitions``.
DEFAULT_OFFSETS_TOPIC_PARTITIONS = 50
#: ``offsets.topic.segment.bytes``: 100 MiB, small enough that compaction gets closed segments
#: to work on well before the 1 GiB default of ordinary topics would.
DEFAULT_OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
#: OffsetCommitValue version for a commit without an explicit expire timestamp.
OFFSET_COMMIT_VALUE_VERSION = 3
#: The only OffsetCommitValue version that carries ``expireTimestamp``.
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_FLEXIBLE_VALUE_VERSION = 4
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


def offsets_topic_configs(
    segment_bytes: int = DEFAULT_OFFSETS_TOPIC_SEGMENT_BYTES,
) -> dict[str, str]:
    """The topic configs of ``__consumer_offsets``.

    ``cleanup.policy=compact,delete``, as the issue asks (Kafka itself, in
    ``groupMetadataTopicConfigs``, sets ``compact`` only), with ``retention.ms=-1``: time-based
    deletion of whole segments would drop the latest commit of a live group that has not
    committed for a while, so offsets and groups expire only through the tombstones the
    coordinator writes (``offsets.retention.minutes``), as in Kafka. The ``delete`` half lets an
    operator bound the topic with ``retention.bytes`` or DeleteRecords.
    """
    return {
        "cleanup.policy": "compact,delete",
        "retention.ms": "-1",
        "compression.type": "producer",
        "segment.bytes": str(segment_bytes),
    }


# --- placement ------------------------------------------------------------------------------
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    wrapped to a signed 32-bit int."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Math.abs`` except that ``Integer.MIN_VALUE`` becomes 0."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition that holds ``group_id``."""
    return kafka_abs(java_string_hash(group_id)) % partitions


# --- the records ----------------------------------------------------------------------------
class OffsetCommitKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupMetadataKey(NamedTuple):
    group: str


class UnknownKey(NamedTuple):
    """A key of a record type classic groups do not use (KIP-848 consumer and share groups)."""

    version: int


class OffsetCommitValue(NamedTuple):
    offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # -1: none; only version 1 stores it


class MemberMetadata(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


class GroupMetadataValue(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int  # -1: none
    members: tuple[MemberMetadata, ...] = ()


RecordKey = OffsetCommitKey | GroupMetadataKey | UnknownKey


# --- encoding -------------------------------------------------------------------------------
class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(_INT16.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(_INT32.pack(v))

    def int64(self, v: int) -> None:
        self.parts.append(_INT64.pack(v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"a string of {len(data)} bytes does not fit an int16 length")
        self.int16(len(data))
        self.parts.append(data)

    def bytes_(self, v: bytes) -> None:
        self.int32(len(v))
        self.parts.append(bytes(v))

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def _check_version(record: str, version: int, valid: range) -> None:
    if version not in valid:
        raise ValueError(f"{record} cannot be written as version {version}")


def encode_offset_commit_key(
    key: OffsetCommitKey, version: int = OFFSET_COMMIT_KEY_VERSION
) -> bytes:
    _check_version("OffsetCommitKey", version, range(2))
    w = _Writer()
    w.int16(version)
    w.string(key.group)
    w.string(key.topic)
    w.int32(key.partition)
    return w.getvalue()


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = _Writer()
    w.int16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return w.getvalue()


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    """Version 3, or 1 when the value has an expire timestamp (Kafka's choice) by default."""
    if version is None:
        version = (
            OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
            if value.expire_timestamp >= 0
            else OFFSET_COMMIT_VALUE_VERSION
        )
    _check_version("OffsetCommitValue", version, range(_FLEXIBLE_VALUE_VERSION))
    w = _Writer()
    w.int16(version)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    if version == 1:
        w.int64(value.expire_timestamp)
    return w.getvalue()


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    _check_version("GroupMetadataValue", version, range(_FLEXIBLE_VALUE_VERSION))
    w = _Writer()
    w.int16(version)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.getvalue()


# --- decoding -------------------------------------------------------------------------------
class _Reader:
    """Reads one key or value; every failure names ``what`` (the record and its version)."""

    def __init__(self, data: bytes, what: str, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.what = what
        self.flexible = flexible

    def _fail(self, field: str, problem: str) -> CorruptRecordError:
        return CorruptRecordError(f"{self.what}: {field} at byte {self.pos}: {problem}")

    def _take(self, n: int, field: str) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise self._fail(
                field, f"needs {n} byte(s) but only {len(self.data) - self.pos} remain"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def int16(self, field: str) -> int:
        return int(_INT16.unpack(self._take(2, field))[0])

    def int32(self, field: str) -> int:
        return int(_INT32.unpack(self._take(4, field))[0])

    def int64(self, field: str) -> int:
        return int(_INT64.unpack(self._take(8, field))[0])

    def _uvarint(self, field: str) -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.data, self.pos)
        except CorruptRecordError as exc:
            raise self._fail(field, str(exc)) from exc
        return value

    def _length(self, field: str, nullable: bool, wide: bool) -> int:
        """A length: -1 for null, else >= 0."""
        if self.flexible:
            length = self._uvarint(field) - 1
        else:
            length = self.int32(field) if wide else self.int16(field)
        if length < -1 or (length == -1 and not nullable):
            raise self._fail(field, f"invalid length {length}")
        return length

    def nullable_string(self, field: str, nullable: bool = True) -> str | None:
        length = self._length(field, nullable, wide=False)
        if length == -1:
            return None
        raw = self._take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._fail(field, f"not UTF-8 ({exc.reason})") from exc

    def string(self, field: str) -> str:
        value = self.nullable_string(field, nullable=False)
        assert value is not None
        return value

    def bytes_(self, field: str) -> bytes:
        return self._take(self._length(field, nullable=False, wide=True), field)

    def array_length(self, field: str) -> int:
        length = self._length(field, nullable=False, wide=True)
        # Each element takes at least one byte: a count beyond the remaining bytes is corrupt,
        # and checking it here keeps a bad count from driving a long loop.
        if length > len(self.data) - self.pos:
            raise self._fail(
                field, f"count {length} exceeds the {len(self.data) - self.pos} bytes left"
            )
        return length

    def tagged_fields(self) -> None:
        """Skip a flexible struct's tagged fields (none are defined for these records)."""
        if not self.flexible:
            return
        for _ in range(self._uvarint("tagged field count")):
            self._uvarint("tag")
            self._take(self._uvarint("tagged field size"), "tagged field")

    def end(self) -> None:
        if self.pos != len(self.data):
            raise CorruptRecordError(
                f"{self.what}: {len(self.data) - self.pos} unexpected byte(s) after the last "
                f"field (record of {len(self.data)} bytes)"
            )


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise CorruptRecordError(f"{what} of {len(data)} byte(s) is too short for its version")
    return int(_INT16.unpack_from(data)[0])


def decode_key(data: bytes) -> RecordKey:
    """The key of a ``__consumer_offsets`` record."""
    data = bytes(data)
    version = _version(data, "record key")
    if version in (0, 1):
        r = _Reader(data, f"OffsetCommitKey v{version}")
        r.pos = 2
        key: RecordKey = OffsetCommitKey(r.string("group"), r.string("topic"), r.int32("partition"))
    elif version == GROUP_METADATA_KEY_VERSION:
        r = _Reader(data, "GroupMetadataKey v2")
        r.pos = 2
        key = GroupMetadataKey(r.string("group"))
    elif version > GROUP_METADATA_KEY_VERSION:
        return UnknownKey(version)
    else:
        raise CorruptRecordError(f"record key has negative version {version}")
    r.end()
    return key


def _value_reader(data: bytes, what: str) -> tuple[int, _Reader]:
    """A value's version, and a reader past it (flexible from the first flexible version)."""
    data = bytes(data)
    version = _version(data, what)
    if not 0 <= version <= _FLEXIBLE_VALUE_VERSION:
        raise CorruptRecordError(f"{what} has unknown version {version}")
    r = _Reader(data, f"{what} v{version}", flexible=version >= _FLEXIBLE_VALUE_VERSION)
    r.pos = 2
    return version, r


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    version, r = _value_reader(data, "OffsetCommitValue")
    offset = r.int64("offset")
    leader_epoch = r.int32("leaderEpoch") if version >= 3 else -1
    metadata = r.string("metadata")
    commit_timestamp = r.int64("commitTimestamp")
    expire_timestamp = r.int64("expireTimestamp") if version == 1 else -1
    r.tagged_fields()
    r.end()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    version, r = _value_reader(data, "GroupMetadataValue")
    protocol_type = r.string("protocolType")
    generation = r.int32("generation")
    protocol = r.nullable_string("protocol")
    leader = r.nullable_string("leader")
    current_state_timestamp = r.int64("currentStateTimestamp") if version >= 2 else -1
    members = []
    for _ in range(r.array_length("members")):
        member_id = r.string("memberId")
        instance_id = r.nullable_string("groupInstanceId") if version >= 3 else None
        client_id = r.string("clientId")
        client_host = r.string("clientHost")
        rebalance_timeout = r.int32("rebalanceTimeout") if version >= 1 else -1
        session_timeout = r.int32("sessionTimeout")
        subscription = r.bytes_("subscription")
        assignment = r.bytes_("assignment")
        r.tagged_fields()
        members.append(
            MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.tagged_fields()
    r.end()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members)
    )


def consumer_subscription_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a ``ConsumerProtocolSubscription`` (any version: all start with an int16
    version and the topic array, read here as version 0), or None when it does not parse.

    Kafka parses them the same way (``ClassicGroup.computeSubscribedTopics``) to decide which
    committed offsets of a live group may expire.
    """
    try:
        r = _Reader(bytes(metadata), "ConsumerProtocolSubscription")
        if r.int16("version") < 0:
            return None
        return frozenset(r.string("topic") for _ in range(r.array_length("topics")))
    except CorruptRecordError:
        return None
