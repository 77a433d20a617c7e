"""Kafka 4.4's Java clients and tools against compactlog over TLS and SASL: the perf-test
producer over SASL_SSL with SCRAM-SHA-512 while the broker makes it re-authenticate every 2 s,
the console consumer over mutual TLS with PEM key and truststores, and kafka-topics over
SASL_SSL with PLAIN; kafka-topics over SASL_PLAINTEXT with each mechanism; and a wrong password
refused with Kafka's message."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.helpers.security import PLAIN_USERS, add_scram_user, make_ca, plain_jaas
from tests.kafka.harness import run_tool

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    return make_ca(tmp_path / "ca", "--client", "alice")


@pytest.fixture
def secure(ca: Path, tmp_path: Path) -> Iterator[Any]:
    from compactlog.broker.server import BrokerThread

    broker = BrokerThread(
        tmp_path / "data",
        config={
            "listeners": "SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,MTLS:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(ca / "broker.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca / "ca.pem"),
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
            "listener.name.sasl_ssl.connections.max.reauth.ms": 2000,
            "group.initial.rebalance.delay.ms": 0,
        },
    ).start()
    add_scram_user(broker, "carol", "carol-secret")
    yield broker
    broker.stop()


def _properties(path: Path, ca: Path, **extra: str) -> str:
    lines = {
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca / "ca.pem"),
        **extra,
    }
    path.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
    return str(path)


def _sasl(path: Path, ca: Path, mechanism: str, module: str, user: str, password: str) -> str:
    jaas = f'{module} required username="{user}" password="{password}";'
    return _properties(
        path,
        ca,
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": jaas,
        },
    )


SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_java_clients_over_tls_and_sasl(
    secure: Any, ca: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sasl_ssl = secure.bootstrap_for("SASL_SSL")
    scram = _sasl(
        tmp_path / "scram.properties", ca, "SCRAM-SHA-512", SCRAM, "carol", "carol-secret"
    )
    with caplog.at_level(logging.DEBUG, logger="compactlog.broker"):
        produced = run_tool(
            "kafka-producer-perf-test", "--topic", "secure", "--num-records", "400",
            "--throughput", "60", "--record-size", "100", "--producer-props",
            f"bootstrap.servers={sasl_ssl}", "acks=all", "--producer.config", scram,
            timeout=120,
        )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    assert "400 records sent" in produced.stdout, produced.stdout
    reauthenticated = [r for r in caplog.records if "re-authenticated as User:carol" in r.message]
    assert len(reauthenticated) >= 2, "the producer did not re-authenticate"
    assert secure.call(lambda: secure.broker.store.log("secure", 0).log_end_offset) == 400

    mtls = _properties(
        tmp_path / "mtls.properties",
        ca,
        **{
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(ca / "client-alice.pem"),
        },
    )
    consumed = run_tool(
        "kafka-console-consumer", "--bootstrap-server", secure.bootstrap_for("MTLS"),
        "--topic", "secure", "--from-beginning", "--max-messages", "400",
        "--timeout-ms", "30000", "--command-config", mtls, timeout=120,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert len(consumed.stdout.splitlines()) == 400

    plain = _sasl(tmp_path / "plain.properties", ca, "PLAIN", PLAIN, "alice", "alice-secret")
    listed = run_tool(
        "kafka-topics", "--bootstrap-server", sasl_ssl, "--list", "--command-config", plain
    )
    assert listed.returncode == 0, listed.stderr
    assert "secure" in listed.stdout.split()

    wrong = _sasl(tmp_path / "wrong.properties", ca, "PLAIN", PLAIN, "alice", "nope")
    refused = run_tool(
        "kafka-topics", "--bootstrap-server", sasl_ssl, "--list", "--command-config", wrong,
        timeout=120,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "Authentication failed: Invalid username or password" in refused.stdout + refused.stderr


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_java_tools_over_sasl_plaintext_with_each_mechanism(mechanism: str, tmp_path: Path) -> None:
    """kafka-topics over SASL_PLAINTEXT, with each mechanism, creates and lists a topic."""
    from compactlog.broker.server import BrokerThread

    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
    }
    with BrokerThread(tmp_path / "data", config=config) as broker:
        add_scram_user(broker, "carol", "carol-secret")
        user, password = (
            ("alice", "alice-secret") if mechanism == "PLAIN" else ("carol", "carol-secret")
        )
        module = PLAIN if mechanism == "PLAIN" else SCRAM
        jaas = f'{module} required username="{user}" password="{password}";'
        properties = tmp_path / "client.properties"
        properties.write_text(
            f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
            f"sasl.jaas.config={jaas}\n"
        )
        bootstrap = broker.bootstrap_for("SASL_PLAINTEXT")
        created = run_tool(
            "kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "t",
            "--command-config", str(properties), timeout=120,
        )  # fmt: skip
        assert created.returncode == 0, created.stdout + created.stderr
        listed = run_tool(
            "kafka-topics", "--bootstrap-server", bootstrap, "--list",
            "--command-config", str(properties), timeout=120,
        )  # fmt: skip
        assert listed.returncode == 0 and listed.stdout.split() == ["t"], listed.stderr
