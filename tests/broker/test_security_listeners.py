"""Kafka's listener model: several listeners at once, each answering Metadata, FindCoordinator
and DescribeCluster with its own advertised address; the ports read back; clear errors for bad
listeners; and the safe-by-default refusal of a PLAINTEXT listener beyond loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compactlog.broker.security.config import SecuritySettings
from compactlog.broker.security.listeners import resolve_listeners
from compactlog.errors import ConfigError
from tests.broker.helpers.server import Brokers
from tests.broker.helpers.wire import METADATA, Reader, Wire, array, i8, string

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

COMPACTLOG = os.path.join(os.path.dirname(sys.executable), "compactlog")
FIND_COORDINATOR = 10


def metadata_brokers(bootstrap: str) -> list[tuple[int, str, int]]:
    """Metadata v1 (no topics) over the raw wire: the brokers it names."""
    with Wire(bootstrap) as wire:
        body = wire.request(METADATA, 1, array([]))
    reader = Reader(body)
    return reader.array(lambda r: (r.i32(), r.string(), r.i32(), r.string())[:3])


def coordinator(bootstrap: str) -> tuple[str | None, int]:
    """FindCoordinator v1 for a group: the host and port it names."""
    with Wire(bootstrap) as wire:
        body = wire.request(FIND_COORDINATOR, 1, string("g") + i8(0))
    reader = Reader(body)
    reader.i32()  # throttle
    assert reader.i16() == 0
    reader.string()  # error message
    reader.i32()  # node id
    return reader.string(), reader.i32()


def test_each_listener_advertises_its_own_address(brokers: Brokers) -> None:
    b = brokers.start(
        config={
            "listeners": "CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,LOCAL://127.0.0.1:0",
            "advertised.listeners": "CLIENT://client.example:19092,REPLICATION://repl.example:0",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT,"
            "LOCAL:PLAINTEXT",
        }
    )
    ports = b.ports
    assert set(ports) == {"CLIENT", "REPLICATION", "LOCAL"}
    assert len(set(ports.values())) == 3 and all(port > 0 for port in ports.values())
    expected = {
        "CLIENT": ("client.example", 19092),
        "REPLICATION": ("repl.example", ports["REPLICATION"]),  # port 0: the bound port
        "LOCAL": ("127.0.0.1", ports["LOCAL"]),  # not in advertised.listeners: its own
    }
    for name, (host, port) in expected.items():
        bootstrap = b.bootstrap_for(name)
        assert metadata_brokers(bootstrap) == [(0, host, port)], name
        assert coordinator(bootstrap) == (host, port), name


def test_describe_cluster_names_the_listener_of_the_request(brokers: Brokers) -> None:
    from confluent_kafka.admin import AdminClient

    b = brokers.start(
        config={
            "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
            "advertised.listeners": "OTHER://other.example:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
        }
    )
    admin = AdminClient({"bootstrap.servers": b.bootstrap_for("PLAINTEXT")})
    cluster = admin.describe_cluster(request_timeout=20).result(30)
    assert [(n.host, n.port) for n in cluster.nodes] == [("127.0.0.1", b.ports["PLAINTEXT"])]


def test_listen_argument_is_one_plaintext_listener(brokers: Brokers) -> None:
    b = brokers.start()
    assert b.ports == {"PLAINTEXT": b.port}
    assert metadata_brokers(b.bootstrap) == [(0, "127.0.0.1", b.port)]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"listeners": "PLAINTEXT//127.0.0.1:9092"}, "is not NAME://HOST:PORT"),
        ({"listeners": "PLAINTEXT://127.0.0.1:99999"}, "above 65535"),
        (
            {"listeners": "INTERNAL://127.0.0.1:0"},
            "no security protocol defined for listener INTERNAL",
        ),
        (
            {"listeners": "A://127.0.0.1:0", "listener.security.protocol.map": "A:TLS"},
            "is not NAME:PROTOCOL",
        ),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"},
            "listener name PLAINTEXT is given twice",
        ),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": "SSL://h:1"},
            "listener SSL is not one of listeners",
        ),
        (
            {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "advertised.listeners": "PLAINTEXT://0.0.0.0:1",
            },
            "nonroutable meta-address",
        ),
        ({"advertised.listeners": "PLAINTEXT://h:1"}, "listeners is not"),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:0", "listener.name.ssl.ssl.key.password": "x"},
            "no listener is named SSL",
        ),
        ({"listener.name.x.ssl.unknown": "1"}, "Unknown broker config name"),
    ],
)
def test_bad_listener_settings_are_one_line_errors(
    brokers: Brokers, config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        brokers.start(config=config)
    assert "\n" not in str(refused.value)


def test_listen_and_listeners_together_are_refused(tmp_path: Path) -> None:
    from compactlog.broker.server import BrokerThread

    thread = BrokerThread(
        tmp_path / "d", listen=("127.0.0.1", 0), config={"listeners": "PLAINTEXT://127.0.0.1:0"}
    )
    with pytest.raises(ConfigError, match="not both"):
        thread.start()


def test_kafka_default_protocol_map_and_ipv6_syntax() -> None:
    listeners = resolve_listeners(
        "SASL_SSL://[::1]:9093,SSL://:9094",
        None,
        SecuritySettings().values.get(
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        ),
    )
    assert [(i.name, i.protocol, i.host, i.port) for i in listeners] == [
        ("SASL_SSL", "SASL_SSL", "::1", 9093),
        ("SSL", "SSL", "", 9094),
    ]


# --- safe by default ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {"listeners": "PLAINTEXT://0.0.0.0:0"},
        {"listeners": "PLAINTEXT://:0"},
        {
            "listeners": "EXTERNAL://0.0.0.0:0",
            "listener.security.protocol.map": "EXTERNAL:PLAINTEXT",
        },
    ],
)
def test_plaintext_beyond_loopback_without_authorizer_is_refused(
    brokers: Brokers, config: dict[str, Any]
) -> None:
    with pytest.raises(ConfigError) as refused:
        brokers.start(config=config)
    message = str(refused.value)
    assert "compactlog.allow.plaintext.without.authorizer=true" in message
    assert "authorizer.class.name" in message and "\n" not in message


def test_the_listen_argument_is_checked_too(tmp_path: Path) -> None:
    from compactlog.broker.server import BrokerThread

    with pytest.raises(ConfigError, match=r"compactlog\.allow\.plaintext\.without\.authorizer"):
        BrokerThread(tmp_path / "d", listen=("0.0.0.0", 0)).start()


@pytest.mark.parametrize(
    "allow",
    [
        {"compactlog.allow.plaintext.without.authorizer": "true"},
        {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
    ],
)
def test_plaintext_beyond_loopback_allowed_explicitly(
    brokers: Brokers, allow: dict[str, str]
) -> None:
    b = brokers.start(config={"listeners": "PLAINTEXT://0.0.0.0:0", **allow})
    assert metadata_brokers(f"127.0.0.1:{b.port}")[0][2] == b.port


def test_loopback_and_tls_listeners_need_no_permission(brokers: Brokers) -> None:
    b = brokers.start(config={"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://0.0.0.0:0"})
    assert set(b.ports) == {"PLAINTEXT", "SASL_PLAINTEXT"}


def _serve(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COMPACTLOG, "--data-dir", str(data_dir), "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_serve_refuses_plaintext_on_every_interface(tmp_path: Path) -> None:
    done = _serve(tmp_path / "data", "--listen", "0.0.0.0:0")
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, done.stderr
    assert "compactlog.allow.plaintext.without.authorizer=true" in errors[0]
    assert "Traceback" not in done.stderr


def test_serve_refuses_listen_with_listeners(tmp_path: Path) -> None:
    done = _serve(
        tmp_path / "data",
        "--listen",
        "127.0.0.1:0",
        "--config",
        "listeners=PLAINTEXT://127.0.0.1:0",
    )
    assert done.returncode == 2
    assert "not both" in done.stderr and "Traceback" not in done.stderr


def test_serve_with_listeners_setting(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            COMPACTLOG, "--data-dir", str(tmp_path / "data"), "serve",
            "--config", "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        while not any("listening on" in line for line in lines):
            line = proc.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
        found = [line for line in lines if "listener SASL_PLAINTEXT (SASL_PLAINTEXT)" in line]
        assert found, "".join(lines)
        port = int(found[0].split("advertised as 127.0.0.1:")[1].split()[0])
        with Wire(f"127.0.0.1:{port}") as wire:  # ApiVersions is served before authentication
            assert wire.request(18, 0, b"")[:2] == b"\x00\x00"
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _has_ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback here")
def test_ipv6_listener(brokers: Brokers) -> None:
    from confluent_kafka.admin import AdminClient

    b = brokers.start(config={"listeners": "PLAINTEXT://[::1]:0"})
    bootstrap = b.bootstrap_for("PLAINTEXT")
    assert bootstrap == f"[::1]:{b.ports['PLAINTEXT']}"
    nodes = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20).brokers
    assert [(n.host, n.port) for n in nodes.values()] == [("::1", b.ports["PLAINTEXT"])]
