"""``__consumer_offsets``: record layouts byte by byte, group placement, loading, compaction."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from compactlog.broker.coordinator.offsets_topic import (
    OFFSETS_TOPIC,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    consumer_subscription_topics,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    java_string_hash,
    kafka_abs,
    partition_for,
)
from compactlog.broker.coordinator.service import GroupCoordinator
from compactlog.errors import CorruptRecordError
from compactlog.records import Record
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import manager_of

StoreFactory = Callable[..., Store]


# --- placement -------------------------------------------------------------------------------
def hash_by_hand(s: str) -> int:
    """s[0]*31^(n-1) + s[1]*31^(n-2) + ... + s[n-1] over UTF-16 code units, as an exact integer,
    then reduced to Java's signed 32 bits."""
    raw = s.encode("utf-16-be")
    units = [raw[i] << 8 | raw[i + 1] for i in range(0, len(raw), 2)]
    exact = 0
    for power, unit in enumerate(reversed(units)):
        exact += unit * 31**power
    wrapped = exact % 2**32
    return wrapped - 2**32 if wrapped >= 2**31 else wrapped


# Values printed by Java's String.hashCode (OpenJDK 17) for these ids.
JAVA_HASHES = {
    "": 0,
    "a": 97,
    "Aa": 2112,
    "BB": 2112,
    "hello": 99162322,
    "my-group": -1906497762,
    "test-group": 627841412,
    "console-consumer-12345": 158455506,
    "polygenelubricants": -(2**31),
    "gruppe-ä": 673522898,
    "g😀": 1871882,  # a surrogate pair: two code units
}


@pytest.mark.parametrize(("group", "expected"), sorted(JAVA_HASHES.items()))
def test_java_string_hash(group: str, expected: int) -> None:
    assert hash_by_hand(group) == expected
    assert java_string_hash(group) == expected


@pytest.mark.parametrize(
    ("group", "partition"),
    [
        ("my-group", 12),  # abs(-1906497762) = 1906497762, % 50 = 12
        ("test-group", 12),
        ("console-consumer-12345", 6),
        ("hello", 22),
        ("a", 47),
        ("g😀", 32),
        # hashCode is Integer.MIN_VALUE: Math.abs would leave it negative (-48 after % 50);
        # Kafka's Utils.abs makes it 0.
        ("polygenelubricants", 0),
    ],
)
def test_group_partition(group: str, partition: int) -> None:
    assert partition_for(group, 50) == partition
    assert partition_for(group) == partition


def test_kafka_abs() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5 and kafka_abs(2**31 - 1) == 2**31 - 1


# --- layouts, field by field ---------------------------------------------------------------------
class Fields:
    """Reads big-endian fields off a record, for checking layouts independently of the codec."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str | None:
        length = self.take(">h")
        if length == -1:
            return None
        value = self.data[self.pos : self.pos + length].decode()
        self.pos += length
        return value

    def blob(self) -> bytes:
        length = self.take(">i")
        value = self.data[self.pos : self.pos + length]
        self.pos += length
        return value

    def done(self) -> bool:
        return self.pos == len(self.data)


def raw_records(store: Store, group: str) -> list[Record]:
    return list(store.read(OFFSETS_TOPIC, partition_for(group)))


def test_a_commit_record_field_by_field(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    coord = GroupCoordinator.load(store)
    clock.advance(1234)
    coord.commit_offsets("my-group", -1, "", -1, [("orders", 7, 123456789012, 4, "α-meta")])
    (record,) = [r for r in raw_records(store, "my-group") if r.key and r.key[:2] == b"\x00\x01"]
    assert record.timestamp == clock.now
    key = Fields(record.key or b"")
    assert key.take(">h") == 1  # OffsetCommitKey version 1
    assert key.string() == "my-group"
    assert key.string() == "orders"
    assert key.take(">i") == 7
    assert key.done()
    value = Fields(record.value or b"")
    assert value.take(">h") == 3  # OffsetCommitValue version 3
    assert value.take(">q") == 123456789012  # offset
    assert value.take(">i") == 4  # leaderEpoch
    assert value.string() == "α-meta"  # metadata: int16 length of the UTF-8 bytes
    assert value.take(">q") == clock.now  # commitTimestamp
    assert value.done()  # no expireTimestamp in v3
    assert len(record.value or b"") == 2 + 8 + 4 + 2 + len("α-meta".encode()) + 8


def test_a_commit_with_retention_is_written_as_version_1(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    coord = GroupCoordinator.load(store)
    coord.commit_offsets("g", -1, "", 60_000, [("t", 0, 5)])
    (record,) = [r for r in raw_records(store, "g") if r.key and r.key[:2] == b"\x00\x01"]
    value = Fields(record.value or b"")
    assert value.take(">h") == 1
    assert value.take(">q") == 5
    assert value.string() == ""  # v1 has no leaderEpoch
    assert value.take(">q") == clock.now
    assert value.take(">q") == clock.now + 60_000  # expireTimestamp
    assert value.done()


def test_group_metadata_record_field_by_field(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    coord = GroupCoordinator.load(store)
    joined = coord.join_group(
        "my-group", "", "static-1", "client-1", "/10.0.0.1", "consumer",
        [("range", b"SUB")], 10_000, 20_000, False,
    )  # fmt: skip
    clock.advance(3000)
    coord.tick()
    member = joined.result().member_id
    coord.sync_group("my-group", 1, member, {member: b"ASSIGN"})
    records = [r for r in raw_records(store, "my-group") if r.key and r.key[:2] == b"\x00\x02"]
    assert len(records) == 2  # the empty group on creation, then generation 1
    empty, stored = (Fields(r.value or b"") for r in records)
    assert (empty.take(">h"), empty.string(), empty.take(">i")) == (3, "", 0)
    key = Fields(records[1].key or b"")
    assert (key.take(">h"), key.string()) == (2, "my-group") and key.done()
    assert stored.take(">h") == 3  # GroupMetadataValue version 3
    assert stored.string() == "consumer"  # protocolType
    assert stored.take(">i") == 1  # generation
    assert stored.string() == "range"  # protocol
    assert stored.string() == member  # leader
    assert stored.take(">q") == clock.now  # currentStateTimestamp: entered CompletingRebalance
    assert stored.take(">i") == 1  # one member
    assert stored.string() == member
    assert stored.string() == "static-1"  # groupInstanceId
    assert stored.string() == "client-1"
    assert stored.string() == "/10.0.0.1"
    assert stored.take(">i") == 20_000  # rebalanceTimeout
    assert stored.take(">i") == 10_000  # sessionTimeout
    assert stored.blob() == b"SUB"
    assert stored.blob() == b"ASSIGN"
    assert stored.done()


# --- the codec ---------------------------------------------------------------------------------
MEMBER = MemberMetadata("m-1", "inst", "client", "/1.2.3.4", 300_000, 45_000, b"sub", b"asg")
GROUP_VALUE = GroupMetadataValue("consumer", 7, "range", "m-1", 1_700_000_000_000, (MEMBER,))


def test_keys_round_trip() -> None:
    for version in (0, 1):
        key = OffsetCommitKey("g", "t", 3)
        assert decode_key(encode_offset_commit_key(key, version)) == key
    assert decode_key(encode_group_metadata_key(GroupMetadataKey("g"))) == GroupMetadataKey("g")
    assert decode_key(struct.pack(">h", 5) + b"anything") == UnknownKey(5)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_offset_commit_values_round_trip(version: int) -> None:
    value = OffsetCommitValue(
        10, 3 if version >= 3 else -1, "md", 1000, 5000 if version == 1 else -1
    )
    assert decode_offset_commit_value(encode_offset_commit_value(value, version)) == value


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_group_metadata_values_round_trip(version: int) -> None:
    member = MEMBER._replace(
        group_instance_id=MEMBER.group_instance_id if version >= 3 else None,
        rebalance_timeout=MEMBER.rebalance_timeout if version >= 1 else -1,
    )
    value = GROUP_VALUE._replace(
        members=(member,),
        current_state_timestamp=GROUP_VALUE.current_state_timestamp if version >= 2 else -1,
    )
    assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value
    empty = GroupMetadataValue("", 0, None, None, -1 if version < 2 else 5, ())
    assert decode_group_metadata_value(encode_group_metadata_value(empty, version)) == empty


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def compact(s: bytes | None) -> bytes:
    return uvarint(0) if s is None else uvarint(len(s) + 1) + s


def test_flexible_version_4_values_are_read() -> None:
    tag = uvarint(1) + uvarint(9) + uvarint(2) + b"??"  # one unknown tagged field
    offset = struct.pack(">hqi", 4, 99, 2) + compact(b"meta") + struct.pack(">q", 77) + tag
    assert decode_offset_commit_value(offset) == OffsetCommitValue(99, 2, "meta", 77, -1)
    member = (
        compact(b"m") + compact(None) + compact(b"c") + compact(b"h")
        + struct.pack(">ii", 5, 6) + compact(b"S") + compact(b"A") + uvarint(0)
    )  # fmt: skip
    group = (
        struct.pack(">h", 4) + compact(b"consumer") + struct.pack(">i", 3) + compact(b"range")
        + compact(b"m") + struct.pack(">q", 8) + uvarint(2) + member + tag
    )  # fmt: skip
    assert decode_group_metadata_value(group) == GroupMetadataValue(
        "consumer", 3, "range", "m", 8, (MemberMetadata("m", None, "c", "h", 5, 6, b"S", b"A"),)
    )


def test_every_truncation_and_any_trailing_byte_is_corrupt() -> None:
    samples = [
        (encode_offset_commit_key(OffsetCommitKey("g", "t", 1)), decode_key),
        (encode_group_metadata_key(GroupMetadataKey("g")), decode_key),
        (encode_offset_commit_value(OffsetCommitValue(1, 2, "m", 3)), decode_offset_commit_value),
        (encode_group_metadata_value(GROUP_VALUE), decode_group_metadata_value),
    ]
    for data, decode in samples:
        decode(data)
        for cut in range(len(data)):
            with pytest.raises(CorruptRecordError):
                decode(data[:cut])
        with pytest.raises(CorruptRecordError, match="unexpected byte"):
            decode(data + b"\x00")


def test_bad_numbers_are_named() -> None:
    with pytest.raises(CorruptRecordError, match="unknown version 9"):
        decode_offset_commit_value(struct.pack(">hq", 9, 0))
    with pytest.raises(CorruptRecordError, match="negative version"):
        decode_key(struct.pack(">h", -1))
    bad_length = struct.pack(">hq", 3, 0) + struct.pack(">i", 0) + struct.pack(">h", -2)
    with pytest.raises(CorruptRecordError, match=r"metadata .* invalid length -2"):
        decode_offset_commit_value(bad_length)
    huge_count = struct.pack(">h", 3) + b"\x00\x00" + struct.pack(">i", 0) + b"\xff\xff" * 2
    huge_count += struct.pack(">q", 0) + struct.pack(">i", 1_000_000)
    with pytest.raises(CorruptRecordError, match="count 1000000 exceeds"):
        decode_group_metadata_value(huge_count)


def test_consumer_subscription_topics() -> None:
    data = struct.pack(">hi", 3, 2) + b"\x00\x01a" + b"\x00\x02bb" + b"more fields of v3"
    assert consumer_subscription_topics(data) == frozenset({"a", "bb"})
    assert consumer_subscription_topics(b"\x00") is None


# --- the topic -------------------------------------------------------------------------------
def test_the_topic_is_compacted_and_never_deleted_by_time(open_store: StoreFactory) -> None:
    store = open_store()
    GroupCoordinator.load(store)
    assert store.partitions(OFFSETS_TOPIC) == 50
    assert store.topic_info(OFFSETS_TOPIC).overrides == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "-1",
        "compression.type": "producer",
        "segment.bytes": "104857600",
    }


def test_loading_skips_other_record_types_and_names_corrupt_ones(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    GroupCoordinator.load(store)
    p = partition_for("g")
    # Type 11, a share group's metadata: not read (type 3 and up to 8, consumer groups, are).
    store.append(OFFSETS_TOPIC, p, [(struct.pack(">h", 11) + b"share group", b"whatever")])
    key = encode_offset_commit_key(OffsetCommitKey("g", "t", 0))
    store.append(
        OFFSETS_TOPIC, p, [(key, encode_offset_commit_value(OffsetCommitValue(4, -1, "", 0)))]
    )
    assert GroupCoordinator.load(store).fetch_offsets("g", [("t", 0)]).partitions[0].offset == 4
    bad = store.append(
        OFFSETS_TOPIC, p, [(encode_group_metadata_key(GroupMetadataKey("g")), b"\x00\x03")]
    )
    with pytest.raises(CorruptRecordError, match=f"__consumer_offsets-{p} offset {bad}"):
        GroupCoordinator.load(store)


# "Aa" and "BB" have the same hashCode: both groups live in one partition.
KEPT, DELETED = "Aa", "BB"


def test_cleaning_keeps_the_latest_commit_per_key(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    coord = GroupCoordinator.load(store)
    for round_ in range(20):
        clock.advance(1000)
        for group in (KEPT, DELETED):
            commits = [("t", part, round_ * 10 + part) for part in range(3)]
            assert {r.error_code for r in coord.commit_offsets(group, -1, "", -1, commits)} == {0}
    coord.delete_groups([DELETED])  # tombstones for its offsets and for the group
    p = partition_for(KEPT)
    assert p == partition_for(DELETED)
    store.roll(OFFSETS_TOPIC, p)
    manager_of(store).clean_log(OFFSETS_TOPIC, p, clock.now)

    def latest() -> dict[OffsetCommitKey | GroupMetadataKey, int | None]:
        """Each key's value after cleaning (an offset, or None for a tombstone)."""
        seen: dict[OffsetCommitKey | GroupMetadataKey, int | None] = {}
        for record in store.read(OFFSETS_TOPIC, p):
            key = decode_key(record.key or b"")
            assert not isinstance(key, UnknownKey)
            assert key not in seen  # one record per key is left
            if record.value is None:
                seen[key] = None
            elif isinstance(key, OffsetCommitKey):
                seen[key] = decode_offset_commit_value(record.value).offset
        return seen

    assert latest() == {
        OffsetCommitKey(KEPT, "t", 0): 190,
        OffsetCommitKey(KEPT, "t", 1): 191,
        OffsetCommitKey(KEPT, "t", 2): 192,
        # Tombstones stay for delete.retention.ms, for readers to learn of the deletion.
        OffsetCommitKey(DELETED, "t", 0): None,
        OffsetCommitKey(DELETED, "t", 1): None,
        OffsetCommitKey(DELETED, "t", 2): None,
        GroupMetadataKey(DELETED): None,
    }
    # The compacted topic loads to the same state.
    reloaded = GroupCoordinator.load(store)
    assert [p.offset for p in reloaded.fetch_offsets(KEPT).partitions] == [190, 191, 192]
    assert reloaded.fetch_offsets(DELETED).partitions == ()
    assert [g.group_id for g in reloaded.list_groups()] == [KEPT]
    # A day (delete.retention.ms) and a new commit later, the next cleaning drops them too.
    clock.advance(24 * 3600 * 1000 + 1)
    reloaded.commit_offsets(KEPT, -1, "", -1, [("t", 0, 200)])
    store.roll(OFFSETS_TOPIC, p)
    manager_of(store).clean_log(OFFSETS_TOPIC, p, clock.now)
    assert latest() == {
        OffsetCommitKey(KEPT, "t", 0): 200,
        OffsetCommitKey(KEPT, "t", 1): 191,
        OffsetCommitKey(KEPT, "t", 2): 192,
    }
