"""The ACL matrix against compactlog: for each API and resource type, a connection that the ACLs
allow and one they do not, with the code Kafka 4.4 answers the denied one
(tests/broker/helpers/acl_matrix.py; the same matrix runs against Kafka in
tests/kafka/test_acls_vs_kafka.py).

The ACLs are created while ``User:ANONYMOUS`` is a super user, then the broker restarts without
``super.users``: every allowed answer below comes from ACLs read back from the data directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.helpers import acl_matrix as m
from tests.broker.helpers.server import Brokers

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "node.id": 1,  # the matrix names broker "1", as Kafka's harness runs it
}


@pytest.fixture(scope="module")
def matrix_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    brokers = Brokers(tmp_path_factory.mktemp("acl-matrix") / "data")
    try:
        setup = brokers.start(config={**AUTHORIZER, "super.users": "User:ANONYMOUS"})
        m.create_allowed_acls(setup.bootstrap)
        m.setup_resources(setup.bootstrap)
        yield brokers.restart(setup, config=AUTHORIZER)
    finally:
        brokers.stop_all()


@pytest.mark.parametrize("case", m.CASES, ids=[c.name for c in m.CASES])
def test_matrix(matrix_broker: Any, case: m.Case) -> None:
    denied = m.run_denied(matrix_broker.bootstrap, case)
    allowed = m.run_allowed(matrix_broker.bootstrap, case)
    assert denied == case.denied, f"{case.name}: denied got {denied}, Kafka answers {case.denied}"
    assert allowed not in m.AUTH_ERRORS, f"{case.name}: allowed got {allowed}"
    if case.allowed is not None:
        assert allowed in case.allowed, f"{case.name}: allowed got {allowed}"


def test_all_topics_metadata_hides_what_may_not_be_described(matrix_broker: Any) -> None:
    def topics(host: str) -> list[Any]:
        with m.RawClient(matrix_broker.bootstrap, host) as c:
            body = c.request(3, 12, topics=None, allow_auto_topic_creation=False)
        return [(t.name, t.error_code) for t in body.topics]

    assert topics(m.DENIED_HOST) == []
    assert (m.TOPIC, 0) in topics(m.ALLOWED_HOST)


def test_authorized_operations(matrix_broker: Any) -> None:
    """Metadata v10 (cluster and topic), DescribeCluster and DescribeGroups report what the
    peer may do; without DESCRIBE on the cluster the cluster's field is 0, as in Kafka."""
    everything_topic, everything_cluster, everything_group = 3576, 8096, 3400
    for host, cluster_ops in ((m.ALLOWED_HOST, everything_cluster), (m.DENIED_HOST, 0)):
        with m.RawClient(matrix_broker.bootstrap, host) as c:
            md = c.request(
                3, 10, topics=[{"name": m.TOPIC}], allow_auto_topic_creation=False,
                include_cluster_authorized_operations=True,
                include_topic_authorized_operations=True,
            )  # fmt: skip
            dc = c.request(60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
            dg = c.request(15, 5, groups=[m.GROUP], include_authorized_operations=True)
        assert md.cluster_authorized_operations == cluster_ops
        assert dc.cluster_authorized_operations == cluster_ops
        if host == m.ALLOWED_HOST:
            assert md.topics[0].topic_authorized_operations == everything_topic
            assert dg.groups[0].authorized_operations == everything_group
        else:
            assert md.topics[0].error_code == 29
            assert dg.groups[0].error_code == 30


def test_list_groups_shows_only_describable_groups(matrix_broker: Any) -> None:
    def groups(host: str) -> list[str]:
        with m.RawClient(matrix_broker.bootstrap, host) as c:
            body = c.request(16, 4, states_filter=[])
        assert body.error_code == 0
        return [g.group_id for g in body.groups]

    with m.RawClient(matrix_broker.bootstrap, m.ALLOWED_HOST) as c:  # the group exists
        c.request(
            8, 3, group_id=m.GROUP, generation_id_or_member_epoch=-1, member_id="",
            retention_time_ms=-1,
            topics=[{"name": m.TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]}],
        )  # fmt: skip
    assert m.GROUP in groups(m.ALLOWED_HOST)
    assert groups(m.DENIED_HOST) == []


def test_acls_file_survives_restart(matrix_broker: Any) -> None:
    with m.RawClient(matrix_broker.bootstrap, m.ALLOWED_HOST) as c:
        body = c.request(
            29, 3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=m.ALLOWED_HOST, operation=1, permission_type=1,
        )  # fmt: skip
    found = {(r.resource_type, r.resource_name) for r in body.resources}
    assert found == {(b["resource_type"], b["resource_name"]) for b in m.allowed_bindings()}
    assert (Path(matrix_broker.broker.store.path) / "compactlog-acls.json").exists()


def test_topic_ids_are_not_secret_names_and_configs_are(matrix_broker: Any) -> None:
    """Metadata and DeleteTopics by the id of a topic that may not be described answer
    TOPIC_AUTHORIZATION_FAILED with the id and no name; a topic that may be created but whose
    configs may not be described is created without its configs (topic_config_error_code 29).
    Kafka 4.4 answers the same (tests/kafka/test_acls_vs_kafka.py)."""
    assert m.by_id_and_configs(matrix_broker.bootstrap) == (
        (29, None, True),
        (29, None, True),
        (0, 29, 0),
    )


def test_delete_acls_filters_see_the_acls_as_they_were(matrix_broker: Any) -> None:
    """Every filter of one DeleteAcls is matched against the ACLs before the request, so a
    binding two filters match is reported by both (Kafka's controller does the same); a filter
    with an unknown operation is INVALID_REQUEST on its own."""
    assert m.overlapping_delete(matrix_broker.bootstrap) == [
        (0, ["acl-dup"]),
        (0, ["acl-dup"]),
        (42, []),
    ]


def test_invalid_acl_requests(matrix_broker: Any) -> None:
    """Kafka 4.4's answers to bad bindings and filters (compared whole with Kafka in
    tests/kafka/test_acls_vs_kafka.py): a code 0 (UNKNOWN) closes the connection; ANY or MATCH
    in a binding is UNKNOWN_SERVER_ERROR; other codes it does not know, a bad principal, host,
    name or cluster name are INVALID_REQUEST; DescribeAcls with an unknown code (not 0) answers
    nothing, DeleteAcls INVALID_REQUEST."""
    answers = m.invalid_acl_requests(matrix_broker.bootstrap)

    def code(answer: str) -> str:
        found = re.findall(r"error_code=(-?\d+)", answer)
        return found[0] if found else answer

    closed = "connection closed"
    assert [code(a) for a in answers] == [
        closed, closed, "-1", "-1", "-1", "-1", "-1", "42", "42", "42", "42", "42", "0", "42",
        "42", "42",
        closed, closed, closed, closed, closed, closed, closed, closed, "0", "42", "0", "42",
        "0",
    ]  # fmt: skip
    assert "Could not parse principal from `alice`" in answers[11]
    assert "resources=[]" in answers[24] and "Unknown entryFilter." in answers[25]
