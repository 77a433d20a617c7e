"""A classic member's metadata in a consumer group's member record (tag 0 of
ConsumerGroupMemberMetadataValue), written and replayed; the Kafka tier checks the bytes against
Kafka's own generated class (tests/kafka/test_group_record_values.py)."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from compactlog.broker.coordinator.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
)
from compactlog.broker.coordinator.consumer_records import (
    MEMBER_METADATA,
    Replayer,
    group_epoch_record,
    group_records,
    member_record,
)
from compactlog.errors import CorruptRecordError

CLASSIC = ClassicMemberMetadata(45000, (("range", b"\x00\x00abc"), ("cooperative-sticky", b"")))


def _member(classic: ClassicMemberMetadata | None) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        "m1",
        member_epoch=5,
        previous_member_epoch=4,
        client_id="kafka-python",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=300000,
        subscribed_topic_names=("orders",),
        assigned={uuid.UUID(int=7): frozenset({0, 1})},
        classic=classic,
    )


def _replay(group: ConsumerGroup) -> ConsumerGroup:
    replayer = Replayer()
    for record in group_records(None, group):
        replayer.replay(record.key, record.value)
    (loaded,) = replayer.groups()
    return loaded


def test_classic_metadata_survives_a_replay() -> None:
    group = ConsumerGroup("g", 5, 5, {"m1": _member(CLASSIC)}, {"m1": _member(None).assigned})
    loaded = _replay(group)
    assert loaded.members["m1"].classic == CLASSIC
    assert loaded.members["m1"].assigned == group.members["m1"].assigned
    assert loaded.members["m1"].member_epoch == 5


def test_consumer_member_record_has_no_tagged_field() -> None:
    plain = member_record("g", _member(None)).value
    tagged = member_record("g", _member(CLASSIC)).value
    assert plain is not None and tagged is not None
    assert plain.endswith(b"\x00")  # an empty tagged-field section
    assert tagged.startswith(plain[:-1])
    # one tagged field, tag 0, its size, then the nullable struct's presence byte
    assert tagged[len(plain) - 1 : len(plain) + 1] == b"\x01\x00"
    assert tagged[len(plain) + 2] == 1
    group = ConsumerGroup("g", 5, 5, {"m1": _member(None)})
    assert _replay(group).members["m1"].classic is None


def test_a_change_of_classic_metadata_rewrites_the_member_record() -> None:
    before = ConsumerGroup("g", 5, 5, {"m1": _member(CLASSIC)})
    after = ConsumerGroup("g", 5, 5, {"m1": replace(_member(CLASSIC), classic=None)})
    records = group_records(before, after)
    assert [r.key[:2] for r in records] == [MEMBER_METADATA.to_bytes(2, "big")]
    assert records[0] == member_record("g", after.members["m1"])


def test_null_classic_struct_reads_as_none() -> None:
    plain = member_record("g", _member(None))
    assert plain.value is not None
    value = plain.value[:-1] + b"\x01\x00\x01\xff"  # tag 0, size 1, presence -1
    replayer = Replayer()
    epoch = group_epoch_record("g", 5)
    replayer.replay(epoch.key, epoch.value)
    replayer.replay(plain.key, value)
    (loaded,) = replayer.groups()
    assert loaded.members["m1"].classic is None


def test_truncated_classic_metadata_is_corrupt() -> None:
    record = member_record("g", _member(CLASSIC))
    assert record.value is not None
    value = record.value
    cut = value[:-3]
    # keep the tagged field's declared size consistent with the bytes, so that the struct
    # itself is what ends too early
    size_at = len(member_record("g", _member(None)).value or b"") + 1
    cut = cut[:size_at] + bytes([value[size_at] - 3]) + cut[size_at + 1 :]
    with pytest.raises(CorruptRecordError, match=r"^ClassicMemberMetadata: "):
        Replayer().replay(record.key, cut)
