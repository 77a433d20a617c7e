"""compactlog's ``__consumer_offsets`` values read by Kafka 4.4's own generated classes
(tests/kafka/java/GroupRecordValue.java): Kafka decodes every byte, sees the same fields, and
writes the same bytes again."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from compactlog.broker.coordinator.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
)
from compactlog.broker.coordinator.consumer_records import member_record
from tests.kafka.harness import run_java

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


def _kafka_reads(class_name: str, value: bytes) -> dict[str, object]:
    done = run_java("GroupRecordValue", class_name, base64.b64encode(value).decode())
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["left"] == 0, "Kafka left bytes unread"
    assert base64.b64decode(out["bytes"]) == value, "Kafka writes other bytes"
    parsed = json.loads(out["json"])
    assert isinstance(parsed, dict)
    return parsed


@pytest.mark.parametrize("classic", [False, True])
def test_member_metadata_value_as_kafka_reads_it(classic: bool) -> None:
    member = ConsumerGroupMember(
        "m1",
        instance_id="i1",
        client_id="kafka-python",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=300000,
        subscribed_topic_names=("a", "b"),
        assigned={uuid.UUID(int=1): frozenset({0})},
        classic=(
            ClassicMemberMetadata(45000, (("range", b"\x00\x01xyz"), ("roundrobin", b"")))
            if classic
            else None
        ),
    )
    value = member_record("g", member).value
    assert value is not None
    seen = _kafka_reads("ConsumerGroupMemberMetadataValue", value)
    assert seen["instanceId"] == "i1"
    assert seen["subscribedTopicNames"] == ["a", "b"]
    assert seen["rebalanceTimeoutMs"] == 300000
    if not classic:
        assert seen.get("classicMemberMetadata") is None
        return
    assert seen["classicMemberMetadata"] == {
        "sessionTimeoutMs": 45000,
        "supportedProtocols": [
            {"name": "range", "metadata": base64.b64encode(b"\x00\x01xyz").decode()},
            {"name": "roundrobin", "metadata": ""},
        ],
    }
