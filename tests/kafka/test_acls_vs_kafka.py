"""The ACL matrix (tests/broker/helpers/acl_matrix.py) against Kafka 4.4 with its
StandardAuthorizer and against compactlog, code for code; and ``kafka-acls`` against both.

Kafka's own controller must stay authorized: its CONTROLLER listener is SASL_PLAINTEXT with
PLAIN and user ``admin``, a super user; the client listener stays PLAINTEXT, where every client
is ``User:ANONYMOUS``, as on compactlog. Both brokers start with ``User:ANONYMOUS`` a super user
too (to run ``kafka-acls`` and create the matrix's ACLs), then restart without it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.helpers import acl_matrix as m
from tests.broker.helpers.server import Brokers
from tests.kafka.harness import KafkaBroker, run_tool

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)
KAFKA_CONFIG = {
    "authorizer.class.name": CLASS,
    "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.controller.plain.sasl.jaas.config": _JAAS,
}
COMPACTLOG_CONFIG = {"authorizer.class.name": CLASS, "node.id": 1}


class Pair:
    def __init__(self, kafka: KafkaBroker, brokers: Brokers, compactlog: Any) -> None:
        self.kafka = kafka
        self.brokers = brokers
        self.compactlog = compactlog

    @property
    def bootstraps(self) -> tuple[str, str]:
        return self.kafka.bootstrap, self.compactlog.bootstrap


def _acls_tool(bootstrap: str, *args: str) -> str:
    done = run_tool("kafka-acls", "--bootstrap-server", bootstrap, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.replace(bootstrap, "<bootstrap>")


def _listed(bootstrap: str, expect_lines: int) -> str:
    """``kafka-acls --list``, retried while Kafka's broker has not applied the ACLs yet (they
    are committed by its controller, then propagated to the broker's authorizer)."""
    out = ""
    for _ in range(30):
        out = _acls_tool(bootstrap, "--list")
        if out.count("(principal=") == expect_lines:
            break
        time.sleep(0.5)
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    work = tmp_path_factory.mktemp("acls-vs-kafka")
    kafka = KafkaBroker(
        work / "kafka", config={**KAFKA_CONFIG, "super.users": "User:admin;User:ANONYMOUS"}
    )
    brokers = Brokers(work / "compactlog")
    try:
        kafka.start()
        compactlog = brokers.start(
            Path(work / "compactlog"),
            config={**COMPACTLOG_CONFIG, "super.users": "User:ANONYMOUS"},
        )
        yield Pair(kafka, brokers, compactlog)
    finally:
        brokers.stop_all()
        if kafka.running:
            kafka.stop()


def test_kafka_acls_tool_add_list_remove(pair: Pair) -> None:
    """``kafka-acls --add / --list / --remove --force`` print the same against both."""
    adds = [
        ("--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"),
        ("--deny-principal", "User:bob", "--allow-host", "10.0.0.1", "--operation", "All",
         "--group", "app-", "--resource-pattern-type", "prefixed"),
        ("--allow-principal", "User:*", "--operation", "Describe", "--cluster"),
    ]  # fmt: skip
    for args in adds:
        for bootstrap in pair.bootstraps:
            _acls_tool(bootstrap, "--add", *args)
    kafka_list, compactlog_list = (_listed(b, 3) for b in pair.bootstraps)
    assert compactlog_list.splitlines() == kafka_list.splitlines() or sorted(
        compactlog_list.split("\n\n")
    ) == sorted(kafka_list.split("\n\n")), (kafka_list, compactlog_list)
    topic_list = [_acls_tool(b, "--list", "--topic", "t") for b in pair.bootstraps]
    assert topic_list[0] == topic_list[1]
    removed = [
        _acls_tool(b, "--remove", "--force", "--topic", "t", "--allow-principal", "User:alice",
                   "--operation", "Read")
        for b in pair.bootstraps
    ]  # fmt: skip
    assert removed[0] == removed[1]
    for bootstrap in pair.bootstraps:
        _acls_tool(bootstrap, "--remove", "--force", "--cluster")
        _acls_tool(bootstrap, "--remove", "--force", "--group", "app-",
                   "--resource-pattern-type", "prefixed")  # fmt: skip
    after = [_listed(b, 0) for b in pair.bootstraps]
    assert after[0] == after[1]


@pytest.fixture(scope="module")
def restarted(pair: Pair) -> Pair:
    """The matrix's ACLs and resources on both, then both restarted without
    ``User:ANONYMOUS`` among the super users."""
    for bootstrap in pair.bootstraps:
        m.create_allowed_acls(bootstrap)  # committed by Kafka's controller before it answers
        m.setup_resources(bootstrap)  # still a super user: no need to wait for the ACLs
    pair.kafka.stop()
    pair.kafka.config["super.users"] = "User:admin"
    pair.kafka.start()
    pair.compactlog = pair.brokers.restart(pair.compactlog, config=COMPACTLOG_CONFIG)
    return pair


@pytest.mark.parametrize("case", m.CASES, ids=[c.name for c in m.CASES])
def test_matrix_same_as_kafka(restarted: Pair, case: m.Case) -> None:
    kafka_bootstrap, compactlog_bootstrap = restarted.bootstraps
    kafka_denied = m.run_denied(kafka_bootstrap, case)
    ours_denied = m.run_denied(compactlog_bootstrap, case)
    kafka_allowed = m.run_allowed(kafka_bootstrap, case)
    ours_allowed = m.run_allowed(compactlog_bootstrap, case)
    assert (kafka_denied, ours_denied) == (case.denied, case.denied)
    assert kafka_allowed not in m.AUTH_ERRORS and ours_allowed not in m.AUTH_ERRORS
    if case.allowed is not None:
        assert kafka_allowed in case.allowed and ours_allowed in case.allowed


def test_metadata_and_operations_same_as_kafka(restarted: Pair) -> None:
    def seen(bootstrap: str, host: str) -> tuple[Any, ...]:
        with m.RawClient(bootstrap, host) as c:
            everything = c.request(3, 12, topics=None, allow_auto_topic_creation=False)
            md = c.request(
                3, 10, topics=[{"name": m.TOPIC}], allow_auto_topic_creation=False,
                include_cluster_authorized_operations=True,
                include_topic_authorized_operations=True,
            )  # fmt: skip
            dc = c.request(60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
            dg = c.request(15, 5, groups=[m.GROUP], include_authorized_operations=True)
            lg = c.request(16, 4, states_filter=[])
        return (
            sorted(t.name for t in everything.topics if not t.name.startswith("__")),
            md.cluster_authorized_operations,
            [(t.name, t.error_code, t.topic_authorized_operations) for t in md.topics],
            dc.cluster_authorized_operations,
            [(g.error_code, g.authorized_operations) for g in dg.groups],
            sorted(g.group_id for g in lg.groups),
        )

    for host in (m.ALLOWED_HOST, m.DENIED_HOST):
        kafka, ours = (seen(b, host) for b in restarted.bootstraps)
        assert ours == kafka, host


def test_topic_ids_and_configs_same_as_kafka(restarted: Pair) -> None:
    kafka, ours = (m.by_id_and_configs(b) for b in restarted.bootstraps)
    assert ours == kafka


#: What may differ between the two brokers' refusals, and why.
_BODY_NORMALISATIONS = (
    # Each broker has its own port and cluster id.
    (re.compile(r"port=\d+"), "port=<port>"),
    (re.compile(r"cluster_id='[^']*'"), "cluster_id=<id>"),
    # Kafka's message of a cluster-level denial names its internal request object
    # ("Request Request(processor=2, connectionId=..., session=...) needs ALTER permission.");
    # compactlog says "Cluster authorization failed.".
    (re.compile(r"'Request Request\(.*?\) needs [A-Z_]+ permission\.'"), "<cluster denial>"),
    (re.compile(r"'Cluster authorization failed\.'"), "<cluster denial>"),
)


def _denied_body(bootstrap: str, case: m.Case) -> str:
    host = m.DENIED_HOST if case.denied_body is None else m.ALLOWED_HOST
    body = case.body if case.denied_body is None else case.denied_body
    with m.RawClient(bootstrap, host) as c:
        text = repr(c.request(case.api_key, case.version, **body()))
    for pattern, replacement in _BODY_NORMALISATIONS:
        text = pattern.sub(replacement, text)
    return text


@pytest.mark.parametrize("case", m.CASES, ids=[c.name for c in m.CASES])
def test_refusals_field_for_field(restarted: Pair, case: m.Case) -> None:
    """Beyond the code: the whole refused response, every field, is Kafka's (messages
    included, but for the cluster-level one of :data:`_BODY_NORMALISATIONS`)."""
    kafka, ours = (_denied_body(b, case) for b in restarted.bootstraps)
    assert ours == kafka


def _grant_denied_host(bootstrap: str, op: int, name: str, pattern: int) -> None:
    """From the allowed host (ALTER on the cluster): ALLOW User:ANONYMOUS ``op`` on a topic,
    from the denied host's address."""
    with m.RawClient(bootstrap, m.ALLOWED_HOST) as c:
        result = c.request(
            30, 3,
            creations=[{**m.binding(m.TOPIC_T, name, m.DENIED_HOST),
                        "resource_pattern_type": pattern, "operation": op}],
        )  # fmt: skip
    assert result.results[0].error_code == 0, result


def _metadata_until(bootstrap: str, name: str, done: Any, auto_create: bool = False) -> int:
    """Metadata for ``name`` from the denied host until ``done(code)`` (Kafka's broker applies
    new ACLs a moment after its controller committed them)."""
    code = -1
    for _ in range(100):
        with m.RawClient(bootstrap, m.DENIED_HOST) as c:
            body = c.request(3, 12, topics=[{"name": name}], allow_auto_topic_creation=auto_create)
        code = int(body.topics[0].error_code)
        if done(code):
            break
        time.sleep(0.1)
    return code


def test_auto_creation_needs_create_as_in_kafka(restarted: Pair) -> None:
    """Metadata auto-creation: DESCRIBE without CREATE is TOPIC_AUTHORIZATION_FAILED; CREATE on
    the topic creates it (Kafka answers UNKNOWN_TOPIC_OR_PARTITION while its controller
    creates it, compactlog describes it at once)."""
    results = []
    for bootstrap in restarted.bootstraps:
        with m.RawClient(bootstrap, m.ALLOWED_HOST) as c:
            c.request(19, 7, topics=[{"name": "auto-seen", "num_partitions": 1,
                                      "replication_factor": 1}],
                      timeout_ms=10000, validate_only=False)  # fmt: skip
        _grant_denied_host(bootstrap, 8, "auto-", 4)  # DESCRIBE, PREFIXED
        assert _metadata_until(bootstrap, "auto-seen", lambda code: code == 0) == 0
        refused = _metadata_until(bootstrap, "auto-a", lambda code: True, auto_create=True)
        _grant_denied_host(bootstrap, 5, "auto-b", 3)  # CREATE, LITERAL
        created = _metadata_until(bootstrap, "auto-b", lambda code: code != 29, auto_create=True)
        _metadata_until(bootstrap, "auto-b", lambda code: code == 0)  # Kafka: created by now
        with m.RawClient(bootstrap, m.DENIED_HOST) as c:
            md = c.request(
                3, 10, topics=[{"name": "auto-seen"}, {"name": "auto-b"}],
                allow_auto_topic_creation=False, include_topic_authorized_operations=True,
            )  # fmt: skip
        operations = sorted((t.name, t.topic_authorized_operations) for t in md.topics)
        results.append((refused, created, operations))
    (kafka_refused, kafka_created, kafka_ops), (ours_refused, ours_created, ours_ops) = results
    assert kafka_refused == ours_refused == 29
    assert kafka_created in (0, 3) and ours_created == 0
    # DESCRIBE only, and DESCRIBE with CREATE: the same bits as Kafka's.
    assert ours_ops == kafka_ops == [("auto-b", (1 << 8) | (1 << 5)), ("auto-seen", 1 << 8)]


def test_overlapping_delete_acls_as_in_kafka(restarted: Pair) -> None:
    kafka, ours = (m.overlapping_delete(b) for b in restarted.bootstraps)
    assert ours == kafka


def test_invalid_acl_requests_as_in_kafka(restarted: Pair) -> None:
    """Bad creations and filters: the same refusal, message and closed connection as Kafka."""
    kafka, ours = (m.invalid_acl_requests(b) for b in restarted.bootstraps)
    for what, k, o in zip(
        [*map(str, m.BAD_CREATIONS), *(f"{f} {api}" for f in m.BAD_FILTERS
                                       for api in ("describe", "delete")), "cleanup"],
        kafka, ours, strict=True,
    ):  # fmt: skip
        assert o == k, what


def test_without_an_authorizer_as_in_kafka(kafka: Any, tmp_path: Path) -> None:
    """No authorizer: the ACL APIs answer SECURITY_DISABLED with Kafka's messages, and the
    authorized-operation fields report every operation."""
    brokers = Brokers(tmp_path / "compactlog")
    try:
        bootstraps = (kafka().bootstrap, brokers.start(config={"node.id": 1}).bootstrap)
        kafka_answers, ours = (_unauthorized_answers(b) for b in bootstraps)
    finally:
        brokers.stop_all()
    assert ours == kafka_answers


def _unauthorized_answers(bootstrap: str) -> list[str]:
    with m.RawClient(bootstrap, m.DENIED_HOST) as c:
        out = [
            c.request(29, 3, **m.any_filter()),
            c.request(30, 3, creations=[m.binding(m.TOPIC_T, "x", "*")]),
            c.request(31, 3, filters=[m.any_filter()]),
        ]
        md = c.request(3, 10, topics=None, include_cluster_authorized_operations=True)
        dc = c.request(60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
    return [*map(repr, out), str(md.cluster_authorized_operations),
            str(dc.cluster_authorized_operations)]  # fmt: skip
