"""Authentication meets authorization: SCRAM users and TLS certificate principals under ACLs,
with real clients.

admin is a super user whose SCRAM credential is stored directly (as ``kafka-storage format
--add-scram`` does for Kafka); everything else goes through the clients: admin creates the
users alice and bob with AlterUserScramCredentials, the topic and the ACLs; alice may write and
read topic ``t`` and read group ``g``, bob nothing. The SCRAM credential APIs need the cluster
permissions Kafka asks for (DESCRIBE, ALTER), and a re-authenticated connection keeps its
principal's ACLs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog import errors as codes
from tests.broker.helpers import acl_matrix as m
from tests.broker.helpers.security import Auth, add_scram_user, make_ca, tls_settings
from tests.broker.helpers.server import Brokers

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(240),
    pytest.mark.usefixtures("collect_client_garbage"),
]

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}
SASL = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    **AUTHORIZER,
}
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
TIMEOUT_S = 30


def _auth(user: str, protocol: str = "SASL_PLAINTEXT", ca: Path | None = None) -> Auth:
    return Auth(protocol, ca=ca, mechanism="SCRAM-SHA-256", user=user, password=PASSWORDS[user])


def _conf(b: Any, auth: Auth) -> dict[str, Any]:
    return {"bootstrap.servers": b.bootstrap_for(auth.protocol), **auth.confluent()}


def _admin(b: Any, user: str = "admin") -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(_conf(b, _auth(user)))


def _acl(
    name: str,
    principal: str,
    operation: str,
    *,
    resource: str = "TOPIC",
    pattern: str = "LITERAL",
    permission: str = "ALLOW",
) -> Any:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(
        ResourceType[resource], name, ResourcePatternType[pattern], principal, "*",
        AclOperation[operation], AclPermissionType[permission],
    )  # fmt: skip


def _create_acls(b: Any, *acls: Any) -> None:
    admin = _admin(b)
    for future in admin.create_acls(list(acls)).values():
        future.result(TIMEOUT_S)


def _delete_acls(b: Any, *acls: Any) -> None:
    from confluent_kafka.admin import AclBindingFilter

    filters = [
        AclBindingFilter(
            a.restype, a.name, a.resource_pattern_type, a.principal, a.host, a.operation,
            a.permission_type,
        )
        for a in acls
    ]  # fmt: skip
    admin = _admin(b)
    for future in admin.delete_acls(filters).values():
        assert len(future.result(TIMEOUT_S)) == 1


def _create_topic(b: Any, name: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(b)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT_S)


def _add_users(b: Any, *users: str) -> None:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    changes = [UserScramCredentialUpsertion(u, info, PASSWORDS[u].encode()) for u in users]
    admin = _admin(b)
    for future in admin.alter_user_scram_credentials(changes).values():
        future.result(TIMEOUT_S)


def _produce(b: Any, auth: Auth, topic: str, value: bytes = b"v") -> Any:
    """Produce one record with confluent-kafka; its delivery error (None when delivered)."""
    from confluent_kafka import Producer

    delivered: list[Any] = []
    producer = Producer({**_conf(b, auth), "message.timeout.ms": 20_000})
    producer.produce(topic, value, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    return delivered[0]


def _consume(b: Any, auth: Auth, topic: str, group: str) -> Any:
    """The first value a confluent-kafka consumer in ``group`` reads, or its error."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {**_conf(b, auth), "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                return msg.error() or msg.value()
        return None
    finally:
        consumer.close()


def _topics(b: Any, auth: Auth) -> set[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_conf(b, auth))
    return set(admin.list_topics(timeout=TIMEOUT_S).topics)


def _kcat(b: Any, auth: Auth, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["kcat", "-b", b.bootstrap_for(auth.protocol), *auth.kcat(), *args],
        capture_output=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def alice_and_bob(brokers: Brokers) -> Iterator[Any]:
    """A broker with admin (super user), alice and bob, topic ``t`` holding one record, and
    alice's ACLs: READ and WRITE on ``t``, READ on group ``g``."""
    b = brokers.start(config=SASL)
    add_scram_user(b, "admin", PASSWORDS["admin"])
    _add_users(b, "alice", "bob")
    _create_topic(b, "t")
    _create_acls(
        b,
        _acl("t", "User:alice", "READ"),
        _acl("t", "User:alice", "WRITE"),
        _acl("g", "User:alice", "READ", resource="GROUP"),
    )
    yield b


def _alice_allowed_bob_refused(b: Any) -> None:
    from confluent_kafka import KafkaError

    alice, bob = _auth("alice"), _auth("bob")
    assert _produce(b, alice, "t", b"from-alice") is None
    assert _consume(b, alice, "t", "g") == b"from-alice"
    assert _produce(b, bob, "t").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _consume(b, bob, "t", "g").code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert "t" in _topics(b, alice)
    assert "t" not in _topics(b, bob)


def test_alice_produces_and_consumes_bob_is_refused(alice_and_bob: Any) -> None:
    _alice_allowed_bob_refused(alice_and_bob)


def test_kcat_kafka_python_and_aiokafka_under_the_acls(alice_and_bob: Any) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TopicAuthorizationFailedError
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import GroupAuthorizationFailedError

    b = alice_and_bob
    alice, bob = _auth("alice"), _auth("bob")
    bootstrap = b.bootstrap_for("SASL_PLAINTEXT")

    # kcat: alice produces and reads back; bob's listing leaves t out, his produce is refused.
    produced = subprocess.run(
        ["kcat", "-b", bootstrap, *alice.kcat(), "-P", "-t", "t"],
        input=b"kcat-alice\n", capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    read = _kcat(b, alice, "-C", "-t", "t", "-e", "-o", "beginning", "-f", "%s\\n")
    assert read.returncode == 0 and b"kcat-alice" in read.stdout, read.stderr
    listing = _kcat(b, bob, "-L", "-J")
    assert listing.returncode == 0, listing.stderr
    assert "t" not in [t["topic"] for t in json.loads(listing.stdout)["topics"]]
    refused = subprocess.run(
        ["kcat", "-b", bootstrap, *bob.kcat(), "-P", "-t", "t"],
        input=b"kcat-bob\n", capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert b"authoriz" in refused.stderr.lower(), refused.stderr

    # kafka-python: alice produces; bob's consumer in g is refused the group.
    producer = KafkaProducer(bootstrap_servers=bootstrap, **alice.kafka_python())
    try:
        assert producer.send("t", b"kafka-python-alice").get(timeout=TIMEOUT_S).offset >= 0
    finally:
        producer.close()
    consumer = KafkaConsumer(
        "t", bootstrap_servers=bootstrap, group_id="g", auto_offset_reset="earliest",
        consumer_timeout_ms=20_000, **bob.kafka_python(),
    )  # fmt: skip
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(40):
                consumer.poll(timeout_ms=500)
    finally:
        consumer.close()

    # aiokafka: alice's record is written, bob's is refused the topic.
    async def produce(auth: Auth) -> Any:
        p = AIOKafkaProducer(
            bootstrap_servers=bootstrap, request_timeout_ms=10_000, **auth.aiokafka()
        )
        await asyncio.wait_for(p.start(), TIMEOUT_S)
        try:
            return await asyncio.wait_for(p.send_and_wait("t", b"aiokafka"), TIMEOUT_S)
        finally:
            await p.stop()

    assert asyncio.run(produce(alice)).offset >= 0
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(produce(bob))


def test_prefixed_deny_wins_and_everyone_allow(alice_and_bob: Any) -> None:
    from confluent_kafka import KafkaError

    b = alice_and_bob
    alice, bob = _auth("alice"), _auth("bob")
    assert _produce(b, alice, "t", b"before") is None
    deny = _acl("t", "User:alice", "WRITE", pattern="PREFIXED", permission="DENY")
    _create_acls(b, deny)
    assert _produce(b, alice, "t").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _consume(b, alice, "t", "g") == b"before"  # READ is not denied
    _delete_acls(b, deny)
    assert _produce(b, alice, "t") is None

    _create_topic(b, "public")
    _create_acls(b, _acl("public", "User:*", "WRITE"), _acl("public", "User:*", "READ"))
    assert _produce(b, bob, "public", b"from-bob") is None
    assert "public" in _topics(b, bob) and "t" not in _topics(b, bob)


def test_acls_and_users_survive_a_restart(brokers: Brokers, alice_and_bob: Any) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    b = brokers.restart(alice_and_bob, config=SASL)
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY,
    )  # fmt: skip
    admin = _admin(b)
    listed = admin.describe_acls(everything).result(TIMEOUT_S)
    assert sorted((a.name, a.principal, a.operation.name) for a in listed) == [
        ("g", "User:alice", "READ"),
        ("t", "User:alice", "READ"),
        ("t", "User:alice", "WRITE"),
    ]
    users = admin.describe_user_scram_credentials().result(TIMEOUT_S)
    assert set(users) == {"admin", "alice", "bob"}
    _alice_allowed_bob_refused(b)


def test_scram_credential_apis_need_cluster_permissions(alice_and_bob: Any) -> None:
    """bob may neither describe nor alter SCRAM credentials (CLUSTER_AUTHORIZATION_FAILED, as
    kafka-python and confluent-kafka surface it); admin may; DESCRIBE on the cluster lets bob
    describe but not alter. (kafka-python describes: confluent-kafka 2.16's librdkafka aborts the
    process on a DescribeUserScramCredentials response with a top-level error.)"""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    from kafka import KafkaAdminClient
    from kafka.errors import ClusterAuthorizationFailedError

    b = alice_and_bob
    change = UserScramCredentialUpsertion(
        "mallory", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"mallory-secret"
    )

    def describe(user: str) -> Any:
        admin = KafkaAdminClient(
            bootstrap_servers=b.bootstrap_for("SASL_PLAINTEXT"), **_auth(user).kafka_python()
        )
        try:
            return set(admin.describe_user_scram_credentials())
        except ClusterAuthorizationFailedError:
            return KafkaError.CLUSTER_AUTHORIZATION_FAILED
        finally:
            admin.close()

    def alter(user: str) -> Any:
        admin = _admin(b, user)
        try:
            return admin.alter_user_scram_credentials([change])["mallory"].result(TIMEOUT_S)
        except KafkaException as exc:
            return exc.args[0].code()

    assert describe("bob") == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert alter("bob") == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert describe("admin") == {"admin", "alice", "bob"}  # mallory was not added
    _create_acls(b, _acl("kafka-cluster", "User:bob", "DESCRIBE", resource="BROKER"))
    assert describe("bob") == {"admin", "alice", "bob"}
    assert alter("bob") == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert alter("admin") is None
    assert describe("admin") == {"admin", "alice", "bob", "mallory"}


def test_denied_credential_apis_answer_as_kafka(alice_and_bob: Any) -> None:
    """The refusals field for field as Kafka's error responses, asked by User:ANONYMOUS on the
    PLAINTEXT listener: DescribeUserScramCredentials a top-level code without message and one
    result per user asked, unnamed; AlterUserScramCredentials each user once, in order;
    DescribeClientQuotas (DESCRIBE_CONFIGS on the cluster) no entries. Nothing is changed."""
    b = alice_and_bob
    denied = codes.CLUSTER_AUTHORIZATION_FAILED
    with m.RawClient(b.bootstrap_for("PLAINTEXT"), "127.0.0.1") as c:
        described = c.request(50, 0, users=[{"name": "alice"}, {"name": "nobody"}])
        assert (described.error_code, described.error_message) == (denied, None)
        assert [(r.user, r.error_code, r.error_message, r.credential_infos)
                for r in described.results] == [("", denied, None, [])] * 2  # fmt: skip
        described = c.request(50, 0, users=None)
        assert (described.error_code, described.results) == (denied, [])
        upsert = {"name": "bob", "mechanism": 1, "iterations": 4096, "salt": b"s" * 16,
                  "salted_password": b"p" * 32}  # fmt: skip
        altered = c.request(
            51, 0,
            deletions=[{"name": "alice", "mechanism": 1}, {"name": "alice", "mechanism": 2}],
            upsertions=[upsert],
        )  # fmt: skip
        assert [(r.user, r.error_code, r.error_message) for r in altered.results] == [
            ("alice", denied, "Cluster authorization failed."),
            ("bob", denied, "Cluster authorization failed."),
        ]
        quotas = c.request(48, 0, components=[], strict=False)
        assert (quotas.error_code, quotas.error_message, quotas.entries) == (denied, None, None)
    # SaslHandshake and SaslAuthenticate are never authorized: refused for the SASL state
    with m.RawClient(b.bootstrap_for("PLAINTEXT"), "127.0.0.1") as c:
        handshake = c.request(17, 1, mechanism="PLAIN")
        assert (handshake.error_code, handshake.mechanisms) == (codes.ILLEGAL_SASL_STATE, [])
        authenticate = c.request(36, 2, auth_bytes=b"\0alice\0alice-secret")
        assert authenticate.error_code == codes.ILLEGAL_SASL_STATE
    # alice and bob still log in with their passwords
    assert _produce(b, _auth("alice"), "t") is None
    assert "t" not in _topics(b, _auth("bob"))


def test_reauthentication_keeps_the_acls(brokers: Brokers) -> None:
    """connections.max.reauth.ms=2000: alice's producer re-authenticates on its connection and
    goes on writing; an ACL removed meanwhile applies to that same connection at once."""
    from confluent_kafka import KafkaError, Producer

    b = brokers.start(config={**SASL, "connections.max.reauth.ms": 2000})
    add_scram_user(b, "admin", PASSWORDS["admin"])
    _add_users(b, "alice")
    _create_topic(b, "t")
    write = _acl("t", "User:alice", "WRITE")
    _create_acls(b, write)

    errors: list[Any] = []
    producer = Producer({**_conf(b, _auth("alice")), "message.timeout.ms": 20_000})

    def send(n: int) -> None:
        for _ in range(n):
            producer.produce("t", b"v", on_delivery=lambda err, msg: errors.append(err))
            producer.flush(TIMEOUT_S)
            time.sleep(0.25)

    def reauths() -> int:
        return max((c._auth.reauthentications for c in b.broker._connections if c._auth), default=0)

    deadline = time.monotonic() + 60
    while b.call(reauths) < 2 and time.monotonic() < deadline:
        send(4)
    assert b.call(reauths) >= 2
    assert errors and all(e is None for e in errors), errors
    written = len(errors)
    assert b.call(lambda: b.broker.store.log("t", 0).log_end_offset) == written

    _delete_acls(b, write)
    errors.clear()
    send(1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    producer.flush(TIMEOUT_S)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ca(tmp_path_factory.mktemp("ca"), "--client", "carol", "--client", "dave")


def test_sasl_ssl_and_certificate_principals(brokers: Brokers, ca: Path) -> None:
    """Over SASL_SSL alice's SCRAM principal gets her ACLs; on an SSL listener requiring client
    certificates the principal is the certificate's subject: carol's is granted, dave's not."""
    from confluent_kafka import KafkaError

    b = brokers.start(
        config={
            **AUTHORIZER,
            "listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            **tls_settings(ca),
            "listener.name.ssl.ssl.client.auth": "required",
        }
    )
    add_scram_user(b, "admin", PASSWORDS["admin"])
    admin_auth = _auth("admin", "SASL_SSL", ca)

    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(_conf(b, admin_auth))
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(TIMEOUT_S)
    acls = [
        _acl("t", "User:alice", "WRITE"),
        _acl("t", "User:alice", "READ"),
        _acl("g", "User:alice", "READ", resource="GROUP"),
        _acl("t", "User:O=compactlog test,CN=carol", "WRITE"),
    ]
    for future in admin.create_acls(acls).values():
        future.result(TIMEOUT_S)
    add_scram_user(b, "alice", PASSWORDS["alice"])

    alice = _auth("alice", "SASL_SSL", ca)
    assert _produce(b, alice, "t", b"over-tls") is None
    assert _consume(b, alice, "t", "g") == b"over-tls"
    carol = Auth("SSL", ca=ca, cert="carol")
    dave = Auth("SSL", ca=ca, cert="dave")
    assert _produce(b, carol, "t", b"carol") is None
    assert _produce(b, dave, "t").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert b.call(lambda: b.broker.store.log("t", 0).log_end_offset) == 2


def test_plaintext_beyond_loopback_starts_with_an_authorizer(brokers: Brokers) -> None:
    """The safe-by-default refusal is lifted by authorizer.class.name alone, and the ACLs then
    apply to User:ANONYMOUS on that listener: it may not even create a topic."""
    from confluent_kafka import KafkaError

    b = brokers.start(
        config={
            "listeners": "PLAINTEXT://0.0.0.0:0",
            "advertised.listeners": "PLAINTEXT://127.0.0.1:0",
            **AUTHORIZER,
        }
    )
    error = _produce(b, Auth("PLAINTEXT"), "anything")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    assert "anything" not in b.call(b.broker.store.topics)


def test_serve_on_every_interface_with_an_authorizer(tmp_path: Path) -> None:
    """``compactlog serve --listen 0.0.0.0:PORT`` starts when authorizer.class.name is set, and
    its clients (User:ANONYMOUS, no ACL) see no topic and may not create one."""
    from tests.broker.helpers.server import CliBroker

    class EveryInterface(CliBroker):
        def command(self) -> list[str]:
            cmd = super().command()
            cmd[cmd.index("--listen") + 1] = f"0.0.0.0:{self.port}"
            return cmd

    served = EveryInterface(
        tmp_path / "data",
        {"authorizer.class.name": AUTHORIZER["authorizer.class.name"]},
        tmp_path / "serve.log",
    ).start()
    try:
        with m.RawClient(served.bootstrap, "127.0.0.1") as c:
            listed = c.request(3, 12, topics=None, allow_auto_topic_creation=True,
                               include_topic_authorized_operations=False)  # fmt: skip
            assert listed.topics == []
            named = c.request(3, 12, topics=[{"topic_id": uuid.UUID(int=0), "name": "x"}],
                              allow_auto_topic_creation=True,
                              include_topic_authorized_operations=False)  # fmt: skip
            assert [t.error_code for t in named.topics] == [codes.TOPIC_AUTHORIZATION_FAILED]
    finally:
        assert served.terminate() == 0
