"""The broker over a real loopback socket: ApiVersions, Metadata, ordering, connection ends.

Requests are built and responses read with compactlog.protocol's own codec (no third-party
client here: the client tests are in ``test_clients_*.py``). This module also holds the small
blocking :class:`Client` and the ``server`` fixture the other ``test_server_*`` modules use.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from compactlog import errors as c
from compactlog.broker.handlers.dispatch import HANDLERS
from compactlog.broker.server import BrokerThread
from compactlog.errors import ConfigError
from compactlog.protocol import ADVERTISED, RequestHeader, Struct, decode_response, encode_request
from compactlog.protocol.messages import (
    ApiVersionsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from compactlog.records import Compression, build_batch
from tests.broker.helpers.wire import recv_frame

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]

#: Settings of every test broker: one partition of __consumer_offsets keeps start-up short, and
#: the periodic store tasks start late enough to stay out of the way.
TEST_CONFIG: dict[str, Any] = {
    "offsets.topic.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
}
NOW = int(time.time() * 1000)

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 18, 19, 20, 21, 22
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44


class Client:
    """One blocking connection speaking the Kafka protocol with compactlog.protocol's codec."""

    def __init__(self, port: int, client_id: str = "test-client", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_id = client_id
        self.next_id = 1
        self.sent: dict[int, tuple[int, int]] = {}

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: Struct) -> int:
        correlation_id = self.next_id
        self.next_id += 1
        header = RequestHeader(api_key, version, correlation_id, self.client_id)
        self.sock.sendall(encode_request(header, body))
        self.sent[correlation_id] = (api_key, version)
        return correlation_id

    def receive(self) -> tuple[int, Struct]:
        """The next response: (correlation id, body), decoded as the request it answers."""
        frame = recv_frame(self.sock)
        (correlation_id,) = struct.unpack_from(">i", frame)
        api_key, version = self.sent.pop(correlation_id)
        return correlation_id, decode_response(frame, api_key, version).body

    def call(self, api_key: int, version: int, body: Struct) -> Any:
        sent = self.send(api_key, version, body)
        got, response = self.receive()
        assert got == sent, f"correlation id {got}, expected {sent}"
        return response

    def closed_within(self, seconds: float) -> bool:
        """Whether the broker closes the connection within ``seconds`` (reading and dropping
        anything it still sends)."""
        self.sock.settimeout(seconds)
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                if not self.sock.recv(65536):
                    return True
        except (TimeoutError, BlockingIOError):
            return False
        except ConnectionResetError:
            return True
        return False


# --- fixtures and builders -----------------------------------------------------------------------
def start_broker(
    data_dir: Path, config: Mapping[str, Any] | None = None, **kw: Any
) -> BrokerThread:
    return BrokerThread(data_dir, config={**TEST_CONFIG, **(config or {})}, **kw).start()


def running_broker(tmp_path: Path) -> Iterator[BrokerThread]:
    """The body of every module's ``server`` fixture: a broker on 127.0.0.1:<free port> over
    ``tmp_path/data``, stopped after the test."""
    broker = start_broker(tmp_path / "data")
    try:
        yield broker
    finally:
        broker.stop()


def connected(server: BrokerThread) -> Iterator[Client]:
    """The body of every module's ``client`` fixture."""
    with Client(server.port) as conn:
        yield conn


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerThread]:
    yield from running_broker(tmp_path)


@pytest.fixture
def client(server: BrokerThread) -> Iterator[Client]:
    yield from connected(server)


def create_topic(
    server: BrokerThread, name: str, partitions: int = 1, config: Mapping[str, Any] | None = None
) -> None:
    """Create a topic directly in the store (on the broker's event loop)."""
    store = server.broker.store
    assert store is not None
    server.call(lambda: store.create_topic(name, partitions, dict(config or {})))


def batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    compression: Compression = Compression.NONE,
    **kw: Any,
) -> bytes:
    kw.setdefault("timestamps", NOW)
    return build_batch(records, compression=compression, **kw)


def produce_request(
    partitions: Mapping[tuple[str, int], bytes | None],
    acks: int = -1,
    transactional_id: str | None = None,
) -> Struct:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), records in partitions.items():
        topics.setdefault(topic, []).append({"index": partition, "records": records})
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=10_000,
        topic_data=[{"name": t, "partition_data": ps} for t, ps in topics.items()],
    )


def produce_results(response: Struct) -> dict[tuple[str, int], Struct]:
    return {(t.name, p.index): p for t in response.responses for p in t.partition_responses}


def fetch_request(
    partitions: Mapping[tuple[str, int], int],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    isolation_level: int = 0,
    session_epoch: int = -1,
) -> Struct:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in partitions.items():
        topics.setdefault(topic, []).append(
            {
                "partition": partition,
                "fetch_offset": offset,
                "log_start_offset": -1,
                "partition_max_bytes": partition_max_bytes,
            }
        )
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=session_epoch,
        topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()],
        forgotten_topics_data=[],
        rack_id="",
    )


def fetch_results(response: Struct) -> dict[tuple[str, int], Struct]:
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def metadata(
    client: Client, topics: Sequence[str] | None, auto_create: bool = True, version: int = 4
) -> Any:
    names = None if topics is None else [{"name": t} for t in topics]
    return client.call(
        METADATA, version, MetadataRequest(topics=names, allow_auto_topic_creation=auto_create)
    )


# --- ApiVersions ---------------------------------------------------------------------------------
def test_api_versions_v0_lists_the_advertised_versions(client: Client) -> None:
    response = client.call(API_VERSIONS, 0, ApiVersionsRequest())
    assert response.error_code == c.NONE
    got = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert got == ADVERTISED
    assert got[PRODUCE] == (0, 8)  # v0 advertised for librdkafka < 2.11.1, v0-v2 refused


@pytest.mark.parametrize("version", [3, 4, 99])
def test_a_too_new_api_versions_gets_the_v0_error_reply_and_the_connection_stays(
    client: Client, version: int
) -> None:
    body = ApiVersionsRequest(client_software_name="librdkafka", client_software_version="2.0")
    frame = bytearray(encode_request(RequestHeader(API_VERSIONS, 3, 41, "rdkafka"), body))
    struct.pack_into(">h", frame, 6, version)  # the header's api_version
    client.sock.sendall(frame)
    client.sent[41] = (API_VERSIONS, 3)  # decode_response reads an error reply as v0
    got, response = client.receive()
    assert got == 41
    assert response.error_code == c.UNSUPPORTED_VERSION
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == ADVERTISED
    # The connection is still usable: the client retries with v0.
    assert client.call(API_VERSIONS, 0, ApiVersionsRequest()).error_code == c.NONE


# --- Metadata ------------------------------------------------------------------------------------
def test_metadata_describes_one_node_and_auto_creates_topics(
    server: BrokerThread, client: Client
) -> None:
    response = metadata(client, ["orders"])
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (0, "127.0.0.1", server.port)
    ]
    assert response.controller_id == 0 and response.cluster_id
    (topic,) = response.topics
    assert (topic.error_code, topic.name, topic.is_internal) == (c.NONE, "orders", False)
    assert [
        (p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in topic.partitions
    ] == [(0, 0, [0], [0])]
    store = server.broker.store
    assert store is not None and server.call(store.topics) == ["orders"]
    # A null list is every topic; an empty list is none.
    assert [t.name for t in metadata(client, None).topics] == ["orders"]
    assert metadata(client, []).topics == []


def test_metadata_without_auto_creation(tmp_path: Path) -> None:
    broker = start_broker(
        tmp_path / "data", {"auto.create.topics.enable": "false", "num.partitions": 3}
    )
    try:
        with Client(broker.port) as conn:
            assert metadata(conn, ["a"]).topics[0].error_code == c.UNKNOWN_TOPIC_OR_PARTITION
            assert metadata(conn, ["bad/name"]).topics[0].error_code == c.INVALID_TOPIC_EXCEPTION
        store = broker.broker.store
        assert store is not None and broker.call(store.topics) == []
    finally:
        broker.stop()


def test_metadata_auto_creation_follows_the_request_and_num_partitions(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", {"num.partitions": 3})
    try:
        with Client(broker.port) as conn:
            refused = metadata(conn, ["a"], auto_create=False).topics[0]
            assert refused.error_code == c.UNKNOWN_TOPIC_OR_PARTITION
            created = metadata(conn, ["a"]).topics[0]
            assert created.error_code == c.NONE and len(created.partitions) == 3
            assert metadata(conn, [".."]).topics[0].error_code == c.INVALID_TOPIC_EXCEPTION
    finally:
        broker.stop()


def test_cluster_id_is_stable_for_the_data_directory(tmp_path: Path) -> None:
    ids = []
    for _ in range(2):
        broker = start_broker(tmp_path / "data")
        try:
            with Client(broker.port) as conn:
                ids.append(metadata(conn, []).cluster_id)
        finally:
            broker.stop()
    assert ids[0] == ids[1] and len(ids[0]) == 22
    assert f"cluster.id={ids[0]}" in (tmp_path / "data" / "meta.properties").read_text()


def test_node_id_is_a_setting_and_the_data_directory_keeps_it(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", {"node.id": 1})
    try:
        with Client(broker.port) as conn:
            response = metadata(conn, ["t"])
            assert [b.node_id for b in response.brokers] == [1]
            assert response.controller_id == 1
            assert [p.leader_id for p in response.topics[0].partitions] == [1]
    finally:
        broker.stop()
    assert "node.id=1\n" in (tmp_path / "data" / "meta.properties").read_text()
    # As Kafka: a data directory served as node 1 is not served as node 0 ("Stored node id").
    with pytest.raises(ConfigError, match="Stored node id 1 doesn't match previous node id 0"):
        start_broker(tmp_path / "data")


def test_advertised_address_is_what_metadata_names(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", advertise=("kafka.example.com", 19092))
    try:
        with Client(broker.port) as conn:
            (node,) = metadata(conn, []).brokers
            assert (node.host, node.port) == ("kafka.example.com", 19092)
    finally:
        broker.stop()


# --- ordering and connection ends ------------------------------------------------------------
def test_pipelined_requests_are_answered_in_request_order(
    server: BrokerThread, client: Client
) -> None:
    create_topic(server, "p")
    sent = []
    for i in range(30):
        if i % 3 == 0:
            sent.append(
                client.send(PRODUCE, 7, produce_request({("p", 0): batch([(b"k", b"%d" % i)])}))
            )
        elif i % 3 == 1:
            sent.append(client.send(FETCH, 11, fetch_request({("p", 0): 0})))
        else:
            sent.append(client.send(API_VERSIONS, 2, ApiVersionsRequest()))
    received = [client.receive()[0] for _ in sent]
    assert received == sent


def test_acks_0_gets_no_response(server: BrokerThread, client: Client) -> None:
    create_topic(server, "q")
    client.send(PRODUCE, 7, produce_request({("q", 0): batch([(b"k", b"v")])}, acks=0))
    client.sent.clear()  # no response will come for it
    after = client.send(API_VERSIONS, 0, ApiVersionsRequest())
    assert client.receive()[0] == after
    store = server.broker.store
    assert store is not None and server.call(lambda: store.log_end_offset("q", 0)) == 1


def test_acks_0_that_fails_closes_the_connection(server: BrokerThread, client: Client) -> None:
    create_topic(server, "q", config={"cleanup.policy": "compact"})
    client.send(PRODUCE, 7, produce_request({("q", 0): batch([(None, b"v")])}, acks=0))
    assert client.closed_within(5)


def test_produce_v0_to_v2_are_advertised_but_refused_by_closing(client: Client) -> None:
    frame = bytearray(encode_request(RequestHeader(PRODUCE, 3, 5, "old"), produce_request({})))
    struct.pack_into(">h", frame, 6, 2)
    client.sock.sendall(frame)
    assert client.closed_within(5)


def test_a_malformed_request_closes_only_its_connection(
    server: BrokerThread, caplog: pytest.LogCaptureFixture
) -> None:
    with Client(server.port) as bad, Client(server.port) as good:
        body = struct.pack(">hhi", METADATA, 4, 7) + struct.pack(">h", 1) + b"x" + b"\xff\xff"
        bad.sock.sendall(struct.pack(">i", len(body)) + body)
        assert bad.closed_within(5)
        assert good.call(API_VERSIONS, 0, ApiVersionsRequest()).error_code == c.NONE
    assert "malformed request" in caplog.text


def test_an_unknown_setting_is_a_config_error_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Unknown broker config name: no\.such\.setting"):
        start_broker(tmp_path / "data", {"no.such.setting": 1})
    with pytest.raises(ConfigError, match=r"max\.connections"):
        start_broker(tmp_path / "data", {"max.connections": "many"})
    # The data directory was released: a good start works.
    start_broker(tmp_path / "data").stop()


def test_a_handler_bug_closes_its_connection_and_is_logged(
    server: BrokerThread, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*args: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setitem(HANDLERS, API_VERSIONS, broken)
    with Client(server.port) as client:
        client.send(API_VERSIONS, 0, ApiVersionsRequest())
        assert client.closed_within(5)
    monkeypatch.undo()
    with Client(server.port) as client:
        assert client.call(API_VERSIONS, 0, ApiVersionsRequest()).error_code == c.NONE
    assert "ApiVersions v0 (correlation id 1) from 127.0.0.1" in caplog.text
    assert "ZeroDivisionError: a bug" in caplog.text
