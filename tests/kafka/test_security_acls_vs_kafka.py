"""SCRAM users under ACLs, against Kafka 4.4 and against compactlog, outcome for outcome.

Both brokers get a PLAINTEXT listener (every client there is ``User:ANONYMOUS``) and a
SASL_PLAINTEXT listener with SCRAM-SHA-256. While ``User:ANONYMOUS`` is a super user, the same
requests over PLAINTEXT create the users alice and bob (AlterUserScramCredentials), topic ``t``
and alice's ACLs (READ and WRITE on ``t``, READ on group ``g``); both brokers are then restarted
without it. alice and bob then produce, consume and list topics with confluent-kafka over
SASL_PLAINTEXT, and ``User:ANONYMOUS`` sends the SCRAM credential APIs it may not use: every
outcome must be the same on both. Kafka's controller listener is SASL PLAIN with its own super
user, as in test_acls_vs_kafka.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.helpers import acl_matrix as m
from tests.broker.helpers.server import Brokers
from tests.kafka.harness import KafkaBroker, free_port, run_tool

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_CONTROLLER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)
_SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
TIMEOUT_S = 30


class Pair:
    def __init__(self, kafka: KafkaBroker, sasl_port: int, brokers: Brokers, ours: Any) -> None:
        self.kafka = kafka
        self.sasl_port = sasl_port
        self.brokers = brokers
        self.ours = ours

    def plaintext(self) -> tuple[str, str]:
        return self.kafka.bootstrap, self.ours.bootstrap_for("PLAINTEXT")

    def sasl(self) -> tuple[str, str]:
        return f"127.0.0.1:{self.sasl_port}", self.ours.bootstrap_for("SASL_PLAINTEXT")


def _kafka(workdir: Path, super_users: str) -> tuple[KafkaBroker, int]:
    kafka = KafkaBroker(workdir, config={"authorizer.class.name": CLASS})
    sasl_port = free_port()
    kafka.config.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
            f"CONTROLLER://127.0.0.1:{kafka.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": _CONTROLLER_JAAS,
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": _SCRAM_JAAS,
            "super.users": super_users,
        }
    )
    return kafka, sasl_port


def _ours_config(super_users: str) -> dict[str, Any]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "authorizer.class.name": CLASS,
        "super.users": super_users,
        "node.id": 1,
    }


def _setup(bootstrap: str) -> None:
    """As User:ANONYMOUS, a super user: the users, the topic and alice's ACLs."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    changes = [UserScramCredentialUpsertion(u, info, p.encode()) for u, p in PASSWORDS.items()]
    for future in admin.alter_user_scram_credentials(changes).values():
        future.result(TIMEOUT_S)
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(TIMEOUT_S)

    def acl(rtype: Any, name: str, op: Any) -> Any:
        return AclBinding(
            rtype, name, ResourcePatternType.LITERAL, "User:alice", "*", op,
            AclPermissionType.ALLOW,
        )  # fmt: skip

    acls = [
        acl(ResourceType.TOPIC, "t", AclOperation.READ),
        acl(ResourceType.TOPIC, "t", AclOperation.WRITE),
        acl(ResourceType.GROUP, "g", AclOperation.READ),
    ]
    for future in admin.create_acls(acls).values():
        future.result(TIMEOUT_S)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    work = tmp_path_factory.mktemp("security-acls-vs-kafka")
    kafka, sasl_port = _kafka(work / "kafka", "User:admin;User:ANONYMOUS")
    brokers = Brokers(work / "compactlog")
    try:
        kafka.start()
        ours = brokers.start(Path(work / "compactlog"), config=_ours_config("User:ANONYMOUS"))
        for bootstrap in (kafka.bootstrap, ours.bootstrap_for("PLAINTEXT")):
            _setup(bootstrap)
        kafka.stop()
        kafka.config["super.users"] = "User:admin"
        kafka.start()
        ours = brokers.restart(ours, config=_ours_config(""))
        yield Pair(kafka, sasl_port, brokers, ours)
    finally:
        brokers.stop_all()
        if kafka.running:
            kafka.stop()


def _conf(bootstrap: str, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


def _produce(bootstrap: str, user: str, value: bytes) -> str:
    from confluent_kafka import Producer

    delivered: list[Any] = []
    producer = Producer({**_conf(bootstrap, user), "message.timeout.ms": 20_000})
    producer.produce("t", value, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    return "delivered" if delivered[0] is None else delivered[0].name()


def _consume(bootstrap: str, user: str) -> Any:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {**_conf(bootstrap, user), "group.id": "g", "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )  # fmt: skip
    try:
        consumer.subscribe(["t"])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                return msg.error().name() if msg.error() else msg.value()
        return None
    finally:
        consumer.close()


def _topics(bootstrap: str, user: str) -> list[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_conf(bootstrap, user))
    return sorted(t for t in admin.list_topics(timeout=TIMEOUT_S).topics if t == "t")


def test_alice_and_bob_same_as_kafka(pair: Pair) -> None:
    outcomes = []
    for bootstrap in pair.sasl():
        outcomes.append(
            {
                "alice produces": _produce(bootstrap, "alice", b"from-alice"),
                "bob produces": _produce(bootstrap, "bob", b"from-bob"),
                "alice consumes": _consume(bootstrap, "alice"),
                "bob consumes": _consume(bootstrap, "bob"),
                "alice lists": _topics(bootstrap, "alice"),
                "bob lists": _topics(bootstrap, "bob"),
            }
        )
    kafka, ours = outcomes
    assert kafka == {
        "alice produces": "delivered",
        "bob produces": "TOPIC_AUTHORIZATION_FAILED",
        "alice consumes": b"from-alice",
        "bob consumes": "GROUP_AUTHORIZATION_FAILED",
        "alice lists": ["t"],
        "bob lists": [],
    }
    assert ours == kafka


def _credential_refusals(bootstrap: str) -> list[Any]:
    """User:ANONYMOUS, no longer a super user, asks for the SCRAM credentials and quotas."""
    upsert = {"name": "bob", "mechanism": 1, "iterations": 4096, "salt": b"s" * 16,
              "salted_password": b"p" * 32}  # fmt: skip
    with m.RawClient(bootstrap, "127.0.0.1") as c:
        named = c.request(50, 0, users=[{"name": "alice"}, {"name": "nobody"}])
        every = c.request(50, 0, users=[])
        altered = c.request(
            51, 0,
            deletions=[{"name": "alice", "mechanism": 1}, {"name": "zed", "mechanism": 2}],
            upsertions=[upsert],
        )  # fmt: skip
        quotas = c.request(48, 1, components=[], strict=False)
    # SaslHandshake and SaslAuthenticate are never authorized: on a PLAINTEXT listener they
    # are refused for the SASL state, not for the ACLs.
    with m.RawClient(bootstrap, "127.0.0.1") as c:
        handshake = c.request(17, 1, mechanism="PLAIN")
    with m.RawClient(bootstrap, "127.0.0.1") as c:
        authenticate = c.request(36, 2, auth_bytes=b"\0alice\0alice-secret")
    return [
        (handshake.error_code, handshake.mechanisms),
        (authenticate.error_code, authenticate.error_message),
        (named.error_code, named.error_message,
         [(r.user, r.error_code, r.error_message, r.credential_infos) for r in named.results]),
        (every.error_code, every.error_message, every.results),
        [(r.user, r.error_code) for r in altered.results],
        (quotas.error_code, quotas.error_message, quotas.entries),
    ]  # fmt: skip


def test_credential_apis_refused_as_kafka(pair: Pair) -> None:
    """Codes, messages and results as Kafka's, except AlterUserScramCredentials' message (Kafka's
    names its request object) and a DescribeUserScramCredentials with a null user list, which
    Kafka 4.4 leaves unanswered (its error response walks the null list) and compactlog answers
    with the top-level code and no results."""
    kafka_bootstrap, ours_bootstrap = pair.plaintext()
    kafka = _credential_refusals(kafka_bootstrap)
    assert kafka[2][0] == 31
    assert _credential_refusals(ours_bootstrap) == kafka


def test_kafka_configs_refused_as_kafka(pair: Pair) -> None:
    """Kafka's kafka-configs, run by User:ANONYMOUS: describing and changing users fails the
    same way against both, with the same exception and message, except the message of a refused
    change (Kafka 4.4's controller prints its request object: "Request Request(...) needs ALTER
    permission.")."""
    outcomes = []
    for bootstrap in pair.plaintext():
        runs = []
        for args in (
            ("--describe",),
            ("--describe", "--entity-name", "alice"),
            ("--alter", "--entity-name", "carol", "--add-config",
             "SCRAM-SHA-256=[password=carol-secret]"),
        ):  # fmt: skip
            done = run_tool(
                "kafka-configs", "--bootstrap-server", bootstrap, "--entity-type", "users", *args
            )
            causes = [line for line in done.stderr.splitlines() if "Exception:" in line]
            exception, _, message = causes[-1].partition("Exception: ")
            if args[0] == "--alter":
                message = "(not compared)"
            runs.append((done.returncode, done.stdout, exception, message))
        outcomes.append(runs)
    kafka, ours = outcomes
    assert kafka[0] == (
        1, "", "Caused by: org.apache.kafka.common.errors.ClusterAuthorization",
        "Cluster authorization failed.",
    )  # fmt: skip
    assert ours == kafka
