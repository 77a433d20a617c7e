"""KIP-848 consumer groups with Kafka 4.4's Java consumer and tools, against ``compactlog serve``
and against Kafka 4.4 itself (tests/kafka/tools.py compares what both print).

A console consumer with ``group.protocol=consumer`` joins through ConsumerGroupHeartbeat and
commits; ``kafka-consumer-groups --describe`` then describes the group through
ConsumerGroupDescribe, while it runs and once it left.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.kafka.tools import Background, BrokerPair, eventually, start_pair

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

RECORDS = "".join(f"k{i}:v{i}\n" for i in range(10))
PRODUCER = ("--reader-property", "parse.key=true", "--reader-property", "key.separator=:")
CONSUMER = ("--command-property", "group.protocol=consumer")


@pytest.fixture
def pair(kafka: Callable[..., Any], compactlog_serve: Callable[..., Any]) -> BrokerPair:
    return start_pair(kafka, compactlog_serve)


def _stable(pair: BrokerPair, group: str) -> bool:
    kafka, compactlog = pair.run("kafka-consumer-groups", "--describe", "--group", group, "--state")
    return all(" Stable " in outcome.stdout for outcome in (kafka, compactlog))


def test_java_consumer_protocol_group(pair: BrokerPair) -> None:
    same = pair.same
    same("kafka-topics", "--create", "--topic", "t", "--partitions", "2")
    same("kafka-console-producer", "--topic", "t", *PRODUCER, input=RECORDS)
    running = Background(
        pair, "kafka-console-consumer", "--topic", "t", "--group", "g848", "--from-beginning",
        *CONSUMER,
    )  # fmt: skip
    try:
        eventually(lambda: _stable(pair, "g848"), "stable group g848 on both brokers")
        state = same("kafka-consumer-groups", "--describe", "--group", "g848", "--state")
        assert state.lines()[2].split()[3:] == ["uniform", "Stable", "1"], state.stdout
        same("kafka-consumer-groups", "--describe", "--group", "g848", "--members", "--verbose")
        same("kafka-consumer-groups", "--list", "--type")
        busy = same("kafka-consumer-groups", "--delete", "--group", "g848")
        assert "GroupNotEmptyException" in busy.stdout
        subscribed = same("kafka-consumer-groups", "--delete-offsets", "--group", "g848",
                          "--topic", "t")  # exit 0 on Kafka too  # fmt: skip
        assert "GroupSubscribedToTopicException" in subscribed.stdout
    finally:
        stopped = running.stop()
    assert [sorted(out.splitlines()) for _, out, _ in stopped] == [
        sorted(f"v{i}" for i in range(10))
    ] * 2
    left = same("kafka-consumer-groups", "--describe", "--group", "g848", "--state")
    assert left.lines()[2].split()[3:] == ["uniform", "Empty", "0"], left.stdout
    offsets = same("kafka-consumer-groups", "--describe", "--group", "g848", "--offsets")
    assert sum(int(line.split()[3]) for line in offsets.lines()[2:]) == 10
    same("kafka-consumer-groups", "--delete-offsets", "--group", "g848", "--topic", "t:0")
    same("kafka-consumer-groups", "--describe", "--group", "g848", "--offsets")
    same("kafka-consumer-groups", "--delete", "--group", "g848")
    same("kafka-consumer-groups", "--list")


def test_kafka_decodes_the_consumer_group_records(tmp_path: Any) -> None:
    """Kafka's own ``kafka-dump-log --offsets-decoder`` reads the ConsumerGroup* records the
    coordinator writes: every record type, its fields, and the tombstones of a member."""
    import json
    import re

    from compactlog.broker.coordinator.service import GroupCoordinator
    from tests.conftest import ManualClock
    from tests.kafka.harness import run_tool
    from tests.managed import open_managed

    store = open_managed(tmp_path / "data", clock=ManualClock())
    try:
        store.create_topic("a", 6)
        coordinator = GroupCoordinator.load(store, {"offsets.topic.num.partitions": 1})
        for member, assignor in (("m1", None), ("m2", "range")):
            coordinator.consumer_group_heartbeat(
                "g", member, 0, rebalance_timeout_ms=1000, subscribed_topic_names=["a"],
                owned=[], server_assignor=assignor, client_id="cid", client_host="/h",
            )  # fmt: skip
        coordinator.consumer_group_heartbeat("g", "m1", 2, client_id="cid", client_host="/h")
        coordinator.consumer_group_heartbeat("g", "m2", -1)
    finally:
        store.close()
    (segment,) = sorted((tmp_path / "data" / "__consumer_offsets-0").glob("*.log"))
    done = run_tool("kafka-dump-log", "--files", str(segment), "--offsets-decoder")
    assert done.returncode == 0, done.stderr
    decoded = [
        (json.loads(key), payload)
        for key, payload in re.findall(r"key: (\{.*?\}\}) payload: (.*)", done.stdout)
    ]
    types = [int(key["type"]) for key, _ in decoded]
    assert types == [5, 3, 7, 6, 8, 5, 3, 7, 7, 6, 8, 8, 8, 7, 5, 3], done.stdout
    assert [json.loads(p)["data"] for k, p in decoded if k["type"] == "3"] == [
        {"epoch": 2}, {"epoch": 3}, {"epoch": 4}
    ]  # fmt: skip
    revoking = json.loads(decoded[11][1])["data"]
    assert (revoking["memberEpoch"], revoking["state"]) == (2, 1)
    assert revoking["assignedPartitions"][0]["partitions"] == [0, 1, 2]
    assert revoking["partitionsPendingRevocation"][0]["partitions"] == [3, 4, 5]
    assert [p for k, p in decoded if k["data"].get("memberId") == "m2"][-3:] == ["<DELETE>"] * 3
