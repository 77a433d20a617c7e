"""ACLs with real clients: the admin ACL calls of confluent-kafka and kafka-python, producers,
consumers and kcat refused or served by the ACLs, auto-creation, the audit log line,
persistence and the settings (the matrix of every API is in test_acls_matrix.py)."""

from __future__ import annotations

import json
import logging
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from compactlog.broker.settings import BrokerSettings
from compactlog.errors import ConfigError, StorageError
from compactlog.storage.verify import verify_data_dir
from tests.broker.helpers import acl_matrix as m
from tests.broker.helpers.server import Brokers

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("collect_client_garbage"),
]

CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER = {"authorizer.class.name": CLASS}
SUPER = {**AUTHORIZER, "super.users": "User:ANONYMOUS"}


def _admin_host_broker(brokers: Brokers, topics: list[str]) -> Any:
    """A broker whose cluster may be administered from 127.0.0.2 only (an ACL made while
    User:ANONYMOUS was a super user), with ``topics``; restarted without super users."""
    setup = brokers.start(config=SUPER)
    with m.RawClient(setup.bootstrap, m.ALLOWED_HOST) as c:
        c.request(
            30, 3,
            creations=[m.binding(m.CLUSTER_T, "kafka-cluster")]
            + [m.binding(m.TOPIC_T, t) for t in topics],
        )  # fmt: skip
        for t in topics:
            c.request(
                19, 7, topics=[{"name": t, "num_partitions": 1, "replication_factor": 1}],
                timeout_ms=10000, validate_only=False,
            )  # fmt: skip
    return brokers.restart(setup, config=AUTHORIZER)


def _grant(bootstrap: str, *acls: tuple[int, str, int, str]) -> None:
    """ALLOW User:* from any host: (resource type, name, operation, pattern 'L'/'P')."""
    with m.RawClient(bootstrap, m.ALLOWED_HOST) as c:
        result = c.request(
            30, 3,
            creations=[
                {"resource_type": rtype, "resource_name": name,
                 "resource_pattern_type": 3 if pattern == "L" else 4, "principal": "User:*",
                 "host": "*", "operation": op, "permission_type": 3}
                for rtype, name, op, pattern in acls
            ],
        )  # fmt: skip
        assert all(r.error_code == 0 for r in result.results), result


READ, WRITE, CREATE, DESCRIBE = 3, 4, 5, 8


def test_confluent_admin_acl_calls(brokers: Brokers) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    broker = brokers.start(config=SUPER)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    read_t = AclBinding(
        ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    deny_g = AclBinding(
        ResourceType.GROUP, "app-", ResourcePatternType.PREFIXED, "User:bob", "10.0.0.1",
        AclOperation.ALL, AclPermissionType.DENY,
    )  # fmt: skip
    for future in admin.create_acls([read_t, deny_g]).values():
        assert future.result(timeout=30) is None
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY,
    )  # fmt: skip
    assert sorted(map(str, admin.describe_acls(everything).result(timeout=30))) == sorted(
        map(str, [read_t, deny_g])
    )
    # MATCH: the ACLs that apply to group app-1 (the prefixed one), and none for topic u.
    match = AclBindingFilter(
        ResourceType.GROUP, "app-1", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
        AclPermissionType.ANY,
    )  # fmt: skip
    assert admin.describe_acls(match).result(timeout=30) == [deny_g]
    deleted = admin.delete_acls([everything])[everything].result(timeout=30)
    assert sorted(map(str, deleted)) == sorted(map(str, [read_t, deny_g]))
    assert admin.describe_acls(everything).result(timeout=30) == []
    # A binding Kafka refuses: INVALID_REQUEST for it.
    bad = AclBinding(
        ResourceType.BROKER, "x", ResourcePatternType.LITERAL, "User:a", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([bad])[bad].result(timeout=30)
    assert refused.value.args[0].code() == 42  # INVALID_REQUEST


def test_acl_calls_without_an_authorizer_are_security_disabled(brokers: Brokers) -> None:
    """SECURITY_DISABLED (54), as Kafka answers (kafka-python raises it; librdkafka 2.x drops
    DescribeAcls' top-level error and returns an empty list)."""
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.errors import SecurityDisabledError

    broker = brokers.start()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        flt = ACLFilter(
            None, None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
        )  # fmt: skip
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls(flt)
    finally:
        admin.close()


def test_kafka_python_admin_acl_calls(brokers: Brokers) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    broker = brokers.start(config=SUPER)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        acl = ACL(
            "User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, "pay", ACLResourcePatternType.PREFIXED),
        )  # fmt: skip
        created = admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        flt = ACLFilter(
            None, None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
        )  # fmt: skip
        described, error = admin.describe_acls(flt)
        assert error.errno == 0 and [str(a) for a in described] == [str(acl)]
        deleted = admin.delete_acls([flt])
        assert [str(a) for a in deleted[0][1]] == [str(acl)]
    finally:
        admin.close()


def test_producers_consumers_and_kcat_see_only_what_the_acls_allow(brokers: Brokers) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer

    broker = _admin_host_broker(brokers, ["open", "closed"])
    _grant(
        broker.bootstrap,
        (m.TOPIC_T, "open", WRITE, "L"), (m.TOPIC_T, "open", READ, "L"),
        (m.GROUP_T, "readers-", READ, "P"),
    )  # fmt: skip
    # kcat -L: the topic that may not be described is not listed.
    listing = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-L", "-J"], capture_output=True, timeout=60, check=True
    )
    assert [t["topic"] for t in json.loads(listing.stdout)["topics"]] == ["open"]

    errors: dict[str, Any] = {}

    def report(err: Any, msg: Any) -> None:
        errors[msg.topic()] = err

    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 20000})
    producer.produce("open", b"v", key=b"k", on_delivery=report)
    producer.produce("closed", b"v", key=b"k", on_delivery=report)
    assert producer.flush(30) == 0
    assert errors["open"] is None
    assert errors["closed"].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    def consume(group: str) -> Any:
        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": group,
             "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )  # fmt: skip
        try:
            consumer.subscribe(["open"])
            for _ in range(60):
                msg = consumer.poll(0.5)
                if msg is not None:
                    return msg.error() or msg.value()
            return None
        finally:
            consumer.close()

    assert consume("readers-1") == b"v"
    refused = consume("others")
    assert refused is not None and refused.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_auto_creation_needs_create(brokers: Brokers) -> None:
    broker = _admin_host_broker(brokers, [])
    _grant(broker.bootstrap, (m.TOPIC_T, "auto-", DESCRIBE, "P"))

    def metadata(name: str) -> int:
        with m.RawClient(broker.bootstrap, m.DENIED_HOST) as c:
            body = c.request(3, 12, topics=[{"name": name}], allow_auto_topic_creation=True)
        return int(body.topics[0].error_code)

    assert metadata("auto-a") == 29  # may describe, may not create: TOPIC_AUTHORIZATION_FAILED
    _grant(broker.bootstrap, (m.TOPIC_T, "auto-b", CREATE, "L"))
    assert metadata("auto-b") == 0  # CREATE on the topic is enough
    assert "auto-b" in broker.broker.store.topics()
    assert "auto-a" not in broker.broker.store.topics()


def test_denials_are_logged_like_kafkas_authorizer(
    brokers: Brokers, caplog: pytest.LogCaptureFixture
) -> None:
    broker = _admin_host_broker(brokers, ["t"])
    caplog.set_level(logging.INFO, logger="compactlog.broker")
    with m.RawClient(broker.bootstrap, m.DENIED_HOST) as c:
        c.request(2, 7, topics=[{"name": "t", "partitions": [{"partition_index": 0}]}])
    lines = [r.getMessage() for r in caplog.records if "is Denied operation" in r.getMessage()]
    assert lines == [
        "Principal = User:ANONYMOUS is Denied operation = DESCRIBE from host = 127.0.0.1 on "
        "resource = Topic:LITERAL:t for request = ListOffsets with resourceRefCount = 1 based on "
        "rule DefaultDeny"
    ]


def test_acls_survive_restarts_and_a_damaged_file_refuses_the_start(
    brokers: Brokers, tmp_path: Path
) -> None:
    broker = _admin_host_broker(brokers, ["t"])
    data = Path(broker.broker.store.path)
    _grant(broker.bootstrap, (m.TOPIC_T, "t", READ, "L"))
    brokers.stop(broker)
    stored = json.loads((data / "compactlog-acls.json").read_text())
    assert {"resource_type": "TOPIC", "resource_name": "t", "pattern_type": "LITERAL",
            "principal": "User:*", "host": "*", "operation": "READ",
            "permission_type": "ALLOW"} in stored["acls"]  # fmt: skip
    assert not [n for n in verify_data_dir(str(data)).notes if "acls" in str(n)]
    # Without an authorizer the file is left alone; with one again, the ACLs are back.
    brokers.stop(brokers.start(data))
    again = brokers.start(data, config=AUTHORIZER)
    with m.RawClient(again.bootstrap, m.DENIED_HOST) as c:
        body = c.request(2, 7, topics=[{"name": "t", "partitions": [{"partition_index": 0}]}])
    assert body.topics[0].partitions[0].error_code == 0  # READ implies DESCRIBE
    brokers.stop(again)
    (data / "compactlog-acls.json").write_text('{"version": 1, "acls": [{"oops": 1}]}')
    with pytest.raises(StorageError, match=r"compactlog-acls\.json is damaged"):
        brokers.start(data, config=AUTHORIZER)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"},
         "compactlog implements only org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
        ({**AUTHORIZER, "super.users": "admin"}, "super.users: 'admin' is not a principal"),
        ({"allow.everyone.if.no.acl.found": "maybe"}, "allow.everyone.if.no.acl.found"),
    ],
)  # fmt: skip
def test_settings_refused(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        BrokerSettings.from_mapping(config)


def test_allow_everyone_if_no_acl_found(brokers: Brokers) -> None:
    broker = brokers.start(config={**AUTHORIZER, "allow.everyone.if.no.acl.found": "true"})
    topic = f"t-{uuid.uuid4().hex[:6]}"
    with m.RawClient(broker.bootstrap, m.DENIED_HOST) as c:
        created = c.request(
            19, 7, topics=[{"name": topic, "num_partitions": 1, "replication_factor": 1}],
            timeout_ms=10000, validate_only=False,
        )  # fmt: skip
        assert created.topics[0].error_code == 0
        # One ACL on the topic (for someone else) and the default no longer applies to it.
        c.request(
            30,
            3,
            creations=[{**m.binding(m.TOPIC_T, topic, "*"), "principal": "User:someone"}],
        )
        body = c.request(2, 7, topics=[{"name": topic, "partitions": [{"partition_index": 0}]}])
    assert body.topics[0].partitions[0].error_code == 29


def test_fetch_waits_for_readable_partitions_only(brokers: Brokers) -> None:
    """As in Kafka: a fetch whose partitions are all refused is answered at once, whatever
    ``max_wait_ms``; one with a readable partition still long-polls for it."""
    import time

    broker = _admin_host_broker(brokers, ["t", "u"])
    _grant(broker.bootstrap, (m.TOPIC_T, "t", READ, "L"))

    def fetch(topics: list[str], max_wait_ms: int) -> tuple[dict[str, int], float]:
        with m.RawClient(broker.bootstrap, m.DENIED_HOST, timeout=60) as c:
            started = time.monotonic()
            body = c.request(
                1, 11, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1,
                max_bytes=1 << 20, session_epoch=-1,
                topics=[{"topic": t, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                     "current_leader_epoch": -1, "log_start_offset": -1}]} for t in topics],
            )  # fmt: skip
            elapsed = time.monotonic() - started
        return {r.topic: r.partitions[0].error_code for r in body.responses}, elapsed

    codes, elapsed = fetch(["u"], 20_000)
    assert codes == {"u": 29}
    assert elapsed < 10, f"{elapsed:.1f} s: the refusal waited for max_wait_ms"
    codes, elapsed = fetch(["t", "u"], 1500)
    assert codes == {"t": 0, "u": 29}
    assert elapsed >= 1.2, f"{elapsed:.2f} s: the readable partition was not waited for"


def test_aiokafka_and_kafka_python_get_kafkas_authorization_errors(brokers: Brokers) -> None:
    """aiokafka's producer raises TopicAuthorizationFailedError for a topic it may not write;
    kafka-python's consumer raises GroupAuthorizationFailedError for a group it may not read."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TopicAuthorizationFailedError
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError

    broker = _admin_host_broker(brokers, ["open", "closed"])
    _grant(broker.bootstrap, (m.TOPIC_T, "open", WRITE, "L"), (m.TOPIC_T, "open", READ, "L"))

    async def produce() -> tuple[Any, BaseException | None]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        await asyncio.wait_for(producer.start(), 30)
        try:
            sent = await asyncio.wait_for(producer.send_and_wait("open", b"v", key=b"k"), 30)
            try:
                await asyncio.wait_for(producer.send_and_wait("closed", b"v", key=b"k"), 30)
            except TopicAuthorizationFailedError as exc:
                return sent, exc
            return sent, None
        finally:
            await producer.stop()

    sent, refused = asyncio.run(produce())
    assert sent.offset == 0
    assert isinstance(refused, TopicAuthorizationFailedError)

    consumer = KafkaConsumer(
        "open", bootstrap_servers=broker.bootstrap, group_id="not-allowed",
        auto_offset_reset="earliest", consumer_timeout_ms=20_000,
    )  # fmt: skip
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(40):
                consumer.poll(timeout_ms=500)
    finally:
        consumer.close()
