"""The broker's limits (request size, connections, idle connections, in-flight requests) and its
metrics endpoint. Small settings keep every test well under a second of waiting."""

from __future__ import annotations

import re
import socket
import struct
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from compactlog import errors as c
from compactlog.broker.limits import DEFAULT_SOCKET_REQUEST_MAX_BYTES
from compactlog.broker.settings import GROUP_SETTINGS, BrokerSettings
from compactlog.errors import ConfigError
from compactlog.protocol import RequestHeader, encode_request
from compactlog.protocol.messages import ApiVersionsRequest
from tests.broker.helpers.wire import Closed
from tests.broker.test_server_basics import (
    API_VERSIONS,
    FETCH,
    PRODUCE,
    Client,
    batch,
    create_topic,
    fetch_request,
    produce_request,
    start_broker,
)

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]


def api_versions_frame(correlation_id: int) -> bytes:
    return bytes(
        encode_request(RequestHeader(API_VERSIONS, 0, correlation_id, "t"), ApiVersionsRequest())
    )


def test_defaults_are_kafkas() -> None:
    limits = BrokerSettings.from_mapping({}).limits
    assert limits.socket_request_max_bytes == DEFAULT_SOCKET_REQUEST_MAX_BYTES == 104_857_600
    assert limits.connections_max_idle_ms == 600_000
    assert limits.fetch_max_bytes == 57_671_680


@pytest.mark.parametrize("size", [200 * 2**20, 2**31 - 1, -1])
def test_an_oversized_frame_closes_the_connection_without_reading_the_body(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, size: int
) -> None:
    server = start_broker(tmp_path / "data", {"socket.request.max.bytes": 10_000})
    try:
        with Client(server.port) as client:
            # The frame before the bad size is still answered.
            client.sock.sendall(api_versions_frame(1) + struct.pack(">i", size) + b"\0" * 100)
            client.sent[1] = (API_VERSIONS, 0)
            assert client.receive()[0] == 1
            started = time.monotonic()
            assert client.closed_within(5)
            assert time.monotonic() - started < 1
        with Client(server.port) as client:  # the broker goes on
            assert client.call(API_VERSIONS, 0, ApiVersionsRequest()).error_code == c.NONE
    finally:
        server.stop()
    assert "closing connection from 127.0.0.1" in caplog.text
    assert ("exceeds the limit of 10000" if size > 0 else "is negative") in caplog.text


def test_a_request_over_socket_request_max_bytes_closes(tmp_path: Path) -> None:
    server = start_broker(tmp_path / "data", {"socket.request.max.bytes": 2000})
    try:
        create_topic(server, "big")
        with Client(server.port) as client:
            client.send(PRODUCE, 7, produce_request({("big", 0): batch([(b"k", b"x" * 3000)])}))
            assert client.closed_within(5)
    finally:
        server.stop()


def malformed_metadata_frame() -> bytes:
    body = struct.pack(">hhi", 3, 4, 7) + struct.pack(">h", 1) + b"x" + b"\xff\xff"
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize("delay_ms", [0, 400])
def test_a_bad_request_closes_its_connection_after_the_failed_request_delay(
    tmp_path: Path, delay_ms: int
) -> None:
    server = start_broker(tmp_path / "data", {"compactlog.failed.request.close.delay.ms": delay_ms})
    try:
        with Client(server.port) as bad, Client(server.port) as good:
            started = time.monotonic()
            # A request after the bad one is not read, let alone answered.
            bad.sock.sendall(malformed_metadata_frame() + api_versions_frame(8))
            assert bad.closed_within(5)
            held = time.monotonic() - started
            # Jittered between half and one and a half times the delay.
            assert delay_ms / 2000 <= held < delay_ms * 1.5 / 1000 + 0.5, held
            # The others are served meanwhile and after.
            assert good.call(API_VERSIONS, 0, ApiVersionsRequest()).error_code == c.NONE
    finally:
        server.stop()


def test_the_failed_request_delay_is_a_bounded_setting() -> None:
    assert BrokerSettings.from_mapping({}).limits.failed_request_close_delay_ms == 100
    with pytest.raises(ConfigError, match=r"compactlog\.failed\.request\.close\.delay\.ms"):
        BrokerSettings.from_mapping({"compactlog.failed.request.close.delay.ms": -1})


def test_connections_over_max_connections_are_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = start_broker(tmp_path / "data", {"max.connections": 2})
    try:
        first, second = Client(server.port), Client(server.port)
        for client in (first, second):
            assert client.call(API_VERSIONS, 0, ApiVersionsRequest()).error_code == c.NONE
        with Client(server.port) as third:
            assert third.closed_within(5)
        first.close()
        deadline = time.monotonic() + 5
        while True:  # the broker notices the close, then has room again
            with Client(server.port) as fourth:
                try:
                    fourth.call(API_VERSIONS, 0, ApiVersionsRequest())
                    break
                except (OSError, Closed):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        second.close()
    finally:
        server.stop()
    assert "max.connections=2 are open" in caplog.text


def test_idle_connections_are_closed_but_busy_ones_are_not(tmp_path: Path) -> None:
    server = start_broker(tmp_path / "data", {"connections.max.idle.ms": 300})
    try:
        create_topic(server, "w")
        with (
            Client(server.port) as idle,
            Client(server.port) as half_sent,
            Client(server.port) as polling,
        ):
            half_sent.sock.sendall(b"\x00\x00")  # half of a size prefix, then nothing
            polling.send(FETCH, 11, fetch_request({("w", 0): 0}, max_wait_ms=1000))
            started = time.monotonic()
            assert idle.closed_within(5) and half_sent.closed_within(5)
            assert 0.25 <= time.monotonic() - started < 3
            polling.receive()  # a long poll longer than the idle time: answered
            assert time.monotonic() - started >= 0.9
            assert polling.call(API_VERSIONS, 0, ApiVersionsRequest()).error_code == c.NONE
    finally:
        server.stop()


def test_pipelining_beyond_the_in_flight_limit_is_slowed_down_not_refused(
    tmp_path: Path,
) -> None:
    server = start_broker(
        tmp_path / "data", {"compactlog.max.in.flight.requests.per.connection": 1}
    )
    try:
        with Client(server.port) as client:
            frames = b"".join(api_versions_frame(i) for i in range(1, 101))
            client.sock.sendall(frames)
            for i in range(1, 101):
                client.sent[i] = (API_VERSIONS, 0)
            assert [client.receive()[0] for _ in range(100)] == list(range(1, 101))
    finally:
        server.stop()


# --- metrics -------------------------------------------------------------------------------------
_SAMPLE = re.compile(r'^[a-z_][a-z0-9_]*(\{([a-z_]+="[^"]*",?)*\})? -?[0-9.e+-]+$|^[a-z_:]+ NaN$')


def test_metrics_endpoint(tmp_path: Path) -> None:
    server = start_broker(tmp_path / "data", metrics_listen=("127.0.0.1", 0))
    try:
        assert server.broker.metrics_port
        create_topic(server, "m", config={"cleanup.policy": "compact"})
        with Client(server.port) as client:
            data = batch([(b"k%d" % i, b"v") for i in range(3)])
            client.call(PRODUCE, 7, produce_request({("m", 0): data}))
            client.call(FETCH, 11, fetch_request({("m", 0): 0}))
            url = f"http://127.0.0.1:{server.broker.metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as response:
                assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                text = response.read().decode()
        with pytest.raises(urllib.error.HTTPError) as not_found:
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=5)
        assert not_found.value.code == 404
        not_found.value.close()
    finally:
        server.stop()
    lines = text.splitlines()
    for line in lines:
        assert line.startswith("# ") or _SAMPLE.match(line), line
    samples = _samples(text)
    for expected in (
        'kafka_network_requestmetrics_requests_total{request="Produce"} 1',
        'kafka_network_requestmetrics_requests_total{request="Fetch"} 1',
        'kafka_network_requestmetrics_totaltimems_count{request="Produce"} 1',
        "kafka_server_brokertopicmetrics_messagesin_total 3",
        "compactlog_broker_fetch_records_total 3",
        "kafka_server_socket_server_metrics_connection_count 1",
        'kafka_log_log_logendoffset{topic="m",partition="0"} 3',
        'kafka_log_log_logstartoffset{topic="m",partition="0"} 0',
        "# TYPE kafka_log_logcleanermanager_max_dirty_percent gauge",
        "# TYPE kafka_log_logcleaner_max_buffer_utilization_percent gauge",
        "# TYPE kafka_log_logcleaner_deadthreadcount gauge",
    ):
        if expected.startswith("#"):
            assert expected in lines, expected
        else:  # prometheus_client writes 1 as 1.0: compare the numbers
            sample, value = expected.rsplit(" ", 1)
            assert samples.get(sample) == float(value), expected
    assert samples["kafka_server_brokertopicmetrics_bytesin_total"] == len(data)


class _Samples(dict[str, float]):
    """``{'name{labels}': value}``, looked up whatever the order of the labels."""

    def __getitem__(self, sample: str) -> float:
        return super().__getitem__(_sorted_labels(sample))

    def get(self, sample: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(_sorted_labels(sample), default)


def _sorted_labels(sample: str) -> str:
    name, brace, labels = sample.partition("{")
    if not brace:
        return sample
    return name + "{" + ",".join(sorted(labels.rstrip("}").split(","))) + "}"


def _samples(text: str) -> _Samples:
    """Every sample line of a Prometheus text exposition (label values without commas)."""
    samples = _Samples()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            sample, value = line.rsplit(" ", 1)
            samples[_sorted_labels(sample)] = float(value)
    return samples


def test_metrics_endpoint_survives_junk(tmp_path: Path) -> None:
    server = start_broker(tmp_path / "data", metrics_listen=("127.0.0.1", 0))
    try:
        port = server.broker.metrics_port
        assert port is not None
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"POST /metrics HTTP/1.0\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.0 405")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"x" * 20_000)  # no end of headers within the limit
            s.settimeout(5)
            assert s.recv(100) == b""
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert response.status == 200
    finally:
        server.stop()


#: A value, as given and as the coordinator holds it, for the settings that are not integers.
_TEXT_SAMPLES = {
    "group.consumer.assignors": ("range,uniform", ("range", "uniform")),
    "group.consumer.migration.policy": ("disabled", "disabled"),
}


def test_every_group_setting_reaches_the_coordinator() -> None:
    for name in GROUP_SETTINGS:
        given, held = _TEXT_SAMPLES.get(name, ("12345", 12345))
        settings = BrokerSettings.from_mapping({name: given})
        assert getattr(settings.groups, name.replace(".", "_")) == held, name
        (row,) = [r for r in settings.describe() if r.name == name]
        assert (row.value, int(row.source)) == (given, 4)
