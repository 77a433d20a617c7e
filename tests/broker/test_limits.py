"""Finding 7 of issue 17 at the broker: requests and connections that took it down.

* CreateTopics with a huge partition count is refused at once, as Kafka 4.4 refuses a request
  of more than 10,000 metadata records, and the broker goes on answering;
* SIGTERM stops ``compactlog serve`` within seconds even while a long request runs;
* ``max.connections.per.ip`` (and its overrides) closes the excess connections of one address,
  and connections that never send a request cannot lock the good clients out.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog import errors as c
from compactlog.broker.limits import UNSERVED_EVICT_AFTER_S
from compactlog.broker.server import STOP_DEADLINE_S, BrokerThread
from compactlog.broker.settings import BrokerSettings, parse_per_ip_overrides
from compactlog.errors import ConfigError
from compactlog.protocol.messages import ApiVersionsRequest, CreateTopicsRequest
from compactlog.storage.store import MAX_RECORDS_PER_USER_OP
from compactlog.storage.topic_catalog import TOPICS_FILE
from tests.broker.test_server_basics import API_VERSIONS, CREATE_TOPICS, Client, start_broker
from tests.broker.test_server_cli import serve, wait_listening

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

KAFKA_BATCH_MESSAGE = "Unable to perform excessively large batch operation."


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerThread]:
    broker = start_broker(tmp_path / "data")
    try:
        yield broker
    finally:
        broker.stop()


def create_request(*topics: dict[str, Any], validate_only: bool = False) -> Any:
    return CreateTopicsRequest(
        topics=[{"replication_factor": -1, "assignments": [], "configs": [], **t} for t in topics],
        timeout_ms=5000,
        validate_only=validate_only,
    )


def answered(client: Client) -> bool:
    return bool(client.call(API_VERSIONS, 0, ApiVersionsRequest()).error_code == c.NONE)


# --- CreateTopics ------------------------------------------------------------------------------
@pytest.mark.parametrize("count", [2**31 - 1, MAX_RECORDS_PER_USER_OP])
@pytest.mark.parametrize("validate_only", [False, True])
def test_a_huge_partition_count_is_refused_at_once_with_kafkas_error(
    server: BrokerThread, count: int, validate_only: bool
) -> None:
    with Client(server.port) as client:
        started = time.monotonic()
        request = create_request(
            {"name": "huge", "num_partitions": count},
            {"name": "small", "num_partitions": 1},
            validate_only=validate_only,
        )
        response = client.call(CREATE_TOPICS, 7, request)
        assert time.monotonic() - started < 2
        # Kafka fails the whole request: every topic gets the error, none is created.
        assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
            ("huge", c.POLICY_VIOLATION, KAFKA_BATCH_MESSAGE),
            ("small", c.POLICY_VIOLATION, KAFKA_BATCH_MESSAGE),
        ]
        assert answered(client)
    store = server.broker.store
    assert store is not None
    assert not {"huge", "small"} & set(server.call(store.topics))


def test_the_record_count_covers_every_topic_and_config_of_the_request(
    server: BrokerThread,
) -> None:
    # 2 x (1 + 4998 + 2) = 10,002 records: each topic alone would pass, together they do not.
    configs = [{"name": "retention.ms", "value": "1000"}, {"name": "segment.ms", "value": "1000"}]
    topics = [{"name": n, "num_partitions": 4998, "configs": configs} for n in ("a", "b")]
    with Client(server.port) as client:
        response = client.call(CREATE_TOPICS, 7, create_request(*topics, validate_only=True))
        assert {t.error_code for t in response.topics} == {c.POLICY_VIOLATION}
        # One config fewer each: 10,000 records, within Kafka's bound.
        for t in topics:
            t["configs"] = configs[:1]
        response = client.call(CREATE_TOPICS, 7, create_request(*topics, validate_only=True))
        assert {t.error_code for t in response.topics} == {c.NONE}
        # A refused topic writes no records, so it does not count (as in Kafka's controller).
        bad = {"name": "bad!", "num_partitions": 9000}
        response = client.call(
            CREATE_TOPICS, 7, create_request(bad, {"name": "ok", "num_partitions": 2})
        )
        assert [(t.name, t.error_code) for t in response.topics] == [
            ("bad!", c.INVALID_TOPIC_EXCEPTION),
            ("ok", c.NONE),
        ]


def test_a_creation_past_the_open_files_limit_is_refused(server: BrokerThread) -> None:
    # 9999 partitions pass Kafka's record bound but need ~30,000 open files here.
    with Client(server.port) as client:
        response = client.call(
            CREATE_TOPICS, 7, create_request({"name": "wide", "num_partitions": 9999})
        )
        (result,) = response.topics
        assert result.error_code == c.INVALID_PARTITIONS
        assert "ulimit -n" in result.error_message
        assert answered(client)


# --- SIGTERM -----------------------------------------------------------------------------------
def test_sigterm_stops_the_broker_promptly_while_a_long_request_runs(tmp_path: Path) -> None:
    """A CreateTopics of 3000 partitions takes seconds (about 9 s on the CI machine), off the
    event loop; SIGTERM in the middle of it stops the creation at its next partition and the
    broker closes cleanly within STOP_DEADLINE_S, saying how much of the topic is loaded."""
    data_dir = tmp_path / "data"
    proc = serve(data_dir, "--metrics", "127.0.0.1:0")
    try:
        port, _, _ = wait_listening(proc)
        with Client(port) as client:
            client.send(CREATE_TOPICS, 7, create_request({"name": "w", "num_partitions": 3000}))
            time.sleep(0.5)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=STOP_DEADLINE_S + 20)
            elapsed = time.monotonic() - started
        assert proc.stderr is not None
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    assert "stopping on SIGTERM" in stderr
    assert elapsed < STOP_DEADLINE_S, (elapsed, stderr)
    assert code == 0, stderr
    assert "closed cleanly" in stderr
    assert re.search(r"topic w has \d+ of its 3000 partitions loaded", stderr), stderr
    # The catalog was written (atomically) before the partitions: the next start loads the
    # topic. (Opening it here would create the rest of 3000 partitions, a minute and more.)
    assert "w" in json.loads((data_dir / TOPICS_FILE).read_text())["topics"]


def test_a_second_signal_while_stopping_exits_at_once(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    proc = serve(data_dir, "--metrics", "127.0.0.1:0")
    try:
        port, _, _ = wait_listening(proc)
        with Client(port) as client:
            client.send(CREATE_TOPICS, 7, create_request({"name": "w", "num_partitions": 3000}))
            time.sleep(0.5)
            started = time.monotonic()
            proc.send_signal(signal.SIGINT)
            time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=STOP_DEADLINE_S + 20)
        elapsed = time.monotonic() - started
        assert proc.stderr is not None
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    assert "stopping on SIGINT" in stderr
    if code == -signal.SIGTERM:
        # The stop was over (a creation in progress stops at its next partition) and the
        # signal handlers gone: the second signal only cut the interpreter's exit short.
        assert "closed cleanly" in stderr, stderr
    elif code != 0:
        assert code == 130
        assert "SIGTERM while stopping" in stderr or "did not begin the stop" in stderr
    assert elapsed < STOP_DEADLINE_S + 4, (elapsed, stderr)


# --- connections -------------------------------------------------------------------------------
def client_from(source: str, port: int) -> Client:
    """A Client whose connection comes from ``source`` (any 127.x.y.z is this host on Linux)."""
    client = Client.__new__(Client)
    client.sock = socket.create_connection(
        ("127.0.0.1", port), timeout=10, source_address=(source, 0)
    )
    client.client_id = "limits"
    client.next_id = 1
    client.sent = {}
    return client


def wait_answered(source: str, port: int, timeout: float = 5) -> Client:
    """A connection from ``source`` that the broker serves (retrying while a closed slot is
    still being noticed)."""
    deadline = time.monotonic() + timeout
    while True:
        client = client_from(source, port)
        try:
            if answered(client):
                return client
        except OSError:
            pass
        except Exception as exc:  # the wire helper's Closed
            if "Closed" not in type(exc).__name__:
                raise
        client.close()
        if time.monotonic() > deadline:
            raise AssertionError(f"no connection from {source} was served within {timeout} s")
        time.sleep(0.05)


def test_per_ip_settings_are_kafkas() -> None:
    limits = BrokerSettings.from_mapping({}).limits
    assert limits.max_connections_per_ip == 2**31 - 1
    assert limits.max_connections_per_ip_overrides == ()
    assert parse_per_ip_overrides("hostName:100, 127.0.0.1:200,[::1]:3") == (
        ("hostName", 100),
        ("127.0.0.1", 200),
        ("::1", 3),
    )
    with pytest.raises(ConfigError, match="can be set to zero only if"):
        BrokerSettings.from_mapping({"max.connections.per.ip": 0})
    for bad in ("host", "host:x", ":5", "host:-1"):
        with pytest.raises(ConfigError, match=r"max\.connections\.per\.ip\.overrides"):
            BrokerSettings.from_mapping({"max.connections.per.ip.overrides": bad})
    with pytest.raises(ConfigError, match=r"max\.connections\.per\.ip"):
        BrokerSettings.from_mapping({"max.connections.per.ip": -1})


def test_connections_over_max_connections_per_ip_are_closed_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = start_broker(tmp_path / "data", {"max.connections.per.ip": 3})
    try:
        mine = [client_from("127.0.0.1", server.port) for _ in range(3)]
        for client in mine:
            assert answered(client)
        excess = [client_from("127.0.0.1", server.port) for _ in range(4)]
        for client in excess:
            assert client.closed_within(2)
            client.close()
        good = client_from("127.0.0.2", server.port)  # another address is not affected
        assert answered(good)
        mine.pop().close()  # a slot of 127.0.0.1 frees
        mine.append(wait_answered("127.0.0.1", server.port))
        for client in (*mine, good):
            assert answered(client)
            client.close()
    finally:
        server.stop()
    assert "max.connections.per.ip=3 are open from 127.0.0.1" in caplog.text


def test_per_ip_overrides_replace_the_default(tmp_path: Path) -> None:
    config = {
        "max.connections.per.ip": 0,
        "max.connections.per.ip.overrides": "127.0.0.2:2,localhost:1",
    }
    server = start_broker(tmp_path / "data", config)
    try:
        first = client_from("127.0.0.1", server.port)  # localhost: one
        assert answered(first)
        with client_from("127.0.0.1", server.port) as second:
            assert second.closed_within(2)
        pair = [client_from("127.0.0.2", server.port) for _ in range(2)]
        for client in pair:
            assert answered(client)
        with client_from("127.0.0.2", server.port) as third:
            assert third.closed_within(2)
        with client_from("127.0.0.3", server.port) as other:  # the default: 0
            assert other.closed_within(2)
        for client in (first, *pair):
            client.close()
    finally:
        server.stop()


def test_an_override_that_does_not_resolve_stops_the_start(tmp_path: Path) -> None:
    config = {"max.connections.per.ip.overrides": "no-such-host.invalid:5"}
    with pytest.raises(ConfigError, match=r"no-such-host\.invalid"):
        start_broker(tmp_path / "data", config)


def test_a_thousand_silent_connections_do_not_lock_clients_out(tmp_path: Path) -> None:
    """The finding: 1,005 connections that send nothing (or half a size prefix) held every
    max.connections slot for connections.max.idle.ms. Now a new client is served once they
    have been silent for UNSERVED_EVICT_AFTER_S, at the expense of the oldest of them."""
    server = start_broker(tmp_path / "data")  # max.connections: the default 1000
    silent: list[socket.socket] = []
    try:
        for i in range(1005):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            if i % 2:
                sock.sendall(b"\x00\x00")  # half of a size prefix
            silent.append(sock)
        time.sleep(UNSERVED_EVICT_AFTER_S + 0.2)
        started = time.monotonic()
        good = wait_answered("127.0.0.1", server.port, timeout=10)
        assert time.monotonic() - started < 5
        assert answered(good)
        good.close()
        metrics = server.broker.ctx.metrics if server.broker.ctx else None
        assert metrics is not None and metrics.connections_idle_closed >= 1
    finally:
        for sock in silent:
            sock.close()
        server.stop()


def test_served_connections_are_never_closed_to_make_room(tmp_path: Path) -> None:
    server = start_broker(tmp_path / "data", {"max.connections": 3})
    try:
        served = [client_from("127.0.0.1", server.port) for _ in range(3)]
        for client in served:
            assert answered(client)
        time.sleep(UNSERVED_EVICT_AFTER_S + 0.2)  # idle, but they have sent requests
        with client_from("127.0.0.1", server.port) as late:
            assert late.closed_within(2)
        for client in served:
            assert answered(client)
            client.close()
    finally:
        server.stop()


def test_a_silent_connection_makes_room_only_after_its_grace(tmp_path: Path) -> None:
    server = start_broker(tmp_path / "data", {"max.connections": 2})
    try:
        served = client_from("127.0.0.1", server.port)
        assert answered(served)
        silent = client_from("127.0.0.1", server.port)
        with client_from("127.0.0.1", server.port) as early:  # silent for < the grace
            assert early.closed_within(2)
        time.sleep(UNSERVED_EVICT_AFTER_S + 0.2)
        newcomer = client_from("127.0.0.1", server.port)
        assert answered(newcomer)
        assert silent.closed_within(2)  # the silent one made room
        assert answered(served)
        for client in (served, silent, newcomer):
            client.close()
    finally:
        server.stop()
