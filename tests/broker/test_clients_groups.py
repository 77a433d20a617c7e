"""Consumer groups with mixed clients: one group, three client libraries, six partitions.

kafka-python and librdkafka offer ``range`` and ``roundrobin`` by default and aiokafka only
``roundrobin`` (spec 8 item 6), so every member here is configured with ``roundrobin``: the
protocol all members support. Each member runs in a thread of its own, polling as an application
would, and publishes the partitions it holds.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tests.broker.helpers.any_client import read
from tests.broker.helpers.clients import (
    CLIENT_TIMEOUT_S,
    needs_aiokafka,
    needs_confluent,
    needs_kafka_python,
    needs_kcat,
)
from tests.broker.helpers.groups import wait_for_exact_cover
from tests.broker.helpers.server import Brokers
from tests.broker.helpers.store import append, create_topic

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(60),
    pytest.mark.usefixtures("collect_client_garbage"),
]

TOPIC = "shared"
PARTITIONS = 6
SESSION_MS = 10_000
HEARTBEAT_MS = 300


class Member(threading.Thread):
    """One group member polling in its own thread until :meth:`leave`."""

    def __init__(self, client: str, bootstrap: str, group: str) -> None:
        super().__init__(name=f"member-{client}", daemon=True)
        self.client = client
        self.bootstrap = bootstrap
        self.group = group
        self.assignment: frozenset[int] | None = None
        self.error: BaseException | None = None
        self._leave = threading.Event()

    def run(self) -> None:
        try:
            if self.client == "kafka-python":
                self._run_kafka_python()
            elif self.client == "confluent-kafka":
                self._run_confluent()
            else:
                asyncio.run(self._run_aiokafka())
        except BaseException as exc:
            self.error = exc

    def leave(self) -> None:
        """Close the consumer (LeaveGroup) and wait for the thread."""
        self._leave.set()
        self.join(timeout=CLIENT_TIMEOUT_S)
        assert not self.is_alive(), f"{self.client} did not close"

    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        consumer = KafkaConsumer(
            TOPIC,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            partition_assignment_strategy=[RoundRobinPartitionAssignor],
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            request_timeout_ms=10_000,
        )
        try:
            while not self._leave.is_set():
                consumer.poll(timeout_ms=100)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()

    def _run_confluent(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "partition.assignment.strategy": "roundrobin",
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
            }
        )
        try:
            consumer.subscribe([TOPIC])
            while not self._leave.is_set():
                consumer.poll(0.1)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()

    async def _run_aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            request_timeout_ms=10_000,
        )
        await asyncio.wait_for(consumer.start(), CLIENT_TIMEOUT_S)
        try:
            while not self._leave.is_set():
                await consumer.getmany(timeout_ms=100)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            await consumer.stop()


MIXED = ["kafka-python", "confluent-kafka", "aiokafka"]


@needs_kafka_python
@needs_confluent
@needs_aiokafka
@pytest.mark.timeout(120)
def test_mixed_group_assigns_every_partition_once_and_rebalances_on_leave(broker: Any) -> None:
    create_topic(broker, TOPIC, PARTITIONS)
    members: list[Member] = []
    try:
        for client in MIXED:
            member = Member(client, broker.bootstrap, "mixed")
            member.start()
            members.append(member)
        first = wait_for_exact_cover(members, PARTITIONS, timeout=45.0, name=lambda m: m.client)
        # roundrobin over 6 partitions and 3 members: 2 each.
        assert sorted(len(a) for a in first.values()) == [2, 2, 2], first

        leaving = members.pop(1)  # confluent-kafka
        leaving.leave()
        second = wait_for_exact_cover(members, PARTITIONS, timeout=45.0, name=lambda m: m.client)
        assert sorted(len(a) for a in second.values()) == [3, 3], second
        moved = first[leaving.client]
        assert moved <= frozenset().union(*second.values())
    finally:
        for m in members:
            m.leave()


@needs_kafka_python
@needs_confluent
@needs_aiokafka
@pytest.mark.timeout(90)
def test_committed_offsets_survive_a_broker_restart(brokers: Brokers) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition
    from kafka import KafkaAdminClient, KafkaConsumer, OffsetAndMetadata, TopicPartition

    broker = brokers.start()
    create_topic(broker, TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        for i in range(10):
            append(broker, TOPIC, p, [(b"k%d" % i, b"before-%d-%d" % (p, i))])
    ends = {p: 10 for p in range(PARTITIONS)}
    # A group reads everything and commits its positions (10 everywhere) ...
    read("kafka-python", broker.bootstrap, TOPIC, ends, group="durable")
    # ... and a second commit with metadata, which must round-trip exactly.
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id="with-metadata", enable_auto_commit=False
    )
    try:
        consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(7, "checkpoint 7", -1)})
    finally:
        consumer.close()

    broker = brokers.restart(broker)

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        committed = admin.list_group_offsets({"durable": None})["durable"]
        assert {
            tp.partition: om.offset for tp, om in committed.items() if tp.topic == TOPIC
        } == ends
        with_meta = admin.list_group_offsets({"with-metadata": None})["with-metadata"]
        om = with_meta[TopicPartition(TOPIC, 0)]
        assert (om.offset, om.metadata) == (7, "checkpoint 7")
    finally:
        admin.close()

    ck = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "durable"})
    try:
        got = ck.committed([CkTopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        assert {tp.partition: tp.offset for tp in got} == ends
    finally:
        ck.close()

    # The group resumes where it committed: only records appended after the restart.
    for p in range(PARTITIONS):
        append(broker, TOPIC, p, [(b"k", b"after-%d" % p)])
    seen, _ = read(
        "aiokafka", broker.bootstrap, TOPIC, {p: 11 for p in range(PARTITIONS)}, group="durable"
    )
    assert sorted((s.partition, s.offset, s.value) for s in seen) == [
        (p, 10, b"after-%d" % p) for p in range(PARTITIONS)
    ]


@needs_kcat
@needs_kafka_python
def test_kcat_group_consumer_commits(broker: Any) -> None:
    """kcat ``-G``: the balanced consumer of librdkafka 2.0.2 (spec 1.4 item 1: it needs
    JoinGroup/SyncGroup/Heartbeat/LeaveGroup v0 advertised), committing what it read."""
    from kafka import KafkaAdminClient

    create_topic(broker, TOPIC, 2)
    for p in range(2):
        append(broker, TOPIC, p, [(b"k%d" % i, b"v%d" % i) for i in range(5)])
    seen, _ = read("kcat", broker.bootstrap, TOPIC, {0: 5, 1: 5}, group="kcat-group")
    assert len(seen) == 10

    def committed() -> dict[int, int]:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        try:
            offsets = admin.list_group_offsets({"kcat-group": None})["kcat-group"]
        finally:
            admin.close()
        return {tp.partition: om.offset for tp, om in offsets.items()}

    # kcat commits on close (auto commit of the stored offsets).
    assert committed() == {0: 5, 1: 5}
