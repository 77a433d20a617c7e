"""KIP-848 consumer groups without a socket: the assignors, the reconciliation state machine, and
the coordinator's ConsumerGroupHeartbeat, OffsetCommit, ListGroups, DeleteGroups and the rules
for classic and consumer groups of the same id, driven with the manual clock."""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.broker.coordinator.assignors import (
    MemberSpec,
    TopicMetadata,
    range_assign,
    uniform_assign,
)
from compactlog.broker.coordinator.consumer_group import (
    ConsumerGroupMember,
    MemberState,
    reconcile,
)
from compactlog.broker.coordinator.consumer_groups import HeartbeatResult
from compactlog.broker.coordinator.service import GroupCoordinator
from compactlog.errors import (
    FENCED_INSTANCE_ID,
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    GROUP_SUBSCRIBED_TO_TOPIC,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_REGULAR_EXPRESSION,
    INVALID_REQUEST,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_ASSIGNOR,
    CorruptRecordError,
    StorageError,
)
from compactlog.storage.store import Store
from tests.conftest import ManualClock

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
TOPICS = {"a": TopicMetadata(T1, "a", 6), "b": TopicMetadata(T2, "b", 3)}
GROUP = "g848"


def _count(assignment: dict[str, Any]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in tps.values()) for m, tps in assignment.items()}


def _all(assignment: dict[str, Any]) -> list[tuple[uuid.UUID, int]]:
    return sorted((t, p) for tps in assignment.values() for t, ps in tps.items() for p in ps)


# --- assignors ------------------------------------------------------------------------------
def test_uniform_balances_and_covers_every_partition() -> None:
    members = {m: MemberSpec(frozenset({"a"}), {}) for m in ("m1", "m2", "m3", "m4")}
    out = uniform_assign(members, TOPICS)
    assert _all(out) == [(T1, p) for p in range(6)]
    assert sorted(_count(out).values()) == [1, 1, 2, 2]


def test_uniform_is_sticky() -> None:
    first = uniform_assign({m: MemberSpec(frozenset({"a"}), {}) for m in ("m1", "m2")}, TOPICS)
    # m3 joins: m1 and m2 each give up exactly one partition and keep the rest.
    second = uniform_assign(
        {
            "m1": MemberSpec(frozenset({"a"}), first["m1"]),
            "m2": MemberSpec(frozenset({"a"}), first["m2"]),
            "m3": MemberSpec(frozenset({"a"}), {}),
        },
        TOPICS,
    )
    assert _count(second) == {"m1": 2, "m2": 2, "m3": 2}
    assert second["m1"][T1] <= first["m1"][T1]
    assert second["m2"][T1] <= first["m2"][T1]


def test_uniform_heterogeneous_subscriptions() -> None:
    members = {
        "m1": MemberSpec(frozenset({"a", "b"}), {}),
        "m2": MemberSpec(frozenset({"a"}), {}),
        "m3": MemberSpec(frozenset({"b", "missing"}), {}),
    }
    out = uniform_assign(members, TOPICS)
    assert _all(out) == sorted([(T1, p) for p in range(6)] + [(T2, p) for p in range(3)])
    assert T2 not in out["m2"]
    assert T1 not in out["m3"]
    assert sorted(_count(out).values()) == [3, 3, 3]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["m1", "m2", "m3", "m4", "m5"]), min_size=1, unique=True),
    st.integers(min_value=1, max_value=20),
)
def test_uniform_property_homogeneous(member_ids: list[str], partitions: int) -> None:
    topics = {"a": TopicMetadata(T1, "a", partitions)}
    out = uniform_assign({m: MemberSpec(frozenset({"a"}), {}) for m in member_ids}, topics)
    assert _all(out) == [(T1, p) for p in range(partitions)]
    counts = _count(out).values()
    assert max(counts) - min(counts) <= 1


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["m1", "m2", "m3", "m4"]),
        st.frozensets(st.sampled_from(["a", "b", "c"]), min_size=1),
        min_size=1,
    )
)
def test_uniform_property_heterogeneous(subscriptions: dict[str, frozenset[str]]) -> None:
    topics = {**TOPICS, "c": TopicMetadata(uuid.UUID(int=3), "c", 4)}
    out = uniform_assign({m: MemberSpec(s, {}) for m, s in subscriptions.items()}, topics)
    wanted = {t for s in subscriptions.values() for t in s}
    assert _all(out) == sorted(
        (topics[t].topic_id, p) for t in wanted for p in range(topics[t].partitions)
    )
    for m, assigned in out.items():
        names = {n for n, meta in topics.items() if meta.topic_id in assigned}
        assert names <= subscriptions[m]


def test_uniform_is_quick_for_a_large_group() -> None:
    """3000 partitions and 30 members, one of which owned everything: the assignor runs in the
    broker's event loop, so it must not take seconds (about 10 ms here; 2 s is the margin)."""
    topics = {f"t{i}": TopicMetadata(uuid.UUID(int=i + 1), f"t{i}", 300) for i in range(10)}
    everything = {m.topic_id: frozenset(range(300)) for m in topics.values()}
    members = {
        f"m{j:02d}": MemberSpec(frozenset(topics), everything if j == 0 else {}) for j in range(30)
    }
    started = time.perf_counter()
    out = uniform_assign(members, topics)
    assert time.perf_counter() - started < 2.0
    assert set(_count(out).values()) == {100}
    # Sticky: the old owner keeps 100 of its partitions (the lowest), none moves to it.
    assert out["m00"] == {uuid.UUID(int=1): frozenset(range(100))}


def test_range_gives_contiguous_ranges_per_topic() -> None:
    members = {m: MemberSpec(frozenset({"a", "b"}), {}) for m in ("m2", "m1", "m3", "m4")}
    out = range_assign(members, TOPICS)
    assert out["m1"] == {T1: frozenset({0, 1}), T2: frozenset({0})}
    assert out["m2"] == {T1: frozenset({2, 3}), T2: frozenset({1})}
    assert out["m3"] == {T1: frozenset({4}), T2: frozenset({2})}
    assert out["m4"] == {T1: frozenset({5})}


# --- reconciliation -------------------------------------------------------------------------
def test_reconcile_revokes_before_taking_new_epoch() -> None:
    member = ConsumerGroupMember("m1", member_epoch=1, assigned={T1: frozenset({0, 1, 2})})
    step = reconcile(member, 2, {T1: frozenset({0, 1})}, {}, None)
    assert step.state == MemberState.UNREVOKED_PARTITIONS
    assert step.member_epoch == 1
    assert step.assigned == {T1: frozenset({0, 1})}
    assert step.pending_revocation == {T1: frozenset({2})}
    # Still reported as owned: nothing changes.
    assert reconcile(step, 2, {T1: frozenset({0, 1})}, {}, [(T1, [0, 1, 2])]) == step
    # Revoked: the new epoch.
    done = reconcile(step, 2, {T1: frozenset({0, 1})}, {}, [(T1, [0, 1])])
    assert (done.state, done.member_epoch, done.previous_member_epoch) == (
        MemberState.STABLE,
        2,
        1,
    )
    assert done.pending_revocation == {}


def test_reconcile_holds_back_partitions_others_still_own() -> None:
    member = ConsumerGroupMember("m2", member_epoch=1)
    step = reconcile(member, 2, {T1: frozenset({2, 3})}, {(T1, 2): "m1"}, [])
    assert step.state == MemberState.UNRELEASED_PARTITIONS
    assert step.member_epoch == 2
    assert step.assigned == {T1: frozenset({3})}
    released = reconcile(step, 2, {T1: frozenset({2, 3})}, {}, [(T1, [3])])
    assert released.state == MemberState.STABLE
    assert released.assigned == {T1: frozenset({2, 3})}


# --- the coordinator ------------------------------------------------------------------------
class Harness:
    def __init__(self, open_store: Callable[..., Store], clock: ManualClock, **config: Any):
        self.open_store = open_store
        self.clock = clock
        self.config = {"offsets.topic.num.partitions": 3, **config}
        self.store = open_store()
        self.store.create_topic("a", 6)
        self.store.create_topic("b", 3)
        self.coord = GroupCoordinator.load(self.store, self.config)
        self.topic_a = next(t for t, n in self.coord.topic_names().items() if n == "a")

    def restart(self) -> None:
        self.store.close()
        self.store = self.open_store()
        self.coord = GroupCoordinator.load(self.store, self.config)

    def join(self, member: str, topics: tuple[str, ...] = ("a",), **kw: Any) -> HeartbeatResult:
        return self.coord.consumer_group_heartbeat(
            GROUP,
            member,
            0,
            rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 30_000),
            subscribed_topic_names=list(topics),
            owned=[],
            **kw,
        )

    def beat(self, member: str, epoch: int, owned: Any = None, **kw: Any) -> HeartbeatResult:
        return self.coord.consumer_group_heartbeat(GROUP, member, epoch, owned=owned, **kw)

    def owned(self, result: HeartbeatResult) -> list[tuple[uuid.UUID, list[int]]]:
        assert result.assignment is not None
        return [(t, sorted(ps)) for t, ps in result.assignment.items()]


@pytest.fixture
def h(open_store: Callable[..., Store], clock: ManualClock) -> Iterator[Harness]:
    harness = Harness(open_store, clock, **{"group.consumer.session.timeout.ms": 45_000})
    yield harness


def partitions(result: HeartbeatResult, topic: uuid.UUID) -> set[int]:
    assert result.assignment is not None
    return set(result.assignment.get(topic, ()))


def test_two_members_rebalance_with_revocation_first(h: Harness) -> None:
    a = h.topic_a
    r1 = h.join("m1")
    assert (r1.error_code, r1.member_epoch, r1.heartbeat_interval_ms) == (NONE, 2, 5000)
    assert partitions(r1, a) == set(range(6))
    r2 = h.join("m2")
    assert r2.error_code == NONE and r2.member_epoch == 3
    # m1 still owns everything: m2 gets nothing yet.
    assert partitions(r2, a) == set()
    # m1's next heartbeat: keep three, revoke three, stay at epoch 2.
    r1 = h.beat("m1", 2, h.owned(r1))
    assert r1.member_epoch == 2
    kept = partitions(r1, a)
    assert len(kept) == 3
    # Before m1 confirms the revocation, m2 still gets nothing.
    r2b = h.beat("m2", 3, [])
    assert r2b.error_code == NONE and r2b.assignment is None
    # m1 confirms: epoch 3; then m2 gets the three released partitions.
    r1 = h.beat("m1", 2, h.owned(r1))
    assert (r1.error_code, r1.member_epoch) == (NONE, 3)
    r2c = h.beat("m2", 3, [])
    assert partitions(r2c, a) == set(range(6)) - kept
    [described] = h.coord.consumer_group_describe([GROUP])
    assert described.state == "Stable"
    assert (described.group_epoch, described.assignment_epoch) == (3, 3)
    assert described.assignor_name == "uniform"


def test_leave_and_session_timeout_free_partitions(h: Harness, clock: ManualClock) -> None:
    a = h.topic_a
    h.join("m1")
    h.join("m2")
    r1 = h.beat("m1", 2, [(a, list(range(6)))])
    kept = h.owned(r1)
    r1 = h.beat("m1", 2, kept)
    assert r1.member_epoch == 3
    h.beat("m2", 3, [])
    # m2 leaves: m1 gets everything at the next epoch.
    left = h.beat("m2", -1)
    assert (left.error_code, left.member_epoch) == (NONE, -1)
    r1 = h.beat("m1", 3, kept)
    assert (r1.member_epoch, partitions(r1, a)) == (4, set(range(6)))
    # m3 joins and goes silent: fenced after the session timeout.
    h.join("m3")
    clock.advance(44_000)
    r1 = h.beat("m1", 4, h.owned(r1))
    clock.advance(2_000)
    h.coord.tick()
    [described] = h.coord.consumer_group_describe([GROUP])
    assert [m.member.member_id for m in described.members] == ["m1"]
    assert h.beat("m3", 5).error_code == UNKNOWN_MEMBER_ID


def test_revocation_timeout_fences_the_member(h: Harness, clock: ManualClock) -> None:
    h.join("m1", rebalance_timeout_ms=10_000)
    h.join("m2")
    r1 = h.beat("m1", 2, None)
    assert r1.member_epoch == 2 and len(partitions(r1, h.topic_a)) == 3
    clock.advance(10_001)
    h.coord.tick()
    assert h.beat("m1", 2).error_code == UNKNOWN_MEMBER_ID
    r2 = h.beat("m2", 3, [])
    assert partitions(r2, h.topic_a) == set(range(6))


def test_fencing_and_request_errors(h: Harness) -> None:
    h.join("m1")
    assert h.beat("m1", 5).error_code == FENCED_MEMBER_EPOCH
    assert h.beat("nobody", 2).error_code == UNKNOWN_MEMBER_ID
    bad = h.coord.consumer_group_heartbeat(GROUP, "m9", 0, subscribed_topic_names=["a"], owned=[])
    assert (bad.error_code, bad.error_message) == (
        INVALID_REQUEST,
        "RebalanceTimeoutMs must be provided in first request.",
    )
    unsubscribed = h.coord.consumer_group_heartbeat(
        GROUP, "m9", 0, rebalance_timeout_ms=1, owned=[]
    )
    assert unsubscribed.error_message == (
        "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
    )
    assert h.coord.consumer_group_heartbeat("", "m", 0).error_code == INVALID_REQUEST
    regex = h.coord.consumer_group_heartbeat(
        GROUP, "m9", 0, rebalance_timeout_ms=1, subscribed_topic_regex="a(", owned=[]
    )
    assert regex.error_code == INVALID_REGULAR_EXPRESSION
    assert (regex.error_message or "").startswith(
        "SubscribedTopicRegex `a(` is not a valid regular expression: "
    )
    no_instance = h.coord.consumer_group_heartbeat(GROUP, "m1", -2)
    assert (no_instance.error_code, no_instance.error_message) == (
        INVALID_REQUEST,
        "InstanceId can't be null.",
    )
    wrong = h.join("m9", server_assignor="sticky")
    assert (wrong.error_code, wrong.error_message) == (
        UNSUPPORTED_ASSIGNOR,
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
    )


def test_range_assignor_chosen_by_members(h: Harness) -> None:
    h.join("m1", ("a", "b"), server_assignor="range")
    h.join("m2", ("a", "b"), server_assignor="range")
    [described] = h.coord.consumer_group_describe([GROUP])
    assert described.assignor_name == "range"
    targets = {m.member.member_id: m.target for m in described.members}
    assert targets["m1"][h.topic_a] == frozenset({0, 1, 2})
    assert targets["m2"][h.topic_a] == frozenset({3, 4, 5})


def test_group_max_size(open_store: Callable[..., Store], clock: ManualClock) -> None:
    h = Harness(open_store, clock, **{"group.consumer.max.size": 1})
    assert h.join("m1").error_code == NONE
    assert h.join("m2").error_code == GROUP_MAX_SIZE_REACHED


def test_offset_commit_checks_member_epoch_and_survives_restart(h: Harness) -> None:
    r1 = h.join("m1")
    assert h.coord.commit_offsets(GROUP, 2, "m1", -1, [("a", 0, 42)])[0].error_code == NONE
    assert (
        h.coord.commit_offsets(GROUP, 1, "m1", -1, [("a", 0, 43)])[0].error_code
        == STALE_MEMBER_EPOCH
    )
    assert (
        h.coord.commit_offsets(GROUP, 2, "zz", -1, [("a", 0, 43)])[0].error_code
        == UNKNOWN_MEMBER_ID
    )
    assert (
        h.coord.commit_offsets(GROUP, -1, "", -1, [("a", 0, 43)])[0].error_code == UNKNOWN_MEMBER_ID
    )
    assert h.coord.fetch_offsets(GROUP, [("a", 0)]).partitions[0].offset == 42
    assert h.coord.groups == {}  # no classic group was made for the commit
    listed = h.coord.list_groups()
    assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in listed] == [
        (GROUP, "consumer", "Stable", "consumer")
    ]
    h.restart()
    assert h.coord.fetch_offsets(GROUP, [("a", 0)]).partitions[0].offset == 42
    # The group and its member were loaded from __consumer_offsets: the member carries on.
    beat = h.beat("m1", 2, h.owned(r1))
    assert (beat.error_code, beat.member_epoch, beat.assignment) == (NONE, 2, None)
    assert h.coord.commit_offsets(GROUP, 2, "m1", -1, [("a", 0, 44)])[0].error_code == NONE
    assert [g.group_type for g in h.coord.list_groups()] == ["consumer"]
    assert h.coord.groups == {}


def test_group_survives_restart_mid_rebalance(h: Harness, clock: ManualClock) -> None:
    a = h.topic_a
    h.join("m1", server_assignor="range")
    h.join("m2", server_assignor="range")
    r1 = h.beat("m1", 2, [(a, list(range(6)))])
    assert (r1.member_epoch, partitions(r1, a)) == (2, {0, 1, 2})  # revoking 3, 4, 5
    [before] = h.coord.consumer_group_describe([GROUP])
    h.restart()
    [after] = h.coord.consumer_group_describe([GROUP])
    assert after == before
    # m2 still waits for m1's revocation; m1 finishes it; m2 gets its partitions.
    assert h.beat("m2", 3, []).assignment is None
    assert h.beat("m1", 2, [(a, [0, 1, 2])]).member_epoch == 3
    assert partitions(h.beat("m2", 3, []), a) == {3, 4, 5}
    # Members that do not come back within the session timeout are fenced.
    clock.advance(46_000)
    h.coord.tick()
    assert h.coord.consumer_group_describe([GROUP])[0].state == "Empty"
    h.restart()
    assert h.coord.consumer_group_describe([GROUP])[0].state == "Empty"
    assert h.coord.delete_groups([GROUP])[0].error_code == NONE
    h.restart()
    assert h.coord.consumer_group_describe([GROUP])[0].error_code == GROUP_ID_NOT_FOUND


def test_delete_group_and_offsets(h: Harness) -> None:
    h.join("m1")
    h.coord.commit_offsets(GROUP, 2, "m1", -1, [("a", 0, 1), ("b", 0, 2)])
    assert h.coord.delete_groups([GROUP])[0].error_code == NON_EMPTY_GROUP
    error, results = h.coord.delete_offsets(GROUP, [("a", 0), ("b", 0)])
    assert error == NONE
    assert [r.error_code for r in results] == [GROUP_SUBSCRIBED_TO_TOPIC, NONE]
    assert h.coord.fetch_offsets(GROUP, [("b", 0)]).partitions[0].offset == -1
    h.beat("m1", -1)
    assert h.coord.delete_groups([GROUP])[0].error_code == NONE
    assert h.coord.list_groups() == []
    h.restart()
    assert h.coord.fetch_offsets(GROUP, [("a", 0)]).partitions[0].offset == -1


def test_classic_and_consumer_groups_of_one_id(
    open_store: Callable[..., Store], clock: ManualClock
) -> None:
    # With the migration disabled, a classic group with a member refuses consumer-protocol
    # members (tests/broker/test_groups_migration.py has the default policy).
    h = Harness(open_store, clock, **{"group.consumer.migration.policy": "disabled"})
    h.coord.join_group(
        "classic", "", None, "c", "/h", "consumer", [("range", b"")], 10_000, 10_000, False
    )
    refused = h.coord.consumer_group_heartbeat(
        "classic", "m1", 0, rebalance_timeout_ms=1, subscribed_topic_names=["a"], owned=[]
    )
    assert refused.error_code == GROUP_ID_NOT_FOUND
    assert (refused.error_message or "").startswith(
        "Cannot upgrade classic group classic to consumer group because online upgrade is disabled."
    )
    # A consumer group with a member refuses classic JoinGroups.
    h.join("m1")
    pending = h.coord.join_group(
        GROUP, "", None, "c", "/h", "consumer", [("range", b"")], 10_000, 10_000, True
    )
    assert pending.result().error_code == INCONSISTENT_GROUP_PROTOCOL
    [dead] = h.coord.describe_groups([GROUP])
    assert dead.state == "Dead"
    # Once empty, a classic JoinGroup turns it into a classic group, offsets kept.
    h.coord.commit_offsets(GROUP, 2, "m1", -1, [("a", 0, 7)])
    h.beat("m1", -1)
    joined = h.coord.join_group(
        GROUP, "", None, "c", "/h", "consumer", [("range", b"")], 10_000, 10_000, True
    )
    assert joined.result().error_code != INCONSISTENT_GROUP_PROTOCOL
    assert h.coord.fetch_offsets(GROUP, [("a", 0)]).partitions[0].offset == 7
    assert [g.group_type for g in h.coord.list_groups() if g.group_id == GROUP] == ["classic"]


def test_a_corrupt_consumer_group_record_is_named(
    open_store: Callable[..., Store], clock: ManualClock
) -> None:
    h = Harness(open_store, clock)
    h.join("m1")
    h.store.append(
        "__consumer_offsets",
        h.coord.partition_for(GROUP),
        [(struct.pack(">hh", 3, len(GROUP)) + GROUP.encode(), b"\x00\x00\x00")],
    )
    with pytest.raises(CorruptRecordError, match=r"__consumer_offsets-\d+ offset \d+: .*epoch"):
        h.restart()


def test_static_member_leaves_for_a_while_and_is_replaced(h: Harness, clock: ManualClock) -> None:
    a = h.topic_a
    h.join("s1", instance_id="box-1")
    h.join("m2")
    r = h.beat("s1", 2, [(a, list(range(6)))])
    r = h.beat("s1", 2, h.owned(r))
    assert r.member_epoch == 3
    assert len(partitions(h.beat("m2", 3, []), a)) == 3
    # Another process with the same instance id while box-1 is live: refused.
    busy = h.join("s9", instance_id="box-1")
    assert (busy.error_code, busy.error_message) == (
        UNRELEASED_INSTANCE_ID,
        "Static member s9 with instance id box-1 cannot join the group because the instance id "
        "is owned by s1 member.",
    )
    [before] = h.coord.consumer_group_describe([GROUP])
    held = next(m.member.assigned for m in before.members if m.member.member_id == "s1")
    # box-1 leaves for a while (-2): it keeps its partitions, nobody else gets them.
    left = h.beat("s1", -2, instance_id="box-1")
    assert (left.error_code, left.member_epoch) == (NONE, -2)
    assert h.beat("m2", 3, None).assignment is None
    # It comes back under a new member id: same partitions, no new group epoch.
    back = h.join("s2", instance_id="box-1")
    assert back.error_code == NONE and back.assignment == held
    [after] = h.coord.consumer_group_describe([GROUP])
    assert after.group_epoch == before.group_epoch
    assert sorted(m.member.member_id for m in after.members) == ["m2", "s2"]
    old = h.beat("s1", 3, instance_id="box-1")
    assert (old.error_code, old.error_message) == (
        FENCED_INSTANCE_ID,
        "Static member s1 with instance id box-1 was fenced by member s2.",
    )
    # Gone for longer than the session timeout: fenced, and its partitions move.
    assert h.beat("s2", -2, instance_id="box-1").error_code == NONE
    clock.advance(46_000)
    h.coord.tick()
    assert h.join("s3", instance_id="box-1").error_code == NONE
    h.restart()
    [loaded] = h.coord.consumer_group_describe([GROUP])
    assert {m.member.member_id: m.member.instance_id for m in loaded.members} == {"s3": "box-1"}


def test_regex_subscription_follows_the_topics(h: Harness) -> None:
    r = h.coord.consumer_group_heartbeat(
        GROUP, "m1", 0, rebalance_timeout_ms=1000, subscribed_topic_names=[],
        subscribed_topic_regex="a|b.*", owned=[],
    )  # fmt: skip
    names = h.coord.topic_names()
    assert r.assignment is not None
    assert {names[t]: len(ps) for t, ps in r.assignment.items()} == {"a": 6, "b": 3}
    # A topic created later that matches joins the subscription at the next heartbeat; one
    # that the pattern matches only in part ("za") does not: the whole name must match.
    h.store.create_topic("bz", 2)
    h.store.create_topic("za", 2)
    r = h.beat("m1", 2, h.owned(r))
    assert r.member_epoch == 3 and r.assignment is not None
    names = h.coord.topic_names()
    assert {names[t]: len(ps) for t, ps in r.assignment.items()} == {"a": 6, "b": 3, "bz": 2}
    [described] = h.coord.consumer_group_describe([GROUP])
    assert described.members[0].member.subscribed_topic_regex == "a|b.*"


def test_consumer_group_offsets_expire_unless_subscribed(
    open_store: Callable[..., Store], clock: ManualClock
) -> None:
    h = Harness(
        open_store,
        clock,
        **{
            "offsets.retention.minutes": 1,
            "offsets.retention.check.interval.ms": 1000,
            "group.consumer.session.timeout.ms": 600_000,
        },
    )
    r = h.join("m1")
    h.coord.commit_offsets(GROUP, 2, "m1", -1, [("a", 0, 5), ("b", 0, 6)])
    clock.advance(61_000)
    assert h.beat("m1", 2, h.owned(r)).error_code == NONE
    h.coord.tick()
    # "b" is no member's topic: its offset expired; "a" is subscribed: kept.
    fetched = h.coord.fetch_offsets(GROUP, [("a", 0), ("b", 0)]).partitions
    assert [p.offset for p in fetched] == [5, -1]
    h.beat("m1", -1)
    clock.advance(61_000)
    h.coord.tick()
    # Empty and without offsets: the group is deleted, in __consumer_offsets too.
    assert h.coord.consumer_group_describe([GROUP])[0].error_code == GROUP_ID_NOT_FOUND
    h.restart()
    assert h.coord.consumer_group_describe([GROUP])[0].error_code == GROUP_ID_NOT_FOUND
    assert h.coord.list_groups() == []


def test_a_failed_write_changes_nothing(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    h.join("m1")
    [before] = h.coord.consumer_group_describe([GROUP])

    def broken(*args: Any, **kwargs: Any) -> int:
        raise StorageError("disk on fire")

    monkeypatch.setattr(h.store, "append", broken)
    assert h.join("m2").error_code == NOT_COORDINATOR
    assert h.beat("m1", -1).error_code == NOT_COORDINATOR
    assert h.coord.consumer_group_describe([GROUP]) == [before]
    monkeypatch.undo()
    assert h.join("m2").error_code == NONE
