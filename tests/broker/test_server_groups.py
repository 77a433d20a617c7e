"""The group APIs over a real socket, wired to the group coordinator: FindCoordinator, JoinGroup
(delayed responses across connections), SyncGroup, Heartbeat, OffsetCommit, OffsetFetch,
ListGroups, DescribeGroups, LeaveGroup, and committed offsets across a restart."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from compactlog import errors as c
from compactlog.broker.server import BrokerThread
from compactlog.protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from tests.broker.test_server_basics import Client, create_topic, metadata, start_broker

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP = 8, 9, 10, 11
HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 12, 13, 14, 15, 16
DELETE_GROUPS = 42
GROUP = "g"


def join_request(
    member_id: str = "", metadata: bytes = b"sub", session_timeout_ms: int = 10_000
) -> Any:
    return JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": metadata}],
    )


def join(client: Client, metadata: bytes = b"sub", session_timeout_ms: int = 10_000) -> Any:
    """JoinGroup v5 as clients do it: MEMBER_ID_REQUIRED first, then join with the id."""
    first = client.call(JOIN_GROUP, 5, join_request("", metadata, session_timeout_ms))
    assert first.error_code == c.MEMBER_ID_REQUIRED and first.member_id
    return client.call(JOIN_GROUP, 5, join_request(first.member_id, metadata, session_timeout_ms))


def sync(client: Client, generation: int, member_id: str, assignments: dict[str, bytes]) -> Any:
    request = SyncGroupRequest(
        group_id=GROUP,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        assignments=[{"member_id": m, "assignment": a} for m, a in assignments.items()],
    )
    return client.call(SYNC_GROUP, 3, request)


def heartbeat(client: Client, generation: int, member_id: str) -> int:
    request = HeartbeatRequest(group_id=GROUP, generation_id=generation, member_id=member_id)
    return int(client.call(HEARTBEAT, 1, request).error_code)


def commit(client: Client, generation: int, member_id: str, offsets: dict[Any, int]) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": offset, "committed_metadata": "m"}
        )
    request = OffsetCommitRequest(
        group_id=GROUP,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        retention_time_ms=-1,
        topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
    )
    response = client.call(OFFSET_COMMIT, 3, request)
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


def fetch_offsets(client: Client, partitions: dict[str, list[int]] | None, version: int = 3) -> Any:
    topics = (
        None
        if partitions is None
        else [{"name": t, "partition_indexes": ps} for t, ps in partitions.items()]
    )
    response = client.call(OFFSET_FETCH, version, OffsetFetchRequest(group_id=GROUP, topics=topics))
    return response.error_code, {
        (t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def test_a_consumer_group_over_the_wire(tmp_path: Path) -> None:
    server = start_broker(tmp_path / "data")
    try:
        create_topic(server, "t", 2)
        with Client(server.port) as client:
            # Before any group request there is no __consumer_offsets, and so no group.
            assert client.call(LIST_GROUPS, 2, ListGroupsRequest()).groups == []
            assert [t.name for t in metadata(client, None).topics] == ["t"]
            found = client.call(FIND_COORDINATOR, 1, FindCoordinatorRequest(key=GROUP, key_type=0))
            assert (found.error_code, found.node_id, found.port) == (c.NONE, 0, server.port)
            offsets_topic = metadata(client, ["__consumer_offsets"]).topics[0]
            assert offsets_topic.error_code == c.NONE and offsets_topic.is_internal

            joined = join(client)
            assert joined.error_code == c.NONE and joined.leader == joined.member_id
            assert (joined.generation_id, joined.protocol_name) == (1, "range")
            assert [(m.member_id, m.metadata) for m in joined.members] == [
                (joined.member_id, b"sub")
            ]
            member, generation = joined.member_id, joined.generation_id
            synced = sync(client, generation, member, {member: b"assignment"})
            assert (synced.error_code, synced.assignment) == (c.NONE, b"assignment")
            assert heartbeat(client, generation, member) == c.NONE
            assert heartbeat(client, generation + 1, member) == c.ILLEGAL_GENERATION

            assert commit(client, generation, member, {("t", 0): 5, ("t", 1): 7, ("x", 0): 1}) == {
                ("t", 0): c.NONE,
                ("t", 1): c.NONE,
                ("x", 0): c.UNKNOWN_TOPIC_OR_PARTITION,
            }
            assert fetch_offsets(client, {"t": [0, 1, 2]}) == (
                c.NONE,
                {("t", 0): (5, "m", 0), ("t", 1): (7, "m", 0), ("t", 2): (-1, "", 0)},
            )
            assert fetch_offsets(client, None)[1] == {
                ("t", 0): (5, "m", 0),
                ("t", 1): (7, "m", 0),
            }

            listed = client.call(LIST_GROUPS, 2, ListGroupsRequest()).groups
            assert [(g.group_id, g.protocol_type) for g in listed] == [(GROUP, "consumer")]
            request = DescribeGroupsRequest(
                groups=[GROUP, "other"], include_authorized_operations=False
            )
            described = client.call(DESCRIBE_GROUPS, 4, request).groups
            assert [(g.group_id, g.group_state) for g in described] == [
                (GROUP, "Stable"),
                ("other", "Dead"),
            ]
            (m,) = described[0].members
            assert (m.member_id, m.client_host, m.member_assignment) == (
                member,
                "/127.0.0.1",
                b"assignment",
            )
            # v6: a group that does not exist is GROUP_ID_NOT_FOUND (Kafka 4.4's message)
            v6 = client.call(DESCRIBE_GROUPS, 6, request).groups
            assert [(g.error_code, g.error_message, g.group_state) for g in v6] == [
                (c.NONE, None, "Stable"),
                (c.GROUP_ID_NOT_FOUND, "Group other not found.", "Dead"),
            ]
            # v4+ filters by state, v5+ by type (every group here is classic)
            for states, types, found in (
                ([], [], [(GROUP, "Stable", "classic")]),
                (["stable"], ["Classic", "Consumer"], [(GROUP, "Stable", "classic")]),
                (["Empty"], [], []),
                ([], ["consumer"], []),
            ):
                filtered = ListGroupsRequest(states_filter=states, types_filter=types)
                listed = client.call(LIST_GROUPS, 5, filtered).groups
                assert [(g.group_id, g.group_state, g.group_type) for g in listed] == found
            leave = LeaveGroupRequest(group_id=GROUP, member_id=member)
            assert client.call(LEAVE_GROUP, 1, leave).error_code == c.NONE
            assert client.call(LEAVE_GROUP, 1, leave).error_code == c.UNKNOWN_MEMBER_ID
    finally:
        server.stop()
    # The commits are in __consumer_offsets: a new broker on the directory answers them.
    server = start_broker(tmp_path / "data")
    try:
        with Client(server.port) as client:
            assert fetch_offsets(client, {"t": [0]}, version=1)[1] == {("t", 0): (5, "m", 0)}
    finally:
        server.stop()


def test_delete_groups(tmp_path: Path) -> None:
    server = start_broker(tmp_path / "data")
    try:
        create_topic(server, "t", 1)
        with Client(server.port) as client:

            def delete(*names: str, version: int = 2) -> list[tuple[str, int]]:
                request = DeleteGroupsRequest(groups_names=list(names))
                results = client.call(DELETE_GROUPS, version, request).results
                return [(r.group_id, r.error_code) for r in results]

            # before any group request: no __consumer_offsets, no group
            assert delete("nosuch") == [("nosuch", c.GROUP_ID_NOT_FOUND)]
            joined = join(client)
            member, generation = joined.member_id, joined.generation_id
            sync(client, generation, member, {member: b"a"})
            assert commit(client, generation, member, {("t", 0): 3}) == {("t", 0): c.NONE}
            assert delete(GROUP, version=0) == [(GROUP, c.NON_EMPTY_GROUP)]
            leave = LeaveGroupRequest(group_id=GROUP, member_id=member)
            assert client.call(LEAVE_GROUP, 1, leave).error_code == c.NONE
            assert delete(GROUP, "nosuch") == [
                (GROUP, c.NONE),
                ("nosuch", c.GROUP_ID_NOT_FOUND),
            ]
            assert client.call(LIST_GROUPS, 5, ListGroupsRequest()).groups == []
            assert fetch_offsets(client, {"t": [0]})[1] == {("t", 0): (-1, "", 0)}
    finally:
        server.stop()


def test_a_join_parked_on_one_connection_is_answered_when_the_other_member_rejoins(
    tmp_path: Path,
) -> None:
    server = start_broker(tmp_path / "data")
    try:
        with Client(server.port) as a, Client(server.port) as b:
            first = join(a, b"a")
            a_id, generation = first.member_id, first.generation_id
            assert sync(a, generation, a_id, {a_id: b"all"}).error_code == c.NONE
            # b joins: the group starts a rebalance and waits for a to rejoin.
            b_first = b.call(JOIN_GROUP, 5, join_request(metadata=b"b"))
            b.send(JOIN_GROUP, 5, join_request(b_first.member_id, b"b"))
            time.sleep(0.1)
            assert heartbeat(a, generation, a_id) == c.REBALANCE_IN_PROGRESS
            a_again = a.call(JOIN_GROUP, 5, join_request(a_id, b"a"))
            _, b_joined = b.receive()
            assert a_again.generation_id == b_joined.generation_id == generation + 1
            assert a_again.leader == b_joined.leader == a_id
            assert sorted(m.member_id for m in a_again.members) == sorted(
                [a_id, b_joined.member_id]
            )
            assert b_joined.members == []  # followers get no member list
            # b's SyncGroup waits for the leader's.
            b.send(
                SYNC_GROUP,
                3,
                SyncGroupRequest(
                    group_id=GROUP,
                    generation_id=b_joined.generation_id,
                    member_id=b_joined.member_id,
                    group_instance_id=None,
                    assignments=[],
                ),
            )
            assignments = {a_id: b"for-a", b_joined.member_id: b"for-b"}
            assert sync(a, a_again.generation_id, a_id, assignments).assignment == b"for-a"
            _, b_synced = b.receive()
            assert (b_synced.error_code, b_synced.assignment) == (c.NONE, b"for-b")
    finally:
        server.stop()


def test_a_parked_join_is_answered_when_the_broker_stops(tmp_path: Path) -> None:
    server: BrokerThread = start_broker(tmp_path / "data")
    with Client(server.port) as a, Client(server.port) as b:
        first = join(a)
        sync(a, first.generation_id, first.member_id, {first.member_id: b""})
        b_first = b.call(JOIN_GROUP, 5, join_request())
        b.send(JOIN_GROUP, 5, join_request(b_first.member_id))
        time.sleep(0.1)
        server.stop()
        _, parked = b.receive()
        assert parked.error_code == c.NOT_COORDINATOR


class SteppedClock:
    """The system's wall clock plus a step that the test moves."""

    def __init__(self) -> None:
        self.step_ms = 0

    def __call__(self) -> int:
        return int(time.time() * 1000) + self.step_ms


def test_group_deadlines_ignore_wall_clock_steps(tmp_path: Path) -> None:
    """Session timeouts are durations: a wall-clock step back does not keep a silent member in
    its group, and a step forward does not expire a live one (Kafka times them monotonically)."""
    clock = SteppedClock()
    server = start_broker(tmp_path / "data", {"group.min.session.timeout.ms": 100}, clock=clock)
    try:
        with Client(server.port) as client:
            joined = join(client, session_timeout_ms=1000)
            member, generation = joined.member_id, joined.generation_id
            assert sync(client, generation, member, {member: b"a"}).error_code == c.NONE
            clock.step_ms = 3_600_000  # an hour forward: the member is still within its session
            assert heartbeat(client, generation, member) == c.NONE
            clock.step_ms = -3_600_000  # an hour back; then the member goes silent
            request = DescribeGroupsRequest(groups=[GROUP], include_authorized_operations=False)
            deadline = time.monotonic() + 10
            while client.call(DESCRIBE_GROUPS, 4, request).groups[0].members:
                assert time.monotonic() < deadline, "the silent member never expired"
                time.sleep(0.1)
            assert heartbeat(client, generation, member) == c.UNKNOWN_MEMBER_ID
    finally:
        server.stop()
