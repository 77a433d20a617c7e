"""Classic and KIP-848 consumer groups of the same id, request by request, against Kafka 4.4 and
``compactlog serve``: first both with ``group.consumer.migration.policy=disabled`` (live groups
are never mixed), then both with Kafka's default, ``bidirectional`` (a live classic group is
upgraded when a consumer-protocol member joins, its classic member is served by the consumer
group, and it is downgraded when that member leaves). The same sequence is sent to both and the
answers must be the same, except where noted as a known difference.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from compactlog import errors as codes
from compactlog.protocol import RequestHeader, decode_response, encode_request
from compactlog.protocol.messages import (
    ApiVersionsRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from tests.broker.helpers.wire import recv_frame
from tests.kafka.harness import run_tool
from tests.kafka.tools import SHARED_CONFIG

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

POLICY = {"group.consumer.migration.policy": "disabled"}


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 (the classic consumer's JoinGroup metadata)."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


class Raw:
    """One connection, requests built with compactlog's own message classes."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.correlation = 0

    def call(self, body: Any, version: int) -> Any:
        self.correlation += 1
        header = RequestHeader(self._key(body), version, self.correlation, "mixing")
        self.sock.sendall(encode_request(header, body))
        return decode_response(recv_frame(self.sock), self._key(body), version).body

    @staticmethod
    def _key(body: Any) -> int:
        return {
            ApiVersionsRequest: 18,
            ConsumerGroupHeartbeatRequest: 68,
            ConsumerGroupDescribeRequest: 69,
            DescribeGroupsRequest: 15,
            FindCoordinatorRequest: 10,
            HeartbeatRequest: 12,
            SyncGroupRequest: 14,
            JoinGroupRequest: 11,
            ListGroupsRequest: 16,
            OffsetCommitRequest: 8,
        }[type(body)]

    def wait_for_coordinator(self, group: str) -> None:
        deadline = time.monotonic() + 60
        while True:
            found = self.call(FindCoordinatorRequest(key=group, key_type=0), 1)
            if found.error_code == codes.NONE:
                return
            assert time.monotonic() < deadline, f"no coordinator: {found}"
            time.sleep(0.2)

    def wait_for_shards(self, *groups: str) -> None:
        """Until the coordinator has loaded the ``__consumer_offsets`` partitions of ``groups``
        (Kafka loads them in the background after creating the topic)."""
        loading = {
            codes.NOT_COORDINATOR,
            codes.COORDINATOR_LOAD_IN_PROGRESS,
            codes.COORDINATOR_NOT_AVAILABLE,
        }
        deadline = time.monotonic() + 60
        while True:
            described = self.call(ConsumerGroupDescribeRequest(group_ids=list(groups)), 0)
            if not any(g.error_code in loading for g in described.groups):
                return
            assert time.monotonic() < deadline, f"coordinator not ready: {described}"
            time.sleep(0.2)

    def heartbeat(self, group: str, member: str, epoch: int, **kw: Any) -> Any:
        joining = epoch == 0
        request = ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            rebalance_timeout_ms=30_000 if joining else -1,
            subscribed_topic_names=["t"] if joining else None,
            topic_partitions=[] if joining else None,
            **kw,
        )
        return self.call(request, 1)

    def join(self, group: str, protocol_type: str = "consumer", member_id: str = "") -> Any:
        def once(member_id: str) -> Any:
            return self.call(
                JoinGroupRequest(
                    group_id=group,
                    session_timeout_ms=30_000,
                    rebalance_timeout_ms=30_000,
                    member_id=member_id,
                    group_instance_id=None,
                    protocol_type=protocol_type,
                    protocols=[{"name": "range", "metadata": subscription("t")}],
                ),
                5,
            )

        first = once(member_id)
        if first.error_code != codes.MEMBER_ID_REQUIRED:
            return first
        return once(first.member_id)

    def commit_standalone(self, group: str) -> Any:
        return self.call(
            OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                retention_time_ms=-1,
                topics=[
                    {
                        "name": "t",
                        "partitions": [
                            {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                        ],
                    }
                ],
            ),
            3,
        )


def answers(raw: Raw) -> dict[str, Any]:
    """The sequence, with what each step answered."""
    out: dict[str, Any] = {}
    member = str(uuid.uuid4())
    raw.wait_for_coordinator("classic-live")
    raw.wait_for_shards("classic-live", "other-live", "upgrade", "nosuch", "live-consumer")
    # 1. A classic group with a member (consumer protocol type): no consumer-protocol member.
    joined = raw.join("classic-live")
    out["classic join"] = joined.error_code
    hb = raw.heartbeat("classic-live", member, 0)
    out["heartbeat into live classic"] = (hb.error_code, hb.error_message)
    # 2. A classic group of another protocol type.
    raw.join("other-live", protocol_type="connect")
    hb = raw.heartbeat("other-live", member, 0)
    out["heartbeat into live non-consumer classic"] = (hb.error_code, hb.error_message)
    # 3. An empty classic group (offsets only) becomes a consumer group.
    out["standalone commit"] = raw.commit_standalone("upgrade").topics[0].partitions[0].error_code
    hb = raw.heartbeat("upgrade", member, 0)
    out["heartbeat into empty classic"] = (hb.error_code, hb.error_message, hb.member_epoch)
    listed = raw.call(ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    out["listed"] = sorted((g.group_id, g.protocol_type, g.group_type) for g in listed.groups)
    # 4. Describing the consumer group with the classic API, the classic one with the new.
    described = raw.call(DescribeGroupsRequest(groups=["upgrade"]), 5).groups[0]
    out["DescribeGroups v5 of consumer group"] = (described.error_code, described.group_state)
    described = raw.call(DescribeGroupsRequest(groups=["upgrade"]), 6).groups[0]
    out["DescribeGroups v6 of consumer group"] = (
        described.error_code,
        described.error_message,
        described.group_state,
    )
    cgd = raw.call(ConsumerGroupDescribeRequest(group_ids=["classic-live", "nosuch"]), 0)
    # (sorted: Kafka answers shard by shard, not in the order asked)
    out["ConsumerGroupDescribe"] = sorted((g.error_code, g.error_message) for g in cgd.groups)
    # 5. The consumer group, once empty, becomes classic again on a classic JoinGroup.
    left = raw.heartbeat("upgrade", member, -1)
    out["leave"] = (left.error_code, left.member_epoch)
    out["classic join into empty consumer group"] = raw.join("upgrade").error_code
    listed = raw.call(ListGroupsRequest(states_filter=[], types_filter=["classic"]), 5)
    out["classic groups"] = sorted(g.group_id for g in listed.groups)
    return out


def heartbeat_errors(raw: Raw) -> dict[str, Any]:
    """Refused heartbeats: (error code, message) of each."""
    raw.wait_for_shards("errors", "upgrade")
    raw.commit_standalone("upgrade")
    hb_upgrade = raw.heartbeat("upgrade", "nobody", 3)
    out: dict[str, Any] = {
        "epoch 3 into empty classic": (hb_upgrade.error_code, hb_upgrade.error_message)
    }
    member = str(uuid.uuid4())

    def hb(what: str, epoch: int, member_id: str = member, **kw: Any) -> None:
        request = ConsumerGroupHeartbeatRequest(group_id="errors", member_id=member_id,
                                                member_epoch=epoch, **kw)  # fmt: skip
        response = raw.call(request, 1)
        out[what] = (response.error_code, response.error_message)

    join = {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": ["t"], "topic_partitions": []}
    hb("no such group", 3)
    hb("no rebalance timeout", 0, subscribed_topic_names=["t"], topic_partitions=[])
    hb("no subscription", 0, rebalance_timeout_ms=30_000, topic_partitions=[])
    hb("no owned partitions", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"])
    hb("unknown assignor", 0, server_assignor="sticky", **join)
    hb("bad epoch", -3)
    hb("empty member id", 4, member_id="")
    hb("static leave without instance", -2)
    hb("joins", 0, **join)
    hb("epoch too high", 7)
    hb("unknown member", 2, member_id="nobody")
    hb("unknown static member", 2, instance_id="nobody")
    hb("leave of unknown member", -1, member_id="nobody")
    hb("leaves", -1)
    return out


def live_consumer_group_join(raw: Raw) -> int:
    member = str(uuid.uuid4())
    raw.heartbeat("live-consumer", member, 0)
    return int(raw.join("live-consumer").error_code)


def test_classic_and_consumer_groups_answer_as_kafka(
    kafka: Callable[..., Any], compactlog_serve: Callable[..., Any]
) -> None:
    real = kafka(config=POLICY)
    ours = compactlog_serve({**SHARED_CONFIG, **POLICY}).start()
    for broker in (real, ours):
        created = run_tool(
            "kafka-topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "t",
            "--partitions", "2",
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
    kafka_raw, ours_raw = Raw(real.bootstrap), Raw(ours.bootstrap)
    try:
        check(kafka_raw, ours_raw)
    finally:
        kafka_raw.sock.close()
        ours_raw.sock.close()


def kip848_versions(raw: Raw) -> list[tuple[int, int, int]]:
    body = raw.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 2)
    return sorted(
        (k.api_key, k.min_version, k.max_version) for k in body.api_keys if k.api_key in (68, 69)
    )


def check(kafka_raw: Raw, ours_raw: Raw) -> None:
    # Both advertise ConsumerGroupHeartbeat and ConsumerGroupDescribe v0-v1.
    assert kip848_versions(ours_raw) == kip848_versions(kafka_raw) == [(68, 0, 1), (69, 0, 1)]
    expected = answers(kafka_raw)
    got = answers(ours_raw)
    assert got == expected
    assert expected["heartbeat into live classic"][0] == codes.GROUP_ID_NOT_FOUND
    assert expected["heartbeat into empty classic"][0] == codes.NONE
    assert heartbeat_errors(ours_raw) == heartbeat_errors(kafka_raw)
    # A classic JoinGroup into a consumer group with members: refused by both. (With the
    # default policy, bidirectional, compactlog admits it, as Kafka 4.4's code does; the
    # comparison below checks a classic member rejoining a converted group.)
    assert live_consumer_group_join(kafka_raw) == codes.INCONSISTENT_GROUP_PROTOCOL
    assert live_consumer_group_join(ours_raw) == codes.INCONSISTENT_GROUP_PROTOCOL


def migration_answers(raw: Raw) -> dict[str, Any]:
    """The online upgrade and downgrade (policy bidirectional), step by step, with what each
    step answered. Member ids and epochs of consumer-protocol members are random or the
    broker's, so only what both must agree on is kept."""
    from compactlog.broker.coordinator.consumer_protocol import (
        Assignment,
        decode_assignment,
        encode_assignment,
    )

    out: dict[str, Any] = {}
    raw.wait_for_coordinator("mig")
    raw.wait_for_shards("mig")
    # A classic group of one member, Stable at generation 1, owning both partitions.
    joined = raw.join("mig")
    classic = joined.member_id
    out["classic join"] = (joined.error_code, joined.generation_id, joined.leader == classic)
    whole = encode_assignment(Assignment(0, (("t", (0, 1)),)))
    synced = raw.call(
        SyncGroupRequest(
            group_id="mig",
            generation_id=joined.generation_id,
            member_id=classic,
            assignments=[{"member_id": classic, "assignment": whole}],
        ),
        3,
    )
    out["leader sync"] = synced.error_code
    # A consumer-protocol member joins: the group is converted, its epoch bumped.
    member = str(uuid.uuid4())
    hb = raw.heartbeat("mig", member, 0)
    out["consumer joins"] = (hb.error_code, hb.error_message, hb.member_epoch)
    out["its first assignment"] = hb.assignment
    listed = raw.call(ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    out["listed after upgrade"] = sorted((g.group_id, g.group_type) for g in listed.groups)
    described = raw.call(ConsumerGroupDescribeRequest(group_ids=["mig"]), 1).groups[0]
    out["described after upgrade"] = (
        described.error_code,
        described.group_state,
        described.group_epoch,
        described.assignment_epoch,
        sorted((m.member_id == classic, m.member_type, m.member_epoch) for m in described.members),
    )
    # The classic member is told to rejoin, and does; the group hands it its part.
    beat = raw.call(HeartbeatRequest(group_id="mig", generation_id=1, member_id=classic), 1)
    out["classic heartbeat"] = beat.error_code
    rejoined = raw.join("mig", member_id=classic)
    out["classic rejoin"] = (
        rejoined.error_code,
        rejoined.generation_id,
        rejoined.protocol_name,
        rejoined.leader,
        len(rejoined.members),
    )
    synced = raw.call(
        SyncGroupRequest(
            group_id="mig",
            generation_id=rejoined.generation_id,
            member_id=classic,
            assignments=[],
        ),
        3,
    )
    got = decode_assignment(synced.assignment) if synced.error_code == codes.NONE else None
    out["classic sync"] = (
        synced.error_code,
        got and [p for _, ps in got.assigned_partitions for p in ps],
    )
    beat = raw.call(
        HeartbeatRequest(group_id="mig", generation_id=rejoined.generation_id, member_id=classic),
        1,
    )
    out["classic heartbeat after sync"] = beat.error_code
    hb = raw.heartbeat("mig", hb.member_id, hb.member_epoch)
    out["consumer gets the freed partition"] = (
        hb.error_code,
        hb.member_epoch,
        hb.assignment and sorted(p for t in hb.assignment.topic_partitions for p in t.partitions),
    )
    # The consumer-protocol member leaves: the group is classic again and rebalances.
    left = raw.heartbeat("mig", hb.member_id, -1)
    out["consumer leaves"] = (left.error_code, left.member_epoch)
    listed = raw.call(ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    out["listed after downgrade"] = sorted(
        (g.group_id, g.group_type, g.group_state) for g in listed.groups
    )
    beat = raw.call(
        HeartbeatRequest(group_id="mig", generation_id=rejoined.generation_id, member_id=classic),
        1,
    )
    out["classic heartbeat after downgrade"] = beat.error_code
    again = raw.join("mig", member_id=classic)
    out["classic rejoin after downgrade"] = (
        again.error_code,
        again.generation_id,
        again.leader == classic,
    )
    return out


def static_replacement_answers(raw: Raw) -> dict[str, Any]:
    """A static classic member takes the place of the last (static) consumer-protocol member:
    the group is classic again at once."""
    from compactlog.broker.coordinator.consumer_protocol import (
        Assignment,
        decode_assignment,
        encode_assignment,
    )

    out: dict[str, Any] = {}
    raw.wait_for_shards("mig-static")
    joined = raw.join("mig-static")
    classic = joined.member_id
    whole = encode_assignment(Assignment(0, (("t", (0, 1)),)))
    raw.call(
        SyncGroupRequest(
            group_id="mig-static",
            generation_id=joined.generation_id,
            member_id=classic,
            assignments=[{"member_id": classic, "assignment": whole}],
        ),
        3,
    )
    hb = raw.heartbeat("mig-static", str(uuid.uuid4()), 0, instance_id="box")
    out["static consumer joins"] = (hb.error_code, hb.member_epoch)
    rejoined = raw.join("mig-static", member_id=classic)
    raw.call(
        SyncGroupRequest(
            group_id="mig-static",
            generation_id=rejoined.generation_id,
            member_id=classic,
            assignments=[],
        ),
        3,
    )
    hb = raw.heartbeat("mig-static", hb.member_id, hb.member_epoch, instance_id="box")
    out["static consumer gets its partition"] = (
        hb.error_code,
        hb.assignment and sorted(p for t in hb.assignment.topic_partitions for p in t.partitions),
    )
    replacing = raw.call(
        JoinGroupRequest(
            group_id="mig-static",
            session_timeout_ms=30_000,
            rebalance_timeout_ms=30_000,
            member_id="",
            group_instance_id="box",
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": subscription("t")}],
        ),
        5,
    )
    out["classic replaces it"] = (
        replacing.error_code,
        replacing.generation_id,
        replacing.protocol_name,
        replacing.leader,
    )
    listed = raw.call(ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    out["listed"] = sorted(
        (g.group_id, g.group_type, g.group_state)
        for g in listed.groups
        if g.group_id == "mig-static"
    )
    synced = raw.call(
        SyncGroupRequest(
            group_id="mig-static",
            generation_id=replacing.generation_id,
            member_id=replacing.member_id,
            group_instance_id="box",
            assignments=[],
        ),
        3,
    )
    got = decode_assignment(synced.assignment) if synced.error_code == codes.NONE else None
    out["its sync"] = (
        synced.error_code,
        got and [p for _, ps in got.assigned_partitions for p in ps],
    )
    return out


def test_online_upgrade_and_downgrade_answer_as_kafka(
    kafka: Callable[..., Any], compactlog_serve: Callable[..., Any]
) -> None:
    """With Kafka's default policy (bidirectional) on both brokers."""
    real = kafka()
    ours = compactlog_serve(SHARED_CONFIG).start()
    for broker in (real, ours):
        created = run_tool(
            "kafka-topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "t",
            "--partitions", "2",
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
    kafka_raw, ours_raw = Raw(real.bootstrap), Raw(ours.bootstrap)
    try:
        expected = migration_answers(kafka_raw)
        got = migration_answers(ours_raw)
        assert got == expected
        static = static_replacement_answers(kafka_raw)
        assert static_replacement_answers(ours_raw) == static
        assert static["listed"] == [("mig-static", "classic", "Stable")]
        assert expected["listed after upgrade"] == [("mig", "consumer")]
    finally:
        kafka_raw.sock.close()
        ours_raw.sock.close()
