"""KIP-848 consumer groups with confluent-kafka (librdkafka 2.16, ``group.protocol=consumer``):
the broker assigns the partitions, members come, leave and die, offsets are committed into
``__consumer_offsets`` and read back after a restart.

The broker tells members to heartbeat every 300 ms and fences a silent one after 6 s, so that
every rebalance here takes a few heartbeats rather than Kafka's 5 s ones.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from tests.broker.helpers.clients import CLIENT_TIMEOUT_S, needs_confluent, needs_kafka_python
from tests.broker.helpers.groups import wait_for_exact_cover
from tests.broker.helpers.server import Brokers
from tests.broker.helpers.store import append, create_topic

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(90),
    pytest.mark.usefixtures("collect_client_garbage"),
]

TOPIC = "kip848"
PARTITIONS = 6
SESSION_MS = 6000
CONFIG = {
    "group.consumer.heartbeat.interval.ms": 300,
    "group.consumer.session.timeout.ms": SESSION_MS,
}


def consumer_config(bootstrap: str, group: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
    }


def _ignore(*_: Any) -> None:
    pass


def commit(consumer: Any, message: Any) -> None:
    """Commit a read record, retrying STALE_MEMBER_EPOCH: a commit that crosses the heartbeat
    that moves the member to a new epoch carries the old one, and librdkafka leaves the retry of
    such a manual commit to the application (as Kafka's own consumer does not)."""
    from confluent_kafka import KafkaError, KafkaException

    for _ in range(100):
        try:
            consumer.commit(message, asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                raise
            time.sleep(0.02)
    raise AssertionError("the commit stayed STALE_MEMBER_EPOCH for 2 s")


class Member(threading.Thread):
    """A confluent-kafka consumer polling in its own thread; it commits each record it reads
    (synchronously) and records what it read and which partitions it holds."""

    def __init__(
        self, name: str, bootstrap: str, group: str, instance_id: str | None = None
    ) -> None:
        super().__init__(name=f"member-{name}", daemon=True)
        self.bootstrap = bootstrap
        self.group = group
        self.instance_id = instance_id
        self.assignment: frozenset[int] | None = None
        self.consumed: list[tuple[int, int]] = []
        self.error: BaseException | None = None
        self._leave = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer

        try:
            config = consumer_config(self.bootstrap, self.group)
            if self.instance_id is not None:
                config["group.instance.id"] = self.instance_id
            consumer = Consumer(config)
            try:
                # Rebalance callbacks make librdkafka revoke inside poll(), never between a
                # read and its commit.
                consumer.subscribe([TOPIC], on_assign=_ignore, on_revoke=_ignore)
                while not self._leave.is_set():
                    message = consumer.poll(0.1)
                    if message is not None:
                        if message.error():
                            raise AssertionError(f"consumer error: {message.error()}")
                        self.consumed.append((message.partition(), message.offset()))
                        commit(consumer, message)
                    self.assignment = frozenset(tp.partition for tp in consumer.assignment())
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def leave(self) -> None:
        self._leave.set()
        self.join(timeout=CLIENT_TIMEOUT_S)
        assert not self.is_alive(), f"{self.name} did not close"


_CHILD = """
import sys
from confluent_kafka import Consumer
config = dict(arg.split("=", 1) for arg in sys.argv[2:])
consumer = Consumer(config)
consumer.subscribe([sys.argv[1]])
last = None
while True:
    consumer.poll(0.1)
    held = sorted(tp.partition for tp in consumer.assignment())
    if held != last:
        print("assigned", ",".join(map(str, held)), flush=True)
        last = held
"""


class ChildMember:
    """A member in a process of its own, so that it can die without leaving the group."""

    def __init__(self, bootstrap: str, group: str) -> None:
        config = consumer_config(bootstrap, group)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, TOPIC, *(f"{k}={v}" for k, v in config.items())],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.assignment: frozenset[int] | None = None
        self.error: BaseException | None = None
        self.name = "child"
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            held = line.split()[1:]
            self.assignment = frozenset(int(p) for p in held[0].split(",")) if held else frozenset()

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._reader.join(timeout=10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@needs_confluent
def test_group_rebalances_on_join_leave_and_death_without_double_reads(brokers: Brokers) -> None:
    broker = brokers.start(config=CONFIG)
    create_topic(broker, TOPIC, PARTITIONS)
    stop = threading.Event()
    produced = {p: 0 for p in range(PARTITIONS)}

    def produce() -> None:
        while not stop.is_set():
            for p in range(PARTITIONS):
                append(broker, TOPIC, p, [(b"k", b"v%d" % produced[p])])
                produced[p] += 1
            time.sleep(0.05)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    members: list[Member] = []
    child: ChildMember | None = None
    try:
        a = Member("a", broker.bootstrap, "g848")
        a.start()
        members.append(a)
        only_a = wait_for_exact_cover(members, PARTITIONS)
        assert only_a == {"member-a": frozenset(range(PARTITIONS))}
        for name in ("b", "c"):
            m = Member(name, broker.bootstrap, "g848")
            m.start()
            members.append(m)
        three = wait_for_exact_cover(members, PARTITIONS)
        assert sorted(len(p) for p in three.values()) == [2, 2, 2], three

        # A member leaves: the two others share its partitions.
        leaving = members.pop()
        leaving.leave()
        two = wait_for_exact_cover(members, PARTITIONS)
        assert sorted(len(p) for p in two.values()) == [3, 3], two

        # A member dies (no leave): after the session timeout its partitions move.
        child = ChildMember(broker.bootstrap, "g848")
        with_child = wait_for_exact_cover([*members, child], PARTITIONS)
        assert sorted(len(p) for p in with_child.values()) == [2, 2, 2], with_child
        child.kill()
        killed_at = time.monotonic()
        after = wait_for_exact_cover(members, PARTITIONS, timeout=SESSION_MS / 1000 + 20)
        assert sorted(len(p) for p in after.values()) == [3, 3], after
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 - 1
        stop.set()
        producer.join()
        # Everyone catches up; no record was read twice (each was committed once read).
        deadline = time.monotonic() + 20
        consumed = [r for m in [*members, leaving] for r in m.consumed]
        while time.monotonic() < deadline:
            consumed = [r for m in [*members, leaving] for r in m.consumed]
            if {(p, o) for p, o in consumed} >= {(p, produced[p] - 1) for p in produced}:
                break
            time.sleep(0.1)
        # The killed member never commits, so its partitions are read again from the last
        # commit by their next owners: the members' reads hold every record exactly once.
        assert len(consumed) == len(set(consumed)), "a record was consumed twice"
        assert set(consumed) == {(p, o) for p in produced for o in range(produced[p])}
    finally:
        stop.set()
        if child is not None and child.proc.poll() is None:
            child.kill()
        for m in members:
            m.leave()


@needs_confluent
def test_commits_survive_a_broker_restart(brokers: Brokers) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition

    broker = brokers.start(config=CONFIG)
    create_topic(broker, TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        append(broker, TOPIC, p, [(b"k", b"before-%d-%d" % (p, i)) for i in range(5)])
    member = Member("first", broker.bootstrap, "durable848")
    member.start()
    try:
        deadline = time.monotonic() + 30
        while len(member.consumed) < 5 * PARTITIONS and time.monotonic() < deadline:
            assert member.error is None, member.error
            time.sleep(0.05)
    finally:
        member.leave()
    assert len(member.consumed) == 5 * PARTITIONS

    broker = brokers.restart(broker, CONFIG)
    for p in range(PARTITIONS):
        append(broker, TOPIC, p, [(b"k", b"after-%d" % p)])
    consumer = Consumer(consumer_config(broker.bootstrap, "durable848"))
    try:
        committed = consumer.committed(
            [CkTopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10
        )
        assert {tp.partition: tp.offset for tp in committed} == dict.fromkeys(range(PARTITIONS), 5)
        consumer.subscribe([TOPIC])
        seen: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(seen) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and not message.error():
                seen.append((message.partition(), message.offset(), message.value()))
    finally:
        consumer.close()
    assert sorted(seen) == [(p, 5, b"after-%d" % p) for p in range(PARTITIONS)]


@needs_confluent
def test_static_member_restarts_without_a_rebalance(brokers: Brokers) -> None:
    """A static member (``group.instance.id``) that closes and comes back within the session
    timeout gets its partitions back, and the other member's stay where they were."""
    broker = brokers.start(config=CONFIG)
    create_topic(broker, TOPIC, PARTITIONS)
    dynamic = Member("dynamic", broker.bootstrap, "static848")
    static = Member("static", broker.bootstrap, "static848", instance_id="box-1")
    members = [dynamic, static]
    try:
        for m in members:
            m.start()
        first = wait_for_exact_cover(members, PARTITIONS)
        static.leave()
        members.remove(static)
        time.sleep(1.0)  # well within the 6 s session: box-1's partitions wait for it
        assert dynamic.assignment == first["member-dynamic"]
        again = Member("static", broker.bootstrap, "static848", instance_id="box-1")
        again.start()
        members.append(again)
        assert wait_for_exact_cover(members, PARTITIONS) == first
    finally:
        for m in members:
            m.leave()


@needs_confluent
def test_regex_subscription(brokers: Brokers) -> None:
    """``subscribe(["^rx-.*"])``: the broker resolves the pattern, and a topic created later
    that matches is assigned too."""
    from confluent_kafka import Consumer

    broker = brokers.start(config=CONFIG)
    create_topic(broker, "rx-1", 2)
    create_topic(broker, "other", 2)
    consumer = Consumer(consumer_config(broker.bootstrap, "regex848"))
    try:
        consumer.subscribe(["^rx-.*"])

        def held() -> set[tuple[str, int]]:
            consumer.poll(0.1)
            return {(tp.topic, tp.partition) for tp in consumer.assignment()}

        deadline = time.monotonic() + 20
        while held() != {("rx-1", 0), ("rx-1", 1)}:
            assert time.monotonic() < deadline, held()
        create_topic(broker, "rx-2", 1)
        deadline = time.monotonic() + 30
        while held() != {("rx-1", 0), ("rx-1", 1), ("rx-2", 0)}:
            assert time.monotonic() < deadline, held()
    finally:
        consumer.close()


@needs_confluent
@needs_kafka_python
def test_classic_and_consumer_members_do_not_mix(brokers: Brokers) -> None:
    """A live consumer-protocol group refuses a classic member (INCONSISTENT_GROUP_PROTOCOL),
    and a live classic group refuses a consumer-protocol member (GROUP_ID_NOT_FOUND, fatal for
    librdkafka), as Kafka 4.4 does with group.consumer.migration.policy=disabled (the default,
    bidirectional, converts the groups: tests/broker/test_groups_migration.py)."""
    from confluent_kafka import Consumer, KafkaError
    from kafka import KafkaConsumer
    from kafka.errors import InconsistentGroupProtocolError

    broker = brokers.start(config={**CONFIG, "group.consumer.migration.policy": "disabled"})
    create_topic(broker, TOPIC, PARTITIONS)
    member = Member("new", broker.bootstrap, "new-protocol")
    member.start()
    try:
        wait_for_exact_cover([member], PARTITIONS)
        classic = KafkaConsumer(
            TOPIC, bootstrap_servers=broker.bootstrap, group_id="new-protocol",
            request_timeout_ms=10_000,
        )  # fmt: skip
        try:
            with pytest.raises(InconsistentGroupProtocolError):
                classic.poll(timeout_ms=10_000)
        finally:
            classic.close()
        assert member.error is None
    finally:
        member.leave()

    classic = KafkaConsumer(
        TOPIC, bootstrap_servers=broker.bootstrap, group_id="old-protocol",
        session_timeout_ms=10_000, heartbeat_interval_ms=300, request_timeout_ms=10_000,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not classic.assignment():
            classic.poll(timeout_ms=100)
            assert time.monotonic() < deadline, "the classic member got no partitions"
        consumer = Consumer(consumer_config(broker.bootstrap, "old-protocol"))
        try:
            consumer.subscribe([TOPIC])
            deadline = time.monotonic() + 20
            while True:
                classic.poll(timeout_ms=10)
                message = consumer.poll(0.1)
                if message is not None and message.error():
                    error = message.error()
                    break
                assert time.monotonic() < deadline, "no error for the consumer-protocol member"
            assert error.code() == KafkaError._FATAL, error
            assert "The group id does not exist" in error.str(), error
        finally:
            consumer.close()
    finally:
        classic.close()
