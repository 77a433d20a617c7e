"""KIP-848's online migration (``group.consumer.migration.policy``, default ``bidirectional``):
a classic group with members becomes a consumer group when a consumer-protocol member joins, its
classic members are served by the consumer group, and it goes back to classic when the last
consumer-protocol member leaves. First driven through the coordinator with the manual clock,
then with real clients (kafka-python classic consumers, a confluent-kafka consumer with
``group.protocol=consumer``) against a broker."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from compactlog.broker.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from compactlog.broker.coordinator.service import GroupCoordinator
from compactlog.errors import (
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    ILLEGAL_GENERATION,
    INVALID_REQUEST,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from compactlog.storage.store import Store
from tests.broker.helpers.clients import CLIENT_TIMEOUT_S, needs_confluent, needs_kafka_python
from tests.broker.helpers.groups import wait_for_exact_cover
from tests.broker.helpers.server import Brokers
from tests.broker.helpers.store import append, create_topic
from tests.broker.test_clients_kip848 import commit
from tests.conftest import ManualClock

G = "mig"
SUB = encode_subscription(Subscription(0, ("a",)))
CONFIG = {"offsets.topic.num.partitions": 3}


def _join(c: GroupCoordinator, member_id: str, **kw: Any) -> Any:
    return c.join_group(
        G,
        member_id,
        None,
        "kp",
        "/127.0.0.1",
        "consumer",
        [("range", SUB)],
        30_000,
        60_000,
        kw.pop("known", False),
    )


def _owners_disjoint(c: GroupCoordinator) -> None:
    group = c.consumer.groups[G]
    seen: set[tuple[uuid.UUID, int]] = set()
    for m in group.members.values():
        for held in (m.assigned, m.pending_revocation):
            for t, ps in held.items():
                for p in ps:
                    assert (t, p) not in seen, f"partition {p} owned twice"
                    seen.add((t, p))


def _assigned(result: Any) -> set[int]:
    return {p for _, ps in decode_assignment(result.assignment).assigned_partitions for p in ps}


def test_upgrade_serve_classic_members_and_downgrade(
    open_store: Callable[..., Store], clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("a", 4)
    c = GroupCoordinator.load(store, CONFIG)
    # Two classic members, a Stable classic group of generation 1.
    p1, p2 = _join(c, ""), _join(c, "")
    for _ in range(2):  # group.initial.rebalance.delay.ms, extended once by the second member
        clock.advance(3_001)
        c.tick()
    j1, j2 = p1.result(), p2.result()
    assert j1.error_code == j2.error_code == NONE
    m1, m2 = j1.member_id, j2.member_id
    leader = m1 if j1.leader == m1 else m2
    plan = {
        m1: encode_assignment(Assignment(0, (("a", (0, 1)),))),
        m2: encode_assignment(Assignment(0, (("a", (2, 3)),))),
    }
    s_other = c.sync_group(G, 1, m2 if leader == m1 else m1)
    s_leader = c.sync_group(G, 1, leader, plan)
    assert s_leader.result().error_code == s_other.result().error_code == NONE
    assert c.commit_offsets(G, 1, m1, -1, [("a", 0, 5)])[0].error_code == NONE

    # A consumer-protocol member joins: the group becomes a consumer group of epoch 2.
    r = c.consumer_group_heartbeat(
        G, "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["a"], owned=[]
    )
    assert (r.error_code, r.member_epoch) == (NONE, 2), r.error_message
    cid = r.member_id
    assert r.assignment == {}  # its partitions are still owned by the classic members
    assert [g.group_type for g in c.list_groups() if g.group_id == G] == ["consumer"]
    _owners_disjoint(c)
    # The classic members are told to rejoin, and do (eagerly: they own nothing then).
    assert c.heartbeat(G, 1, m1) == REBALANCE_IN_PROGRESS
    assert c.commit_offsets(G, 1, m1, -1, [("a", 0, 6)])[0].error_code == NONE
    assert c.commit_offsets(G, 0, m1, -1, [("a", 0, 6)])[0].error_code == ILLEGAL_GENERATION
    got = {}
    for m in (m1, m2):
        joined = _join(c, m).result()
        assert (joined.error_code, joined.generation_id) == (NONE, 2)
        assert joined.protocol_name == "range" and joined.leader != m and not joined.members
        synced = c.sync_group(G, 2, m, protocol_type="consumer", protocol_name="range")
        assert synced.result().error_code == NONE
        got[m] = _assigned(synced.result())
        assert c.heartbeat(G, 2, m) in (NONE, REBALANCE_IN_PROGRESS)
        _owners_disjoint(c)
    r = c.consumer_group_heartbeat(G, cid, 2, owned=[])
    assert r.error_code == NONE and r.assignment is not None
    got[cid] = {p for ps in r.assignment.values() for p in ps}
    assert sorted(p for ps in got.values() for p in ps) == [0, 1, 2, 3]
    assert all(len(ps) >= 1 for ps in got.values())
    _owners_disjoint(c)

    # A restart keeps the classic members (their metadata is in their member records).
    store.close()
    store = open_store()
    c = GroupCoordinator.load(store, CONFIG)
    group = c.consumer.groups[G]
    assert {m for m, x in group.members.items() if x.classic} == {m1, m2}
    assert c.heartbeat(G, 2, m1) == NONE
    assert c.fetch_offsets(G, [("a", 0)]).partitions[0].offset == 6

    # The consumer member leaves: the group is classic again, of generation 2 (the group epoch),
    # and rebalances to generation 3.
    r = c.consumer_group_heartbeat(G, cid, -1)
    assert r.error_code == NONE
    assert [(g.group_type, g.state) for g in c.list_groups() if g.group_id == G] == [
        ("classic", "PreparingRebalance")
    ]
    assert c.heartbeat(G, 2, m1) == REBALANCE_IN_PROGRESS
    p1, p2 = _join(c, m1), _join(c, m2)
    j1, j2 = p1.result(), p2.result()
    assert j1.error_code == j2.error_code == NONE and j1.generation_id == 3
    assert c.fetch_offsets(G, [("a", 0)]).partitions[0].offset == 6
    leader = m1 if j1.leader == m1 else m2
    plan = {m1: encode_assignment(Assignment(0, (("a", (0, 1, 2, 3)),))), m2: b""}
    assert c.sync_group(G, 3, leader, plan).result().error_code == NONE
    # ... and stays classic across a restart.
    store.close()
    store = open_store()
    c = GroupCoordinator.load(store, CONFIG)
    assert G not in c.consumer.groups
    assert c.groups[G].generation_id == 3 and set(c.groups[G].members) == {m1, m2}
    assert c.heartbeat(G, 3, m1) == NONE


def test_classic_join_into_a_consumer_group_needs_a_member_id(
    open_store: Callable[..., Store],
) -> None:
    store = open_store()
    store.create_topic("a", 4)
    c = GroupCoordinator.load(store, CONFIG)
    r = c.consumer_group_heartbeat(
        G, "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["a"], owned=[]
    )
    assert r.error_code == NONE
    first = _join(c, "", known=True).result()
    assert first.error_code == MEMBER_ID_REQUIRED and first.member_id
    joined = _join(c, first.member_id, known=True).result()
    assert joined.error_code == NONE and joined.generation_id == 3


def _classic_group_then_consumer_member(
    c: GroupCoordinator, clock: ManualClock
) -> tuple[str, str, Any]:
    """A Stable classic group (one member, all of "a"), then a consumer-protocol member's join."""
    pending = _join(c, "")
    for _ in range(2):
        clock.advance(3_001)
        c.tick()
    m1 = pending.result().member_id
    whole = encode_assignment(Assignment(0, (("a", (0, 1, 2, 3)),)))
    assert c.sync_group(G, 1, m1, {m1: whole}).result().error_code == NONE
    r = c.consumer_group_heartbeat(
        G, "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["a"], owned=[]
    )
    return m1, r.member_id, r


def test_a_classic_member_that_does_not_rejoin_is_fenced(
    open_store: Callable[..., Store], clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("a", 4)
    c = GroupCoordinator.load(store, CONFIG)
    m1, cid, r = _classic_group_then_consumer_member(c, clock)
    assert r.error_code == NONE
    # Told to rejoin, it keeps heartbeating instead: after its rebalance timeout (60 s) it is
    # fenced, although its session (30 s) is kept alive (the consumer member's too: 45 s).
    for _ in range(6):
        assert c.heartbeat(G, 1, m1) == REBALANCE_IN_PROGRESS
        r = c.consumer_group_heartbeat(G, cid, r.member_epoch, owned=[])
        assert r.error_code == NONE
        clock.advance(10_000)
        c.tick()
    assert m1 not in c.consumer.groups[G].members
    r = c.consumer_group_heartbeat(G, cid, r.member_epoch, owned=[])
    assert r.assignment is not None and sorted(next(iter(r.assignment.values()))) == [0, 1, 2, 3]


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_no_upgrade_without_the_policy(open_store: Callable[..., Store], policy: str) -> None:
    store = open_store()
    store.create_topic("a", 4)
    c = GroupCoordinator.load(store, {**CONFIG, "group.consumer.migration.policy": policy})
    _join(c, "")
    r = c.consumer_group_heartbeat(
        G, "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["a"], owned=[]
    )
    assert r.error_code == GROUP_ID_NOT_FOUND
    assert r.error_message == (
        f"Cannot upgrade classic group {G} to consumer group because online upgrade is disabled."
    )


def test_upgrade_policy_does_not_downgrade(
    open_store: Callable[..., Store], clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("a", 4)
    c = GroupCoordinator.load(store, {**CONFIG, "group.consumer.migration.policy": "upgrade"})
    _m1, cid, r = _classic_group_then_consumer_member(c, clock)
    assert r.error_code == NONE
    assert c.consumer_group_heartbeat(G, cid, -1).error_code == NONE
    # The classic member stays in what remains a consumer group.
    assert [g.group_type for g in c.list_groups() if g.group_id == G] == ["consumer"]
    assert len(c.consumer.groups[G].members) == 1


def test_a_static_classic_member_restarts_in_a_consumer_group(
    open_store: Callable[..., Store],
) -> None:
    store = open_store()
    store.create_topic("a", 4)
    c = GroupCoordinator.load(store, CONFIG)
    r = c.consumer_group_heartbeat(
        G, "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["a"], owned=[]
    )

    def static_join(member_id: str) -> Any:
        return c.join_group(
            G, member_id, "box-1", "kp", "/h", "consumer", [("range", SUB)], 30_000, 60_000, True
        ).result()

    first = static_join("")
    assert first.error_code == NONE  # no MEMBER_ID_REQUIRED for a static member
    epoch = c.consumer.groups[G].group_epoch
    r = c.consumer_group_heartbeat(G, r.member_id, r.member_epoch, owned=[])  # releases
    again = static_join(first.member_id)
    assert again.error_code == NONE
    synced = c.sync_group(G, again.generation_id, first.member_id, group_instance_id="box-1")
    held = _assigned(synced.result())
    assert held
    # The process restarts: a new member id takes its place and its partitions, no rebalance.
    restarted = static_join("")
    assert restarted.error_code == NONE and restarted.member_id != first.member_id
    assert c.consumer.groups[G].group_epoch == epoch
    synced = c.sync_group(G, restarted.generation_id, restarted.member_id)
    assert _assigned(synced.result()) == held
    assert c.heartbeat(G, again.generation_id, first.member_id) == UNKNOWN_MEMBER_ID
    assert static_join(first.member_id).error_code == FENCED_INSTANCE_ID


def test_a_bad_heartbeat_does_not_convert_a_classic_group(
    open_store: Callable[..., Store],
) -> None:
    store = open_store()
    store.create_topic("a", 4)
    c = GroupCoordinator.load(store, CONFIG)
    _join(c, "")
    r = c.consumer_group_heartbeat(G, "", 0, subscribed_topic_names=["a"], owned=[])
    assert (r.error_code, r.error_message) == (
        INVALID_REQUEST,
        "RebalanceTimeoutMs must be provided in first request.",
    )
    assert [g.group_type for g in c.list_groups() if g.group_id == G] == ["classic"]


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades(
    open_store: Callable[..., Store], clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("a", 4)
    c = GroupCoordinator.load(store, CONFIG)
    pending = _join(c, "")
    for _ in range(2):
        clock.advance(3_001)
        c.tick()
    m1 = pending.result().member_id
    whole = encode_assignment(Assignment(0, (("a", (0, 1, 2, 3)),)))
    assert c.sync_group(G, 1, m1, {m1: whole}).result().error_code == NONE
    # A static consumer-protocol member joins (the group is upgraded) and gets its share.
    r = c.consumer_group_heartbeat(
        G, "", 0, instance_id="box", rebalance_timeout_ms=30_000, subscribed_topic_names=["a"],
        owned=[],
    )  # fmt: skip
    assert r.error_code == NONE
    assert _join(c, m1).result().error_code == NONE  # the classic member hands it over
    r = c.consumer_group_heartbeat(G, r.member_id, r.member_epoch, instance_id="box", owned=[])
    assert r.assignment
    # A classic process with the same instance id replaces it: the group is classic again,
    # Stable, and the newcomer gets the partitions of the member it replaced.
    static = c.consumer.groups[G].static_member("box")
    assert static is not None
    target = c.consumer.groups[G].target[static.member_id]
    joined = c.join_group(
        G, "", "box", "kp", "/h", "consumer", [("range", SUB)], 30_000, 60_000, True
    ).result()
    assert joined.error_code == NONE
    assert [(g.group_type, g.state) for g in c.list_groups() if g.group_id == G] == [
        ("classic", "Stable")
    ]
    synced = c.sync_group(G, joined.generation_id, joined.member_id, group_instance_id="box")
    assert synced.result().error_code == NONE
    names = c.topic_names()
    assert _assigned(synced.result()) == {p for t, ps in target.items() for p in ps if names[t]}


# --- with real clients --------------------------------------------------------------------------
TOPIC = "migrate"
PARTITIONS = 4
SESSION_MS = 6000
HEARTBEAT_MS = 300
BROKER_CONFIG = {
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.session.timeout.ms": SESSION_MS,
}


class Ownership:
    """Every assignment and revocation the members' rebalance callbacks saw, in the order they
    ran; a partition must be revoked by its owner before another member is given it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []
        self.events: list[str] = []  # what a failure message shows (assignments, failed commits)
        self.start = time.monotonic()

    def note(self, member: str, event: str) -> None:
        with self.lock:
            self.events.append(f"{time.monotonic() - self.start:7.3f} {member}: {event}")

    def assigned(self, member: str, partitions: Iterable[int]) -> None:
        partitions = list(partitions)
        self.note(member, f"assigned {sorted(partitions)}")
        with self.lock:
            for p in partitions:
                other = self.owner.get(p)
                if other is not None and other != member:
                    self.violations.append(f"{member} got partition {p} still owned by {other}")
                self.owner[p] = member

    def revoked(self, member: str, partitions: Iterable[int]) -> None:
        partitions = list(partitions)
        self.note(member, f"revoked {sorted(partitions)}")
        with self.lock:
            for p in partitions:
                if self.owner.get(p) == member:
                    del self.owner[p]


class Member(threading.Thread):
    """A consumer polling in its own thread: kafka-python (classic protocol) or confluent-kafka
    with ``group.protocol=consumer``. It commits each record it reads, synchronously, and counts
    it as consumed once the commit succeeded."""

    def __init__(self, name: str, client: str, bootstrap: str, ownership: Ownership) -> None:
        super().__init__(name=name, daemon=True)
        self.client = client
        self.bootstrap = bootstrap
        self.ownership = ownership
        self.assignment: frozenset[int] | None = None
        self.consumed: list[tuple[int, int]] = []
        self.positions: dict[int, int] = {}  # librdkafka's fetch position per owned partition
        self.error: BaseException | None = None
        self._leave = threading.Event()

    def run(self) -> None:
        try:
            if self.client == "kafka-python":
                self._run_kafka_python()
            else:
                self._run_confluent()
        except BaseException as exc:
            self.error = exc

    def leave(self) -> None:
        self._leave.set()
        self.join(timeout=CLIENT_TIMEOUT_S)
        assert not self.is_alive(), f"{self.name} did not close"

    def _run_kafka_python(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata
        from kafka.errors import CommitFailedError, RebalanceInProgressError

        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.ownership.revoked(member.name, [tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.ownership.assigned(member.name, [tp.partition for tp in assigned])

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=G,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            request_timeout_ms=10_000,
        )
        consumer.subscribe([TOPIC], listener=Listener())
        try:
            while not self._leave.is_set():
                for tp, records in consumer.poll(timeout_ms=100, max_records=20).items():
                    for r in records:
                        try:
                            consumer.commit({tp: OffsetAndMetadata(r.offset + 1, "", -1)})
                        except (CommitFailedError, RebalanceInProgressError):
                            break  # not ours any more: its next owner reads it from the commit
                        self.consumed.append((r.partition, r.offset))
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()

    def _commit_classic(self, consumer: Any, message: Any) -> bool:
        """A classic member's commit fails while its group rebalances (its generation moves):
        the record then counts as not consumed, and is read again from where the member is
        (if it still owns the partition; see ``_rewind``) or from the commit by its next owner."""
        from confluent_kafka import KafkaError, KafkaException

        try:
            consumer.commit(message, asynchronous=False)
            return True
        except KafkaException as exc:
            if exc.args[0].code() not in (
                KafkaError.ILLEGAL_GENERATION,
                KafkaError.REBALANCE_IN_PROGRESS,
                KafkaError.UNKNOWN_MEMBER_ID,
            ):
                raise
            where = f"p{message.partition()}@{message.offset()}"
            self.ownership.note(self.name, f"commit {where} failed ({exc.args[0].name()})")
        return False

    def _rewind(self, consumer: Any, rewinds: dict[int, int]) -> None:
        """Seek back to each record whose commit failed, while the member still owns its
        partition. librdkafka may drop such a seek when the rebalance that failed the commit
        restarts the partition's fetcher (``Local: Outdated``), so a failed seek is tried again
        on the next poll, and records after it are ignored until it takes."""
        from confluent_kafka import KafkaException, TopicPartition

        owned = {tp.partition for tp in consumer.assignment()}
        for partition, offset in list(rewinds.items()):
            if partition not in owned:
                del rewinds[partition]  # its next owner reads it from the committed offset
                continue
            try:
                consumer.seek(TopicPartition(TOPIC, partition, offset))
            except KafkaException as exc:
                self.ownership.note(self.name, f"seek p{partition}@{offset} failed: {exc}")
                continue
            del rewinds[partition]
            self.ownership.note(self.name, f"sought back to p{partition}@{offset}")

    def _run_confluent(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        def on_assign(_: Any, partitions: Any) -> None:
            self.ownership.assigned(self.name, [tp.partition for tp in partitions])

        def on_revoke(_: Any, partitions: Any) -> None:
            self.ownership.revoked(self.name, [tp.partition for tp in partitions])

        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": G,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
        if self.client == "confluent-kafka-classic":
            # librdkafka's classic protocol, cooperative: it reports its owned partitions
            # (ConsumerProtocolSubscription v1+) and revokes only what it must.
            config.update(
                {
                    "group.protocol": "classic",
                    "partition.assignment.strategy": "cooperative-sticky",
                    "session.timeout.ms": SESSION_MS,
                    "heartbeat.interval.ms": HEARTBEAT_MS,
                }
            )
        consumer = Consumer(config)
        consumer.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        rewinds: dict[int, int] = {}  # partition -> a record to read again (its commit failed)
        try:
            while not self._leave.is_set():
                message = consumer.poll(0.1)
                if rewinds:
                    self._rewind(consumer, rewinds)
                if message is not None:
                    if message.error():
                        raise AssertionError(f"consumer error: {message.error()}")
                    if self.client == "confluent-kafka-classic":
                        if message.partition() in rewinds:
                            continue  # read again once the seek back to a failed commit takes
                        if not self._commit_classic(consumer, message):
                            rewinds[message.partition()] = message.offset()
                            self._rewind(consumer, rewinds)
                            continue
                    else:
                        commit(consumer, message)
                    self.consumed.append((message.partition(), message.offset()))
                assignment = consumer.assignment()
                self.assignment = frozenset(tp.partition for tp in assignment)
                with contextlib.suppress(KafkaException):
                    positions = consumer.position(assignment)
                    self.positions = {tp.partition: tp.offset for tp in positions}
        finally:
            consumer.close()


def _group_type(bootstrap: str) -> str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(timeout=CLIENT_TIMEOUT_S)
    [group] = [g for g in listed.valid if g.group_id == G]
    return str(group.type.name)


@pytest.mark.broker
@pytest.mark.timeout(120)
@pytest.mark.usefixtures("collect_client_garbage")
@needs_kafka_python
@needs_confluent
@pytest.mark.parametrize("classic_client", ["kafka-python", "confluent-kafka-classic"])
def test_clients_upgrade_and_downgrade_a_live_group(brokers: Brokers, classic_client: str) -> None:
    broker = brokers.start(config=BROKER_CONFIG)
    create_topic(broker, TOPIC, PARTITIONS)
    stop = threading.Event()
    produced = dict.fromkeys(range(PARTITIONS), 0)

    def produce() -> None:
        while not stop.is_set():
            for p in range(PARTITIONS):
                append(broker, TOPIC, p, [(b"k", b"v%d" % produced[p])])
                produced[p] += 1
            time.sleep(0.05)

    ownership = Ownership()
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    classic = [Member(f"classic-{i}", classic_client, broker.bootstrap, ownership) for i in (1, 2)]
    members = list(classic)
    new: Member | None = None
    try:
        for m in classic:
            m.start()
        assert sorted(map(len, wait_for_exact_cover(members, PARTITIONS).values())) == [2, 2]
        assert _group_type(broker.bootstrap) == "CLASSIC"

        # A consumer-protocol member joins the live classic group: it becomes a consumer group.
        new = Member("consumer", "confluent-kafka", broker.bootstrap, ownership)
        new.start()
        members.append(new)
        three = wait_for_exact_cover(members, PARTITIONS)
        assert sorted(map(len, three.values())) == [1, 1, 2], three
        assert _group_type(broker.bootstrap) == "CONSUMER"
        # The classic members keep consuming.
        counts = [len(m.consumed) for m in classic]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(len(m.consumed) > n for m, n in zip(classic, counts, strict=True)):
                break
            time.sleep(0.1)
        assert all(len(m.consumed) > n for m, n in zip(classic, counts, strict=True))

        # The consumer-protocol member leaves: the group is classic again.
        members.remove(new)
        new.leave()
        assert sorted(map(len, wait_for_exact_cover(members, PARTITIONS).values())) == [2, 2]
        assert _group_type(broker.bootstrap) == "CLASSIC"

        stop.set()
        producer.join()
        everyone = [*classic, new]
        expected = {(p, o) for p in produced for o in range(produced[p])}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if {r for m in everyone for r in m.consumed} >= expected:
                break
            time.sleep(0.1)
        consumed = [r for m in everyone for r in m.consumed]
        assert len(consumed) == len(set(consumed)), "a record was consumed twice"
        missing = sorted(expected - set(consumed))
        history = "\n".join(ownership.events)
        print(history)  # shown with -rP: the failed commits and seeks a passing run went through
        where = {m.name: (sorted(m.assignment or ()), m.positions) for m in classic}
        assert not missing, f"never consumed: {missing}; members now {where}; history:\n{history}"
        assert set(consumed) == expected
        assert not ownership.violations, ownership.violations
    finally:
        stop.set()
        for m in members:
            if m.is_alive():
                m.leave()
