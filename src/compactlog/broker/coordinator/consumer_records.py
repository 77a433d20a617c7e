"""The KIP-848 records of ``__consumer_offsets``, byte for byte as Kafka 4.4 writes them, built
from and replayed into :class:`~.consumer_group.ConsumerGroup` objects.

Every key starts with an int16 *record type* (Kafka's ``CoordinatorRecordType``) followed by
the key's fields, not flexible (``string`` = int16 length + UTF-8). Every value starts with an
int16 version (0 for all of these) followed by a *flexible* struct (compact strings and arrays:
unsigned varint of length + 1; a tagged-field section, written empty, after each struct)::

    type  key (group:string ...)                     value (version 0)
    ----  -----------------------------------------  ----------------------------------------
    3     ConsumerGroupMetadataKey      group         epoch:int32
    5     ConsumerGroupMemberMetadataKey group member instanceId:string? rackId:string?
                                                      clientId clientHost subscribedTopicNames:[]
                                                      subscribedTopicRegex:string?
                                                      rebalanceTimeoutMs:int32
                                                      serverAssignor:string?
                                                      tag 0: classicMemberMetadata?
                                                        (int8 1 = present, then
                                                        sessionTimeoutMs:int32
                                                        supportedProtocols:[name:string
                                                        metadata:bytes])
    6     ConsumerGroupTargetAssignmentMetadataKey group  assignmentEpoch:int32
    7     ConsumerGroupTargetAssignmentMemberKey group member  topicPartitions:[topicId:uuid
                                                      partitions:[int32]]
    8     ConsumerGroupCurrentMemberAssignmentKey group member  memberEpoch:int32
                                                      previousMemberEpoch:int32 state:int8
                                                      assignedPartitions:[...]
                                                      partitionsPendingRevocation:[...]

A null value is a tombstone: the member, its target or its current assignment, or the group, is
gone. Kafka 4.4 also defines type 4 (partition metadata, no longer written) and tagged fields
(the group's metadata hash, a classic member's metadata); compactlog writes and reads a classic
member's metadata (tag 0 of the member's value, written only for a member that speaks the classic
protocol) and skips the others on load.

:func:`group_records` gives the records that take a group from one state to another (what
changed only), in Kafka's order; :class:`Replayer` rebuilds groups from the records, the latest
per key winning, as compaction keeps them.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from compactlog.broker.coordinator.assignors import Partitions
from compactlog.broker.coordinator.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from compactlog.broker.coordinator.runtime import Record
from compactlog.errors import CorruptRecordError
from compactlog.records.varint import decode_unsigned_varint, encode_unsigned_varint

GROUP_METADATA = 3
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
#: The record types this module reads (4, partition metadata, is skipped like share groups').
CONSUMER_RECORD_TYPES = frozenset(
    {
        GROUP_METADATA,
        MEMBER_METADATA,
        TARGET_ASSIGNMENT_METADATA,
        TARGET_ASSIGNMENT_MEMBER,
        CURRENT_MEMBER_ASSIGNMENT,
    }
)

#: The tag of ``ClassicMemberMetadata`` in ConsumerGroupMemberMetadataValue.
CLASSIC_MEMBER_METADATA_TAG = 0

#: Kafka's ``MemberState`` byte values.
_STATE_BYTES = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
}
_STATES = {v: k for k, v in _STATE_BYTES.items()}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


# --- encoding -------------------------------------------------------------------------------
def _key(record_type: int, *fields: str) -> bytes:
    out = [_I16.pack(record_type)]
    for f in fields:
        data = f.encode("utf-8")
        out += [_I16.pack(len(data)), data]
    return b"".join(out)


class _Flex:
    def __init__(self) -> None:
        self.parts: list[bytes] = [_I16.pack(0)]  # value version 0

    def i8(self, v: int) -> None:
        self.parts.append(struct.pack(">b", v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.parts.append(b"\x00")
            return
        data = v.encode("utf-8")
        self.parts += [encode_unsigned_varint(len(data) + 1), data]

    def count(self, n: int) -> None:
        self.parts.append(encode_unsigned_varint(n + 1))

    def blob(self, v: bytes) -> None:
        self.parts += [encode_unsigned_varint(len(v) + 1), bytes(v)]

    def partitions(self, value: Partitions) -> None:
        self.count(len(value))
        for topic_id, ps in sorted(value.items()):
            self.parts.append(topic_id.bytes)
            self.count(len(ps))
            self.parts += [_I32.pack(p) for p in sorted(ps)]
            self.tags()

    def tags(self) -> None:
        self.parts.append(b"\x00")

    def done(self) -> bytes:
        self.tags()
        return b"".join(self.parts)


def group_epoch_record(group_id: str, epoch: int) -> Record:
    v = _Flex()
    v.i32(epoch)
    return Record(_key(GROUP_METADATA, group_id), v.done())


def member_record(group_id: str, m: ConsumerGroupMember) -> Record:
    v = _Flex()
    v.string(m.instance_id)
    v.string(m.rack_id)
    v.string(m.client_id)
    v.string(m.client_host)
    v.count(len(m.subscribed_topic_names))
    for name in m.subscribed_topic_names:
        v.string(name)
    v.string(m.subscribed_topic_regex)
    v.i32(m.rebalance_timeout_ms)
    v.string(m.server_assignor)
    if m.classic is None:
        return Record(_key(MEMBER_METADATA, group_id, m.member_id), v.done())
    c = _Flex()
    c.parts = [b"\x01"]  # a nullable struct: present
    c.i32(m.classic.session_timeout_ms)
    c.count(len(m.classic.supported_protocols))
    for name, metadata in m.classic.supported_protocols:
        c.string(name)
        c.blob(metadata)
        c.tags()
    tagged = c.done()
    v.parts += [
        encode_unsigned_varint(1),
        encode_unsigned_varint(CLASSIC_MEMBER_METADATA_TAG),
        encode_unsigned_varint(len(tagged)),
        tagged,
    ]
    return Record(_key(MEMBER_METADATA, group_id, m.member_id), b"".join(v.parts))


def target_member_record(group_id: str, member_id: str, target: Partitions) -> Record:
    v = _Flex()
    v.partitions(target)
    return Record(_key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), v.done())


def target_epoch_record(group_id: str, epoch: int) -> Record:
    v = _Flex()
    v.i32(epoch)
    return Record(_key(TARGET_ASSIGNMENT_METADATA, group_id), v.done())


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> Record:
    v = _Flex()
    v.i32(m.member_epoch)
    v.i32(m.previous_member_epoch)
    v.i8(_STATE_BYTES[m.state])
    v.partitions(m.assigned)
    v.partitions(m.pending_revocation)
    return Record(_key(CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id), v.done())


def _tombstone(record_type: int, *fields: str) -> Record:
    return Record(_key(record_type, *fields), None)


def _member_fields(m: ConsumerGroupMember) -> tuple[object, ...]:
    return (
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.subscribed_topic_names,
        m.subscribed_topic_regex,
        m.rebalance_timeout_ms,
        m.server_assignor,
        m.classic,
    )


def _assignment_fields(m: ConsumerGroupMember) -> tuple[object, ...]:
    return (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation)


def group_records(before: ConsumerGroup | None, after: ConsumerGroup | None) -> list[Record]:
    """The records that take the group from ``before`` to ``after`` (None: no group)."""
    group_id = (after or before).group_id  # type: ignore[union-attr]
    old_members = {} if before is None else before.members
    old_target = {} if before is None else before.target
    if after is None:
        # Kafka's order: current assignments, targets, target epoch, members, group epoch.
        records = [_tombstone(CURRENT_MEMBER_ASSIGNMENT, group_id, m) for m in old_members]
        records += [_tombstone(TARGET_ASSIGNMENT_MEMBER, group_id, m) for m in old_target]
        records.append(_tombstone(TARGET_ASSIGNMENT_METADATA, group_id))
        records += [_tombstone(MEMBER_METADATA, group_id, m) for m in old_members]
        records.append(_tombstone(GROUP_METADATA, group_id))
        return records
    records = []
    for member_id, m in after.members.items():
        old = old_members.get(member_id)
        if old is None or _member_fields(old) != _member_fields(m):
            records.append(member_record(group_id, m))
    for member_id in old_members.keys() - after.members.keys():
        records.append(_tombstone(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id))
        records.append(_tombstone(TARGET_ASSIGNMENT_MEMBER, group_id, member_id))
        records.append(_tombstone(MEMBER_METADATA, group_id, member_id))
    if before is None or before.group_epoch != after.group_epoch:
        records.append(group_epoch_record(group_id, after.group_epoch))
    target_changed = False
    for member_id, target in after.target.items():
        if old_target.get(member_id) != target:
            records.append(target_member_record(group_id, member_id, target))
            target_changed = True
    for member_id in (
        old_target.keys() - after.target.keys() - (old_members.keys() - after.members.keys())
    ):
        records.append(_tombstone(TARGET_ASSIGNMENT_MEMBER, group_id, member_id))
        target_changed = True
    if target_changed or before is None or before.assignment_epoch != after.assignment_epoch:
        records.append(target_epoch_record(group_id, after.assignment_epoch))
    for member_id, m in after.members.items():
        old = old_members.get(member_id)
        if old is None or _assignment_fields(old) != _assignment_fields(m):
            records.append(current_assignment_record(group_id, m))
    return records


# --- decoding -------------------------------------------------------------------------------
class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.what = what

    def fail(self, field_name: str, problem: str) -> CorruptRecordError:
        return CorruptRecordError(f"{self.what}: {field_name} at byte {self.pos}: {problem}")

    def take(self, n: int, field_name: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(field_name, f"needs {n} byte(s), {len(self.data) - self.pos} left")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i8(self, name: str) -> int:
        return int(struct.unpack(">b", self.take(1, name))[0])

    def i16(self, name: str) -> int:
        return int(_I16.unpack(self.take(2, name))[0])

    def i32(self, name: str) -> int:
        return int(_I32.unpack(self.take(4, name))[0])

    def uvarint(self, name: str) -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.data, self.pos)
        except CorruptRecordError as exc:
            raise self.fail(name, str(exc)) from exc
        return value

    def key_string(self, name: str) -> str:
        return self._text(self.i16(name), name)

    def _text(self, length: int, name: str) -> str:
        try:
            return self.take(length, name).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(name, f"not UTF-8 ({exc.reason})") from exc

    def string(self, name: str) -> str | None:
        n = self.uvarint(name)
        return None if n == 0 else self._text(n - 1, name)

    def count(self, name: str) -> int:
        n = self.uvarint(name) - 1
        if n < 0 or n > len(self.data) - self.pos:
            raise self.fail(name, f"invalid count {n}")
        return n

    def partitions(self, name: str) -> dict[uuid.UUID, frozenset[int]]:
        out = {}
        for _ in range(self.count(name)):
            topic_id = uuid.UUID(bytes=self.take(16, f"{name} topic id"))
            out[topic_id] = frozenset(self.i32(name) for _ in range(self.count(name)))
            self.tags()
        return out

    def tags(self) -> dict[int, bytes]:
        """The tagged fields, by tag (the caller reads those it knows)."""
        out = {}
        for _ in range(self.uvarint("tagged field count")):
            tag = self.uvarint("tag")
            out[tag] = self.take(self.uvarint("tagged field size"), "tagged field")
        return out

    def blob(self, name: str) -> bytes:
        n = self.uvarint(name) - 1
        if n < 0:
            raise self.fail(name, "null bytes")
        return self.take(n, name)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise CorruptRecordError(f"{self.what}: {len(self.data) - self.pos} byte(s) too many")


@dataclass
class _Loading:
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    #: Current assignments seen before (or without) the member's metadata.
    current: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    exists: bool = False


class Replayer:
    """Rebuilds consumer groups from their records, in log order."""

    def __init__(self) -> None:
        self._groups: dict[str, _Loading] = {}
        #: Every group id that had consumer group records, deleted since or not.
        self.seen: set[str] = set()

    def replay(self, key: bytes, value: bytes | None) -> None:
        r = _Reader(key, "consumer group record key")
        record_type = r.i16("record type")
        group_id = r.key_string("group")
        member_id = (
            r.key_string("member")
            if record_type in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT)
            else None
        )
        r.end()
        self.seen.add(group_id)
        g = self._groups.setdefault(group_id, _Loading())
        if value is None:
            if record_type == GROUP_METADATA:
                del self._groups[group_id]
            elif record_type == MEMBER_METADATA:
                g.members.pop(str(member_id), None)
            elif record_type == TARGET_ASSIGNMENT_MEMBER:
                g.target.pop(str(member_id), None)
            elif record_type == CURRENT_MEMBER_ASSIGNMENT:
                g.current.pop(str(member_id), None)
            return
        v = _Reader(value, f"consumer group record of type {record_type}")
        version = v.i16("version")
        if version != 0:
            raise v.fail("version", f"unknown version {version}")
        if record_type == GROUP_METADATA:
            g.group_epoch = v.i32("epoch")
            g.exists = True
        elif record_type == TARGET_ASSIGNMENT_METADATA:
            g.assignment_epoch = v.i32("assignmentEpoch")
        elif record_type == TARGET_ASSIGNMENT_MEMBER:
            g.target[str(member_id)] = v.partitions("topicPartitions")
        elif record_type == MEMBER_METADATA:
            instance_id = v.string("instanceId")
            rack_id = v.string("rackId")
            client_id = v.string("clientId") or ""
            client_host = v.string("clientHost") or ""
            topics = tuple(v.string("subscribedTopicNames") or "" for _ in range(v.count("topics")))
            regex = v.string("subscribedTopicRegex")
            timeout = v.i32("rebalanceTimeoutMs")
            assignor = v.string("serverAssignor")
            tagged = v.tags()
            v.end()
            classic = None
            if CLASSIC_MEMBER_METADATA_TAG in tagged:
                classic = _classic_member_metadata(tagged[CLASSIC_MEMBER_METADATA_TAG])
            g.members[str(member_id)] = ConsumerGroupMember(
                str(member_id),
                instance_id=instance_id,
                rack_id=rack_id,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout_ms=timeout,
                subscribed_topic_names=topics,
                subscribed_topic_regex=regex,
                server_assignor=assignor,
                classic=classic,
            )
            return
        elif record_type == CURRENT_MEMBER_ASSIGNMENT:
            epoch = v.i32("memberEpoch")
            previous = v.i32("previousMemberEpoch")
            state_byte = v.i8("state")
            state = _STATES.get(state_byte, MemberState.STABLE)
            assigned = v.partitions("assignedPartitions")
            pending = v.partitions("partitionsPendingRevocation")
            g.current[str(member_id)] = ConsumerGroupMember(
                str(member_id),
                member_epoch=epoch,
                previous_member_epoch=previous,
                state=state,
                assigned=assigned,
                pending_revocation=pending,
            )
        v.tags()
        v.end()

    def groups(self) -> Iterable[ConsumerGroup]:
        """The groups as the records left them."""
        for group_id, g in self._groups.items():
            if not g.exists:
                continue
            members = {}
            for member_id, m in g.members.items():
                current = g.current.get(member_id)
                if current is not None:
                    m = ConsumerGroupMember(
                        member_id,
                        member_epoch=current.member_epoch,
                        previous_member_epoch=current.previous_member_epoch,
                        state=current.state,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        rebalance_timeout_ms=m.rebalance_timeout_ms,
                        subscribed_topic_names=m.subscribed_topic_names,
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        server_assignor=m.server_assignor,
                        assigned=current.assigned,
                        pending_revocation=current.pending_revocation,
                        classic=m.classic,
                    )
                members[member_id] = m
            yield ConsumerGroup(
                group_id,
                group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch,
                members=members,
                target={k: v for k, v in g.target.items() if k in members},
            )


def _classic_member_metadata(data: bytes) -> ClassicMemberMetadata | None:
    """Tag 0 of a member's value: a nullable struct (int8 -1 null, 1 present)."""
    r = _Reader(data, "ClassicMemberMetadata")
    presence = r.i8("presence")
    if presence < 0:
        r.end()
        return None
    session_timeout_ms = r.i32("sessionTimeoutMs")
    protocols = []
    for _ in range(r.count("supportedProtocols")):
        name = r.string("name")
        if name is None:
            raise r.fail("name", "null protocol name")
        protocols.append((name, r.blob("metadata")))
        r.tags()
    r.tags()
    r.end()
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))
