"""The classic group coordinator: join, sync, heartbeat, leave, commits, expiry, restarts.

Every test drives :class:`GroupCoordinator` with the manual clock: time only moves when a test
moves it, and :meth:`GroupCoordinator.tick` (or the next request) runs what became due.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from compactlog.broker.coordinator.api import JoinGroupResult, MemberIdentity, OffsetCommitPartition
from compactlog.broker.coordinator.config import GroupCoordinatorConfig
from compactlog.broker.coordinator.delayed import Pending
from compactlog.broker.coordinator.offsets_topic import OFFSETS_TOPIC
from compactlog.broker.coordinator.service import GroupCoordinator
from compactlog.errors import (
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    StorageError,
)
from compactlog.storage.store import Store
from tests.conftest import ManualClock

StoreFactory = Callable[..., Store]

SESSION = 10_000
REBALANCE = 30_000
INITIAL_DELAY = 3000
GROUP = "my-group"
# Three partitions instead of Kafka's 50 keep these tests quick; placement has its own tests.
SMALL_TOPIC = {"offsets.topic.num.partitions": 3}


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


RANGE = [("range", subscription("t"))]


class Harness:
    """A coordinator on a store, with the request shapes the tests repeat."""

    def __init__(self, open_store: StoreFactory, clock: ManualClock, **config: Any) -> None:
        self.open_store = open_store
        self.clock = clock
        self.config = {**SMALL_TOPIC, **config}
        self.store = open_store()
        self.coord = GroupCoordinator.load(self.store, self.config)

    def restart(self) -> GroupCoordinator:
        self.store.close()
        self.store = self.open_store()
        self.coord = GroupCoordinator.load(self.store, self.config)
        return self.coord

    def join(
        self,
        member_id: str = "",
        client_id: str = "client",
        protocols: Sequence[tuple[str, bytes]] = tuple(RANGE),
        *,
        group: str = GROUP,
        instance: str | None = None,
        protocol_type: str = "consumer",
        session: int = SESSION,
        rebalance: int = REBALANCE,
        require_known_member_id: bool = False,
        skip: bool = False,
    ) -> Pending[JoinGroupResult]:
        return self.coord.join_group(
            group,
            member_id,
            instance,
            client_id,
            "/127.0.0.1",
            protocol_type,
            protocols,
            session,
            rebalance,
            require_known_member_id,
            supports_skip_assignment=skip,
        )

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.coord.tick()

    def run_until(self, *pending: Pending[Any], step: int = 100, limit: int = 600_000) -> None:
        waited = 0
        while not all(p.done for p in pending):
            assert waited < limit, "the responses never came"
            self.advance(step)
            waited += step

    def form(self, n: int, **join_args: Any) -> list[JoinGroupResult]:
        """``n`` members join and sync; returns their JoinGroup results (leader first)."""
        joins = [self.join(client_id=f"c{i}", **join_args) for i in range(n)]
        self.run_until(*joins)
        results = [j.result() for j in joins]
        assert all(r.error_code == NONE for r in results)
        leader = results[0]
        assert leader.leader == leader.member_id
        syncs = [self.coord.sync_group(GROUP, r.generation_id, r.member_id) for r in results[1:]]
        assignment = {r.member_id: f"assignment-{r.member_id}".encode() for r in results}
        syncs.insert(
            0, self.coord.sync_group(GROUP, leader.generation_id, leader.member_id, assignment)
        )
        assert all(s.done and s.result().error_code == NONE for s in syncs)
        return results

    def state(self, group: str = GROUP) -> str:
        return self.coord.describe_groups([group])[0].state


@pytest.fixture
def h(open_store: StoreFactory, clock: ManualClock) -> Harness:
    return Harness(open_store, clock)


# --- joining ---------------------------------------------------------------------------------
def test_members_join_one_generation_and_the_leader_gets_every_member(h: Harness) -> None:
    joins = [
        h.join(client_id=f"c{i}", protocols=[("range", f"sub-{i}".encode())]) for i in range(3)
    ]
    assert not any(j.done for j in joins)  # a new group waits group.initial.rebalance.delay.ms
    assert h.state() == "PreparingRebalance"
    h.run_until(*joins)
    results = [j.result() for j in joins]
    assert {r.error_code for r in results} == {NONE}
    assert {r.generation_id for r in results} == {1}
    assert {r.protocol_name for r in results} == {"range"}
    assert {r.protocol_type for r in results} == {"consumer"}
    leader = results[0].member_id
    assert {r.leader for r in results} == {leader}
    assert [(m.member_id, m.metadata) for m in results[0].members] == [
        (r.member_id, f"sub-{i}".encode()) for i, r in enumerate(results)
    ]
    assert results[1].members == () and results[2].members == ()
    assert len({r.member_id for r in results}) == 3
    assert h.state() == "CompletingRebalance"


def test_the_initial_delay_is_extended_by_newcomers_up_to_the_rebalance_timeout(
    h: Harness,
) -> None:
    first = h.join(client_id="a", rebalance=4500)
    h.advance(1000)
    second = h.join(client_id="b", rebalance=4500)
    h.advance(INITIAL_DELAY - 1000 - 1)
    assert not first.done
    h.advance(1)  # 3000 ms: a member was added meanwhile, so wait min(3000, 4500 - 3000) more
    assert not first.done
    h.advance(1499)
    assert not first.done
    h.advance(1)
    assert first.done and second.done
    assert first.result().generation_id == 1


def test_member_id_required_then_join_with_the_given_id(h: Harness) -> None:
    answer = h.join(client_id="kafka-python", require_known_member_id=True)
    result = answer.result()
    assert result.error_code == MEMBER_ID_REQUIRED
    assert re.fullmatch(
        r"kafka-python-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        result.member_id,
    )
    assert h.coord.describe_groups([GROUP])[0].members == ()  # pending, not yet a member
    rejoin = h.join(result.member_id, client_id="kafka-python", require_known_member_id=True)
    h.run_until(rejoin)
    assert rejoin.result().member_id == result.member_id
    assert rejoin.result().leader == result.member_id


def test_a_pending_member_that_never_rejoins_is_forgotten(h: Harness) -> None:
    result = h.join(require_known_member_id=True).result()
    h.advance(SESSION)
    late = h.join(result.member_id, require_known_member_id=True)
    assert late.result().error_code == UNKNOWN_MEMBER_ID


def test_join_with_an_unknown_member_id(h: Harness) -> None:
    assert h.join("ghost").result().error_code == UNKNOWN_MEMBER_ID  # no such group
    h.form(1)
    assert h.join("ghost").result().error_code == UNKNOWN_MEMBER_ID


@pytest.mark.parametrize(
    ("session", "expected"),
    [
        (5999, INVALID_SESSION_TIMEOUT),
        (6000, NONE),
        (1_800_000, NONE),
        (1_800_001, INVALID_SESSION_TIMEOUT),
    ],
)
def test_session_timeout_bounds(h: Harness, session: int, expected: int) -> None:
    answer = h.join(session=session, require_known_member_id=True)
    code = answer.result().error_code
    assert code == (MEMBER_ID_REQUIRED if expected == NONE else expected)


def test_an_empty_group_id_is_invalid(h: Harness) -> None:
    assert h.join(group="").result().error_code == INVALID_GROUP_ID
    assert h.coord.heartbeat("", 1, "m") == INVALID_GROUP_ID
    assert h.coord.sync_group("", 1, "m").result().error_code == INVALID_GROUP_ID
    assert h.coord.leave_group("", [("m", None)]).error_code == INVALID_GROUP_ID
    commit = h.coord.commit_offsets("", -1, "", -1, [("t", 0, 1)])
    assert [r.error_code for r in commit] == [INVALID_GROUP_ID]


def test_a_join_retried_during_completing_rebalance_gets_the_same_answer(h: Harness) -> None:
    joins = [h.join(client_id=f"c{i}") for i in range(2)]
    h.run_until(*joins)
    leader, follower = (j.result() for j in joins)
    assert h.join(leader.member_id).result() == leader  # a lost response, asked for again
    assert h.join(follower.member_id).result() == follower
    assert h.state() == "CompletingRebalance"


def test_group_max_size(open_store: StoreFactory, clock: ManualClock) -> None:
    h = Harness(open_store, clock, **{"group.max.size": 2})
    joins = [h.join(client_id=f"c{i}") for i in range(3)]
    assert joins[2].result().error_code == GROUP_MAX_SIZE_REACHED
    h.run_until(*joins[:2])
    assert len(joins[0].result().members) == 2


def test_parked_responses_reach_their_callbacks(h: Harness) -> None:
    seen: list[JoinGroupResult] = []
    joined = h.join()
    joined.add_done_callback(seen.append)
    with pytest.raises(RuntimeError, match="not ready"):
        joined.result()
    h.run_until(joined)
    assert seen == [joined.result()]
    joined.add_done_callback(seen.append)  # already done: called at once
    assert seen == [joined.result()] * 2


# --- protocols -------------------------------------------------------------------------------
def test_the_protocol_all_members_support_with_most_votes_wins(h: Harness) -> None:
    joins = [
        h.join(client_id="a", protocols=[("x", b"a"), ("y", b"a"), ("z", b"a")]),
        h.join(client_id="b", protocols=[("y", b"b"), ("x", b"b")]),
        # z is this member's favourite, but b does not support it: its vote goes to y.
        h.join(client_id="c", protocols=[("z", b"c"), ("y", b"c"), ("x", b"c")]),
    ]
    h.run_until(*joins)
    assert {j.result().protocol_name for j in joins} == {"y"}
    assert [m.metadata for m in joins[0].result().members] == [b"a", b"b", b"c"]


def test_inconsistent_group_protocol(h: Harness) -> None:
    assert h.join(protocol_type="").result().error_code == INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocols=[]).result().error_code == INCONSISTENT_GROUP_PROTOCOL
    h.form(1)
    other_type = h.join(client_id="connect", protocol_type="connect")
    assert other_type.result().error_code == INCONSISTENT_GROUP_PROTOCOL
    no_common = h.join(client_id="rr", protocols=[("roundrobin", b"")])
    assert no_common.result().error_code == INCONSISTENT_GROUP_PROTOCOL
    assert h.state() == "Stable"  # refused joins change nothing


# --- SyncGroup -------------------------------------------------------------------------------
def test_a_follower_sync_waits_for_the_leader(h: Harness) -> None:
    joins = [h.join(client_id=f"c{i}") for i in range(3)]
    h.run_until(*joins)
    leader, f1, f2 = (j.result() for j in joins)
    follower_sync = h.coord.sync_group(GROUP, 1, f1.member_id)
    assert not follower_sync.done
    h.advance(5000)
    assert not follower_sync.done
    leader_sync = h.coord.sync_group(
        GROUP, 1, leader.member_id, {f1.member_id: b"p0", leader.member_id: b"p1"}
    )
    assert leader_sync.result().assignment == b"p1"
    assert follower_sync.result().assignment == b"p0"
    assert follower_sync.result().protocol_name == "range"
    assert h.state() == "Stable"
    # A member the leader gave nothing gets an empty assignment; a sync in Stable is answered
    # at once with the stored assignment.
    assert h.coord.sync_group(GROUP, 1, f2.member_id).result().assignment == b""
    assert h.coord.sync_group(GROUP, 1, f1.member_id).result().assignment == b"p0"


def test_sync_errors(h: Harness) -> None:
    assert h.coord.sync_group(GROUP, 1, "m").result().error_code == UNKNOWN_MEMBER_ID
    leader, follower = h.form(2)
    assert h.coord.sync_group(GROUP, 1, "nobody").result().error_code == UNKNOWN_MEMBER_ID
    assert h.coord.sync_group(GROUP, 7, leader.member_id).result().error_code == ILLEGAL_GENERATION
    wrong = h.coord.sync_group(GROUP, 1, leader.member_id, protocol_name="roundrobin")
    assert wrong.result().error_code == INCONSISTENT_GROUP_PROTOCOL
    h.join(client_id="newcomer")  # the group prepares a rebalance
    assert (
        h.coord.sync_group(GROUP, 1, follower.member_id).result().error_code
        == REBALANCE_IN_PROGRESS
    )


def test_followers_parked_in_sync_learn_of_a_new_rebalance(h: Harness) -> None:
    joins = [h.join(client_id=f"c{i}") for i in range(2)]
    h.run_until(*joins)
    follower_sync = h.coord.sync_group(GROUP, 1, joins[1].result().member_id)
    h.join(client_id="late")  # CompletingRebalance -> PreparingRebalance
    assert follower_sync.result().error_code == REBALANCE_IN_PROGRESS


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout(h: Harness) -> None:
    # Sessions longer than the rebalance timeout: only the sync deadline can remove the leader.
    joins = [h.join(client_id=f"c{i}", session=60_000) for i in range(2)]
    h.run_until(*joins)
    leader, follower = (j.result() for j in joins)
    follower_sync = h.coord.sync_group(GROUP, 1, follower.member_id)
    h.advance(REBALANCE - 1)  # the leader never sends its SyncGroup
    assert not follower_sync.done
    h.advance(1)
    assert follower_sync.result().error_code == REBALANCE_IN_PROGRESS
    assert h.coord.heartbeat(GROUP, 1, leader.member_id) == UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat(GROUP, 1, follower.member_id) == REBALANCE_IN_PROGRESS


# --- rebalances ------------------------------------------------------------------------------
def test_a_member_joining_a_stable_group_makes_the_others_rejoin(h: Harness) -> None:
    a, b = h.form(2)
    assert h.coord.heartbeat(GROUP, 1, a.member_id) == NONE
    newcomer = h.join(client_id="c2")
    assert h.coord.heartbeat(GROUP, 1, a.member_id) == REBALANCE_IN_PROGRESS
    assert h.coord.heartbeat(GROUP, 1, b.member_id) == REBALANCE_IN_PROGRESS
    rejoin_a = h.join(a.member_id)
    assert not rejoin_a.done
    rejoin_b = h.join(b.member_id)
    # Everyone has rejoined: no initial delay for an existing group.
    assert rejoin_a.done and rejoin_b.done and newcomer.done
    results = [rejoin_a.result(), rejoin_b.result(), newcomer.result()]
    assert {r.generation_id for r in results} == {2}
    assert results[0].leader == a.member_id and len(results[0].members) == 3
    assert h.coord.heartbeat(GROUP, 1, a.member_id) == ILLEGAL_GENERATION
    assert h.coord.heartbeat(GROUP, 2, a.member_id) == NONE  # CompletingRebalance: 0


def test_members_that_do_not_rejoin_are_dropped_and_a_new_leader_elected(h: Harness) -> None:
    a, b = h.form(2)
    newcomer = h.join(client_id="c2")
    rejoin_b = h.join(b.member_id)
    for _ in range(REBALANCE // 3000 - 1):
        h.advance(3000)
        # The leader a heartbeats (so its session lives) but does not rejoin.
        assert h.coord.heartbeat(GROUP, 1, a.member_id) == REBALANCE_IN_PROGRESS
        assert not rejoin_b.done
    h.advance(3000)  # the rebalance timeout
    assert rejoin_b.done and newcomer.done
    result = rejoin_b.result()
    assert result.generation_id == 2
    assert result.leader == b.member_id  # a rejoined member takes over
    assert [m.member_id for m in result.members] == [b.member_id, newcomer.result().member_id]
    assert h.coord.heartbeat(GROUP, 2, a.member_id) == UNKNOWN_MEMBER_ID


def test_the_leader_rejoining_a_stable_group_starts_a_rebalance(h: Harness) -> None:
    a, b = h.form(2)
    again = h.join(a.member_id)
    assert not again.done
    assert h.coord.heartbeat(GROUP, 1, b.member_id) == REBALANCE_IN_PROGRESS


def test_a_follower_rejoining_a_stable_group_is_answered_at_once(h: Harness) -> None:
    a, b = h.form(2)
    again = h.join(b.member_id)
    assert again.done
    result = again.result()
    assert (result.error_code, result.generation_id, result.leader) == (NONE, 1, a.member_id)
    assert result.members == ()
    assert h.state() == "Stable"
    changed = h.join(b.member_id, protocols=[("range", subscription("t", "u"))])
    assert not changed.done and h.state() == "PreparingRebalance"


def test_session_expiry_removes_the_member_and_rebalances(h: Harness) -> None:
    a, b = h.form(2)
    for _ in range(3):  # a heartbeats every 3 s, b is silent
        h.advance(3000)
        assert h.coord.heartbeat(GROUP, 1, a.member_id) == NONE
    h.advance(1000)  # b's session ends 10 s after the SyncGroup
    assert h.state() == "PreparingRebalance"
    h.advance(2000)
    assert h.coord.heartbeat(GROUP, 1, a.member_id) == REBALANCE_IN_PROGRESS
    assert h.coord.heartbeat(GROUP, 1, b.member_id) == UNKNOWN_MEMBER_ID
    assert h.state() == "PreparingRebalance"
    rejoin = h.join(a.member_id)
    assert rejoin.done  # the only member left has rejoined
    assert rejoin.result().generation_id == 2
    assert rejoin.result().leader == a.member_id


def test_expiry_happens_at_the_deadline_even_if_tick_comes_late(h: Harness) -> None:
    a, b = h.form(2)
    h.clock.advance(SESSION + 5000)  # no tick meanwhile
    # The next request runs the expired sessions first, each at its own deadline.
    assert h.coord.heartbeat(GROUP, 1, a.member_id) == UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat(GROUP, 1, b.member_id) == UNKNOWN_MEMBER_ID
    assert h.state() == "Empty"
    assert h.coord.describe_groups([GROUP])[0].members == ()


def test_leave_group_rebalances_the_rest(h: Harness) -> None:
    a, b = h.form(2)
    result = h.coord.leave_group(GROUP, [MemberIdentity(b.member_id)])
    assert result.error_code == NONE and [m.error_code for m in result.members] == [NONE]
    assert h.coord.heartbeat(GROUP, 1, a.member_id) == REBALANCE_IN_PROGRESS
    rejoin = h.join(a.member_id)
    assert rejoin.result().generation_id == 2 and len(rejoin.result().members) == 1
    unknown = h.coord.leave_group(GROUP, [("nobody", None), (a.member_id, None)])
    assert [m.error_code for m in unknown.members] == [UNKNOWN_MEMBER_ID, NONE]
    # The last member gone: the join phase ends at once with nobody, and the group is Empty.
    assert h.state() == "Empty"
    assert h.coord.describe_groups([GROUP])[0].members == ()


def test_the_last_member_leaving_empties_the_group(h: Harness) -> None:
    (a,) = h.form(1)
    h.coord.leave_group(GROUP, [(a.member_id, None)])
    assert h.state() == "Empty"
    assert h.coord.leave_group("no-such-group", [("m", None)]).members[0].error_code == (
        UNKNOWN_MEMBER_ID
    )


def test_a_new_leader_is_chosen_when_the_leader_leaves(h: Harness) -> None:
    a, b, c = h.form(3)
    h.coord.leave_group(GROUP, [(a.member_id, None)])
    rejoin_c = h.join(c.member_id)
    rejoin_b = h.join(b.member_id)
    assert rejoin_b.result().leader == b.member_id  # the first remaining member
    assert len(rejoin_b.result().members) == 2 and rejoin_c.result().members == ()


# --- static membership -----------------------------------------------------------------------
def test_a_static_member_rejoining_takes_its_place_without_a_rebalance(h: Harness) -> None:
    joins = [h.join(client_id=f"c{i}", instance=f"instance-{i}") for i in range(2)]
    h.run_until(*joins)
    a, b = (j.result() for j in joins)
    assert a.member_id.startswith("instance-0-")
    h.coord.sync_group(GROUP, 1, a.member_id, {a.member_id: b"A", b.member_id: b"B"})
    back = h.join(client_id="c1", instance="instance-1")
    result = back.result()
    assert result.error_code == NONE and result.generation_id == 1
    assert result.member_id != b.member_id and result.leader == a.member_id
    assert h.state() == "Stable"
    assert h.coord.heartbeat(GROUP, 1, b.member_id, "instance-1") == FENCED_INSTANCE_ID
    assert h.coord.heartbeat(GROUP, 1, b.member_id) == UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat(GROUP, 1, result.member_id, "instance-1") == NONE
    assert h.coord.sync_group(GROUP, 1, result.member_id).result().assignment == b"B"
    # An admin removes a static member by its instance id alone.
    removed = h.coord.leave_group(GROUP, [MemberIdentity("", "instance-0")])
    assert removed.members[0].error_code == NONE
    assert h.state() == "PreparingRebalance"


def test_static_leader_rejoining_with_join_group_v9_is_told_to_skip_the_assignment(
    h: Harness,
) -> None:
    joins = [h.join(client_id=f"c{i}", instance=f"i{i}") for i in range(2)]
    h.run_until(*joins)
    a, b = (j.result() for j in joins)
    h.coord.sync_group(GROUP, 1, a.member_id, {})
    back = h.join(client_id="c0", instance="i0", skip=True).result()
    assert back.leader == back.member_id and back.skip_assignment
    assert {m.member_id for m in back.members} == {back.member_id, b.member_id}


# --- offsets ---------------------------------------------------------------------------------
def test_commit_and_fetch_round_trip(h: Harness) -> None:
    (a,) = h.form(1)
    metadata = "client state: ünïcödé ☃ 😀"
    commit = h.coord.commit_offsets(
        GROUP,
        1,
        a.member_id,
        -1,
        [OffsetCommitPartition("t", 0, 42, 5, metadata), ("t", 1, 7), ("u", 3, 0, -1, None)],
    )
    assert [r.error_code for r in commit] == [NONE, NONE, NONE]
    fetched = h.coord.fetch_offsets(GROUP, [("t", 0), ("t", 1), ("t", 2), ("u", 3)])
    assert fetched.error_code == NONE
    assert [(p.offset, p.leader_epoch, p.metadata) for p in fetched.partitions] == [
        (42, 5, metadata),
        (7, -1, ""),
        (-1, -1, ""),  # never committed: -1 and no error
        (0, -1, ""),
    ]
    assert {p.error_code for p in fetched.partitions} == {NONE}
    everything = h.coord.fetch_offsets(GROUP)
    assert [(p.topic, p.partition, p.offset) for p in everything.partitions] == [
        ("t", 0, 42),
        ("t", 1, 7),
        ("u", 3, 0),
    ]
    unknown = h.coord.fetch_offsets("no-such-group", [("t", 0)])
    assert unknown.partitions[0].offset == -1
    assert h.coord.fetch_offsets("no-such-group").partitions == ()


def test_commit_validation(h: Harness) -> None:
    assert h.coord.commit_offsets(GROUP, 3, "m", -1, [("t", 0, 1)])[0].error_code == (
        ILLEGAL_GENERATION  # no such group (OffsetCommit before v9)
    )
    joins = [h.join(client_id=f"c{i}") for i in range(2)]
    h.run_until(*joins)
    a = joins[0].result()
    # CompletingRebalance: the member has its generation but no assignment yet.
    assert h.coord.commit_offsets(GROUP, 1, a.member_id, -1, [("t", 0, 1)])[0].error_code == (
        REBALANCE_IN_PROGRESS
    )
    h.coord.sync_group(GROUP, 1, a.member_id, {})
    assert h.coord.commit_offsets(GROUP, 0, a.member_id, -1, [("t", 0, 1)])[0].error_code == (
        ILLEGAL_GENERATION
    )
    assert h.coord.commit_offsets(GROUP, 1, "nobody", -1, [("t", 0, 1)])[0].error_code == (
        UNKNOWN_MEMBER_ID
    )
    # Standalone commits are refused while the group has members.
    assert h.coord.commit_offsets(GROUP, -1, "", -1, [("t", 0, 1)])[0].error_code == (
        UNKNOWN_MEMBER_ID
    )
    # PreparingRebalance: members still commit with the generation they have (they do so while
    # revoking their partitions before they rejoin).
    h.join(client_id="newcomer")
    assert h.coord.commit_offsets(GROUP, 1, a.member_id, -1, [("t", 0, 9)])[0].error_code == NONE
    assert h.coord.fetch_offsets(GROUP, [("t", 0)]).partitions[0].offset == 9


def test_standalone_commits_for_a_group_without_members(h: Harness) -> None:
    commit = h.coord.commit_offsets("standalone", -1, "", -1, [("t", 0, 100)])
    assert [r.error_code for r in commit] == [NONE]
    assert h.coord.fetch_offsets("standalone", [("t", 0)]).partitions[0].offset == 100
    listed = {g.group_id: g for g in h.coord.list_groups()}
    assert listed["standalone"].state == "Empty" and listed["standalone"].protocol_type == ""
    # A group whose members all left takes standalone commits again.
    (a,) = h.form(1)
    h.coord.leave_group(GROUP, [(a.member_id, None)])
    assert h.coord.commit_offsets(GROUP, -1, "", -1, [("t", 0, 5)])[0].error_code == NONE


def test_offset_metadata_too_large(h: Harness) -> None:
    commit = h.coord.commit_offsets(
        "g",
        -1,
        "",
        -1,
        [
            ("t", 0, 1, -1, "x" * 4096),
            ("t", 1, 1, -1, "x" * 4097),
            # Java counts UTF-16 code units: 2048 emoji are 4096 units, one more is too many.
            ("t", 2, 1, -1, "😀" * 2048),
            ("t", 3, 1, -1, "😀" * 2048 + "x"),
        ],
    )
    assert [r.error_code for r in commit] == [
        NONE,
        OFFSET_METADATA_TOO_LARGE,
        NONE,
        OFFSET_METADATA_TOO_LARGE,
    ]
    fetched = h.coord.fetch_offsets("g", [("t", p) for p in range(4)]).partitions
    assert [p.offset for p in fetched] == [1, -1, 1, -1]


def test_a_failed_write_changes_nothing(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    h.coord.commit_offsets("g", -1, "", -1, [("t", 0, 1)])

    def broken(*args: Any, **kwargs: Any) -> int:
        raise StorageError("disk on fire")

    monkeypatch.setattr(h.store, "append", broken)
    commit = h.coord.commit_offsets("g", -1, "", -1, [("t", 0, 2)])
    assert [r.error_code for r in commit] == [NOT_COORDINATOR]  # KAFKA_STORAGE_ERROR, mapped
    assert h.coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 1
    # A new group that cannot be written is not created.
    assert h.join(group="fresh").result().error_code == NOT_COORDINATOR
    assert "fresh" not in {g.group_id for g in h.coord.list_groups()}


def test_commits_keep_a_member_alive(h: Harness) -> None:
    (a,) = h.form(1)
    for _ in range(5):
        h.advance(SESSION - 1000)
        assert (
            h.coord.commit_offsets(GROUP, 1, a.member_id, -1, [("t", 0, 1)])[0].error_code == NONE
        )
    assert h.coord.heartbeat(GROUP, 1, a.member_id) == NONE


# --- restarts --------------------------------------------------------------------------------
def test_offsets_and_the_generation_survive_a_restart(h: Harness) -> None:
    a, b = h.form(2)
    h.coord.commit_offsets(GROUP, 1, a.member_id, -1, [("t", 0, 42, 3, "m0"), ("t", 1, 7)])
    h.coord.commit_offsets(GROUP, 1, b.member_id, -1, [("t", 1, 8)])
    h.coord.commit_offsets("standalone", -1, "", -1, [("u", 0, 1)])
    coord = h.restart()
    fetched = coord.fetch_offsets(GROUP).partitions
    assert [(p.topic, p.partition, p.offset, p.leader_epoch, p.metadata) for p in fetched] == [
        ("t", 0, 42, 3, "m0"),
        ("t", 1, 8, -1, ""),
    ]
    assert coord.fetch_offsets("standalone", [("u", 0)]).partitions[0].offset == 1
    (described,) = coord.describe_groups([GROUP])
    assert described.state == "Stable" and described.protocol_data == "range"
    assert [(m.member_id, m.assignment) for m in described.members] == [
        (a.member_id, f"assignment-{a.member_id}".encode()),
        (b.member_id, f"assignment-{b.member_id}".encode()),
    ]
    # Members carry on with their generation, as long as they heartbeat in time.
    assert coord.heartbeat(GROUP, 1, a.member_id) == NONE
    h.advance(SESSION - 1)
    assert coord.heartbeat(GROUP, 1, a.member_id) == NONE
    h.advance(1)
    assert coord.heartbeat(GROUP, 1, b.member_id) == UNKNOWN_MEMBER_ID  # b did not
    assert coord.heartbeat(GROUP, 1, a.member_id) == REBALANCE_IN_PROGRESS
    rejoin = h.join(a.member_id)
    assert rejoin.result().generation_id == 2  # the generation continues from the log


def test_an_empty_group_keeps_its_generation_over_a_restart(h: Harness) -> None:
    (a,) = h.form(1)
    h.coord.leave_group(GROUP, [(a.member_id, None)])
    coord = h.restart()
    assert coord.describe_groups([GROUP])[0].state == "Empty"
    joined = h.join()
    h.run_until(joined)
    assert joined.result().generation_id == 3  # 1, then 2 when it emptied, then 3


# --- expiry and deletion -----------------------------------------------------------------------
WEEK = 7 * 24 * 3600 * 1000
CHECK = 600_000


def test_offsets_of_an_empty_group_expire_a_week_after_it_emptied(h: Harness) -> None:
    (a,) = h.form(1)
    h.coord.commit_offsets(GROUP, 1, a.member_id, -1, [("t", 0, 5)])
    h.coord.leave_group(GROUP, [(a.member_id, None)])
    h.advance(WEEK - CHECK)
    assert h.coord.fetch_offsets(GROUP, [("t", 0)]).partitions[0].offset == 5
    h.advance(2 * CHECK)
    assert h.coord.fetch_offsets(GROUP, [("t", 0)]).partitions[0].offset == -1
    assert GROUP not in {g.group_id for g in h.coord.list_groups()}  # deleted with them
    coord = h.restart()
    assert coord.fetch_offsets(GROUP).partitions == ()
    assert coord.list_groups() == []


def test_a_stable_consumer_group_loses_only_offsets_of_topics_it_left(h: Harness) -> None:
    (a,) = h.form(1, session=1_800_000)  # subscribed to "t"
    h.coord.commit_offsets(GROUP, 1, a.member_id, -1, [("t", 0, 5), ("old-topic", 0, 9)])
    for _ in range((WEEK + 2 * CHECK) // 1_500_000 + 1):  # a week and a bit, heartbeating
        h.clock.advance(1_500_000)
        assert h.coord.heartbeat(GROUP, 1, a.member_id) == NONE
    fetched = h.coord.fetch_offsets(GROUP).partitions
    assert [(p.topic, p.offset) for p in fetched] == [("t", 5)]


def test_an_explicit_retention_gives_an_expire_timestamp(h: Harness) -> None:
    h.coord.commit_offsets("g", -1, "", 60_000, [("t", 0, 1)])
    h.advance(CHECK)
    assert h.coord.fetch_offsets("g", [("t", 0)]).partitions[0].offset == -1


def test_delete_groups(h: Harness) -> None:
    (a,) = h.form(1)
    h.coord.commit_offsets(GROUP, 1, a.member_id, -1, [("t", 0, 5)])
    h.coord.commit_offsets("idle", -1, "", -1, [("t", 0, 1), ("t", 1, 2)])
    results = h.coord.delete_groups([GROUP, "idle", "unknown"])
    assert [r.error_code for r in results] == [NON_EMPTY_GROUP, NONE, GROUP_ID_NOT_FOUND]
    assert h.coord.fetch_offsets("idle").partitions == ()
    coord = h.restart()
    assert coord.fetch_offsets("idle").partitions == ()
    assert {g.group_id for g in coord.list_groups()} == {GROUP}


def test_delete_offsets(h: Harness) -> None:
    """OffsetDelete: a live consumer group keeps the offsets of its subscribed topics; other
    offsets get tombstones that survive a reload; a live group of another protocol type is
    NON_EMPTY_GROUP; unknown and empty group ids are refused."""
    (a,) = h.form(1)  # subscribes to "t"
    h.coord.commit_offsets(GROUP, 1, a.member_id, -1, [("t", 0, 5), ("u", 0, 6), ("u", 1, 7)])
    error, results = h.coord.delete_offsets(GROUP, [("t", 0), ("u", 0), ("u", 9)])
    assert error == NONE
    assert [(r.topic, r.partition, r.error_code) for r in results] == [
        ("t", 0, GROUP_SUBSCRIBED_TO_TOPIC),
        ("u", 0, NONE),
        ("u", 9, NONE),  # no offset: nothing to delete, no error (as Kafka)
    ]
    committed = {(p.topic, p.partition) for p in h.coord.fetch_offsets(GROUP).partitions}
    assert committed == {("t", 0), ("u", 1)}
    assert h.coord.delete_offsets("unknown", [("t", 0)]) == (GROUP_ID_NOT_FOUND, [])
    assert h.coord.delete_offsets("", [("t", 0)]) == (INVALID_GROUP_ID, [])
    h.join(group="connect", protocol_type="connect", protocols=[("default", b"x")])
    h.advance(INITIAL_DELAY + 100)
    assert h.coord.delete_offsets("connect", [("t", 0)]) == (NON_EMPTY_GROUP, [])
    coord = h.restart()
    committed = {(p.topic, p.partition) for p in coord.fetch_offsets(GROUP).partitions}
    assert committed == {("t", 0), ("u", 1)}


# --- listing, describing, shutting down --------------------------------------------------------
def test_list_and_describe(h: Harness) -> None:
    h.form(1)
    h.coord.commit_offsets("simple", -1, "", -1, [("t", 0, 1)])
    assert {(g.group_id, g.state) for g in h.coord.list_groups()} == {
        (GROUP, "Stable"),
        ("simple", "Empty"),
    }
    assert [g.group_id for g in h.coord.list_groups(["stable"])] == [GROUP]
    (described, unknown) = h.coord.describe_groups([GROUP, "nope"])
    assert described.protocol_type == "consumer" and described.protocol_data == "range"
    assert described.members[0].client_id == "c0"
    assert described.members[0].client_host == "/127.0.0.1"
    assert described.members[0].metadata == RANGE[0][1]
    assert (unknown.state, unknown.members) == ("Dead", ())


def test_shutdown_answers_parked_requests(h: Harness) -> None:
    joins = [h.join(client_id=f"c{i}") for i in range(2)]
    h.coord.shutdown()
    assert [j.result().error_code for j in joins] == [NOT_COORDINATOR] * 2


def test_next_deadline_tells_the_broker_when_to_tick(h: Harness) -> None:
    start = h.clock.now
    assert h.coord.next_deadline() == start + CHECK  # only the retention check
    joined = h.join()
    assert h.coord.next_deadline() == start + INITIAL_DELAY
    assert h.coord.tick(start + INITIAL_DELAY - 1) == start + INITIAL_DELAY
    assert not joined.done
    h.clock.now = start + INITIAL_DELAY
    assert h.coord.tick() == start + INITIAL_DELAY + SESSION  # now the member's session
    assert joined.done


def test_config_from_kafka_property_names() -> None:
    config = GroupCoordinatorConfig.from_properties(
        {"group.initial.rebalance.delay.ms": "0", "log.dirs": "/ignored"}
    )
    assert config.group_initial_rebalance_delay_ms == 0
    assert config.group_min_session_timeout_ms == 6000
    assert config.offsets_retention_ms == WEEK


def test_the_offsets_topic_is_created_once(h: Harness) -> None:
    assert OFFSETS_TOPIC in h.store.topics()
    assert h.store.partitions(OFFSETS_TOPIC) == 3
    h.config["offsets.topic.num.partitions"] = 7  # ignored: the topic exists
    assert h.restart().partitions == 3
