"""The consumer's embedded protocol (subscription and assignment blobs), checked byte for byte
against kafka-python's encoder and decoder, which follow Kafka's message JSON files."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment as KpAssignment,
)
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolSubscription as KpSubscription,
)

from compactlog.broker.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    topic_partitions,
)
from compactlog.errors import ProtocolError


def _kp_subscription(version: int) -> KpSubscription:
    tp = KpSubscription.TopicPartition
    return KpSubscription(
        version=version,
        topics=["orders", "payments"],
        user_data=b"\x01\x02",
        owned_partitions=[tp(topic="orders", partitions=[0, 3])],
        generation_id=7,
        rack_id="rack-a",
    )


def _ours(version: int) -> Subscription:
    return Subscription(
        version,
        ("orders", "payments"),
        b"\x01\x02",
        (("orders", (0, 3)),) if version >= 1 else (),
        7 if version >= 2 else -1,
        "rack-a" if version >= 3 else None,
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_matches_kafka_python(version: int) -> None:
    theirs = _kp_subscription(version).encode()
    assert decode_subscription(theirs) == _ours(version)
    assert encode_subscription(_ours(version)) == theirs


@pytest.mark.parametrize("version", [0, 3])
def test_assignment_matches_kafka_python(version: int) -> None:
    tp = KpAssignment.TopicPartition
    theirs = KpAssignment(
        version=version,
        assigned_partitions=[tp(topic="orders", partitions=[1, 2]), tp(topic="x", partitions=[0])],
        user_data=None,
    ).encode()
    ours = Assignment(version, (("orders", (1, 2)), ("x", (0,))), None)
    assert decode_assignment(theirs) == ours
    assert encode_assignment(ours) == theirs
    decoded = KpAssignment.decode(encode_assignment(ours))
    assert decoded.partitions() == [("orders", 1), ("orders", 2), ("x", 0)]


def test_null_user_data_and_rack() -> None:
    s = Subscription(3, ("t",), None, (), -1, None)
    assert decode_subscription(encode_subscription(s)) == s


def test_newer_version_read_and_written_as_the_latest() -> None:
    # A version-4 blob from a future client: its v3 fields are read, trailing fields ignored.
    blob = b"\x00\x04" + encode_subscription(_ours(3))[2:] + b"future fields"
    assert decode_subscription(blob) == Subscription(
        4, ("orders", "payments"), b"\x01\x02", (("orders", (0, 3)),), 7, "rack-a"
    )
    assert encode_assignment(Assignment(9, ()))[:2] == b"\x00\x03"


def test_topic_partitions_sorted_and_empty_dropped() -> None:
    assert topic_partitions({"b": {2, 0}, "a": [1], "c": ()}) == (("a", (1,)), ("b", (0, 2)))


def test_negative_version_refused() -> None:
    with pytest.raises(ProtocolError, match=r"ConsumerProtocolSubscription: version .*-1"):
        decode_subscription(b"\xff\xff" + encode_subscription(_ours(0))[2:])
    with pytest.raises(ValueError, match="negative"):
        encode_assignment(Assignment(-1, ()))


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_truncation_is_one_protocol_error(version: int) -> None:
    blob = encode_subscription(_ours(version))
    for end in range(len(blob)):
        with pytest.raises(ProtocolError, match=r"^ConsumerProtocolSubscription: "):
            decode_subscription(blob[:end])
    blob = encode_assignment(Assignment(version, (("orders", (1, 2)),), b"u"))
    for end in range(len(blob)):
        with pytest.raises(ProtocolError, match=r"^ConsumerProtocolAssignment: "):
            decode_assignment(blob[:end])


def test_bad_counts_and_strings_named() -> None:
    with pytest.raises(ProtocolError, match=r"topics at byte 6: invalid count 2147483647"):
        decode_subscription(b"\x00\x00\x7f\xff\xff\xff")
    with pytest.raises(ProtocolError, match=r"topics at byte 8: invalid length -2"):
        decode_subscription(b"\x00\x00\x00\x00\x00\x01\xff\xfe")
    with pytest.raises(ProtocolError, match=r"topics at byte 9: not UTF-8"):
        decode_subscription(b"\x00\x00\x00\x00\x00\x01\x00\x01\xff\xff\xff\xff\xff")
    with pytest.raises(ProtocolError, match=r"userData at byte 10: invalid length -5"):
        decode_subscription(b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xfb")
