"""TLS listeners from PEM material: mutual TLS and the certificate's principal, inline and
encrypted keys, per-listener settings, and the refusals (untrusted or expired certificates, no
certificate where one is required, a PLAINTEXT client on a TLS port), after which the broker
still serves."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

from compactlog.errors import ConfigError
from tests.broker.helpers.security import Auth, make_ca, roundtrip, tls_settings
from tests.broker.helpers.server import Brokers
from tests.broker.helpers.wire import API_VERSIONS, request_frame

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(180),
    pytest.mark.usefixtures("collect_client_garbage"),
]


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ca(tmp_path_factory.mktemp("ca"), "--client", "alice")


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA the broker does not trust, with a client certificate of its own."""
    return make_ca(tmp_path_factory.mktemp("other"), "--client", "alice")


@pytest.fixture(scope="module")
def expired_ca(ca: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An expired client certificate issued by the CA the broker trusts."""
    directory = tmp_path_factory.mktemp("expired")
    for name in ("ca.pem", "ca-key.pem"):
        (directory / name).write_bytes((ca / name).read_bytes())
    return make_ca(directory, "--client", "alice", "--expired")


def _mtls_broker(brokers: Brokers, ca: Path) -> Any:
    """SSL (no client certificate asked) and MTLS (one required), by the per-listener prefix."""
    return brokers.start(
        config={
            "listeners": "SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
            "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
            **tls_settings(ca),
            "listener.name.mtls.ssl.client.auth": "required",
        }
    )


def _principals(broker: Any) -> list[str]:
    return sorted(broker.call(lambda: [c.principal for c in broker.broker._connections]))


def _produce_fails(bootstrap: str, conf: dict[str, Any]) -> str:
    """Produce with confluent-kafka, expecting the delivery to fail; returns the error."""
    from confluent_kafka import Producer

    errors: list[str] = []
    logs: list[str] = []

    class Log:
        def log(self, level: int, fmt: str, *args: Any) -> None:
            logs.append(fmt % args if args else fmt)

    producer = Producer(
        {"bootstrap.servers": bootstrap, "message.timeout.ms": 4000, **conf}, logger=Log()
    )
    producer.produce("t", b"v", on_delivery=lambda err, msg: errors.append(str(err)))
    producer.flush(20)
    assert errors and errors[0] != "None", errors
    return " | ".join(logs)


def test_mutual_tls_principal_is_the_certificate_subject(brokers: Brokers, ca: Path) -> None:
    from confluent_kafka import Producer

    b = _mtls_broker(brokers, ca)
    producer = Producer(
        {"bootstrap.servers": b.bootstrap_for("MTLS"), **Auth("SSL", ca, cert="alice").confluent()}
    )
    producer.produce("t", b"v")
    assert producer.flush(20) == 0
    # Kafka's DefaultKafkaPrincipalBuilder: User: and the subject in RFC 2253 form.
    assert "User:O=compactlog test,CN=alice" in _principals(b)
    del producer
    other = Producer({"bootstrap.servers": b.bootstrap_for("SSL"), **Auth("SSL", ca).confluent()})
    other.produce("t", b"v")
    assert other.flush(20) == 0
    assert "User:ANONYMOUS" in _principals(b)


@pytest.mark.parametrize("which", ["untrusted", "expired", "none"])
def test_bad_client_certificates_are_refused(
    brokers: Brokers, ca: Path, other_ca: Path, expired_ca: Path, which: str
) -> None:
    b = _mtls_broker(brokers, ca)
    conf = Auth("SSL", ca).confluent()
    if which != "none":
        source = other_ca if which == "untrusted" else expired_ca
        conf["ssl.certificate.location"] = str(source / "client-alice-cert.pem")
        conf["ssl.key.location"] = str(source / "client-alice-key.pem")
    _produce_fails(b.bootstrap_for("MTLS"), conf)
    # refused without harm: a good client is served at once
    assert (
        len(roundtrip("confluent-kafka", b.bootstrap_for("MTLS"), Auth("SSL", ca, cert="alice")))
        == 3
    )


def test_client_that_does_not_trust_the_broker_gives_up(
    brokers: Brokers, ca: Path, other_ca: Path
) -> None:
    b = _mtls_broker(brokers, ca)
    logs = _produce_fails(b.bootstrap_for("SSL"), Auth("SSL", other_ca).confluent())
    assert "certificate verify failed" in logs, logs
    assert len(roundtrip("kafka-python", b.bootstrap_for("SSL"), Auth("SSL", ca))) == 3


def test_plaintext_client_on_a_tls_port(brokers: Brokers, ca: Path) -> None:
    b = _mtls_broker(brokers, ca)
    _produce_fails(b.bootstrap_for("SSL"), {})
    host, port = b.bootstrap_for("SSL").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request_frame(API_VERSIONS, 0, 1, b""))
        started = time.monotonic()
        try:
            data = sock.recv(1024)
        except ConnectionResetError:
            data = b""
        assert data[:1] != b"\x00" or len(data) < 8  # no Kafka response: a TLS alert, or closed
        assert time.monotonic() - started < 15
    assert len(roundtrip("aiokafka", b.bootstrap_for("SSL"), Auth("SSL", ca))) == 3


def test_inline_pem_with_an_encrypted_key(
    brokers: Brokers, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ca = make_ca(tmp_path_factory.mktemp("enc"), "--key-password", "key-secret")
    chain = (ca / "broker-cert.pem").read_text()
    key = (ca / "broker-key.pem").read_text()
    assert "ENCRYPTED PRIVATE KEY" in key
    b = brokers.start(
        config={
            "listeners": "SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            # one line, as in a properties file without continuation lines
            "ssl.keystore.certificate.chain": " ".join(chain.splitlines()),
            "ssl.keystore.key": " ".join(key.splitlines()),
            "ssl.key.password": "key-secret",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": (ca / "ca.pem").read_text(),
        }
    )
    assert len(roundtrip("kcat", b.bootstrap_for("SSL"), Auth("SSL", ca))) == 3


def test_tls_versions(brokers: Brokers, ca: Path) -> None:
    import ssl

    b = brokers.start(
        config={
            "listeners": "SSL://127.0.0.1:0",
            **tls_settings(ca),
            "ssl.enabled.protocols": "TLSv1.3",
        }
    )
    host, port = b.bootstrap_for("SSL").rsplit(":", 1)
    for version, accepted in ((ssl.TLSVersion.TLSv1_2, False), (ssl.TLSVersion.TLSv1_3, True)):
        context = ssl.create_default_context(cafile=str(ca / "ca.pem"))
        context.minimum_version = context.maximum_version = version
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            if accepted:
                with context.wrap_socket(raw, server_hostname="localhost") as tls:
                    assert tls.version() == "TLSv1.3"
            else:
                with pytest.raises(ssl.SSLError):
                    context.wrap_socket(raw, server_hostname="localhost")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ssl.keystore.type": "JKS"}, "reads PEM only"),
        ({"ssl.keystore.password": "x"}, "key store password cannot be specified with PEM"),
        ({"ssl.truststore.password": "x"}, "trust store password cannot be specified for PEM"),
        ({"ssl.keystore.key": "k"}, "private key is specified, but certificate chain is not"),
        (
            {"ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c"},
            "Both SSL key store location and separate private key",
        ),
        ({"ssl.truststore.certificates": "c"}, "Both SSL trust store location and separate"),
        ({"ssl.keystore.location": "/nonexistent/broker.pem"}, "no such file"),
        ({"ssl.key.password": "wrong"}, None),  # the key is not encrypted: the password is unused
        ({"ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/"}, "only DEFAULT"),
        ({"ssl.client.auth": "maybe"}, "ssl.client.auth"),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "TLSv1.1"),
        ({"ssl.truststore.location": None, "ssl.client.auth": "required"}, "no truststore"),
        ({"ssl.keystore.location": None}, "has no key"),
        (
            {"ssl.keystore.location": None, "ssl.keystore.certificate.chain": "c"},
            "certificate chain is specified, but private key is not",
        ),
    ],
)
def test_bad_tls_settings_are_one_line_errors(
    brokers: Brokers, ca: Path, settings: dict[str, Any], message: str | None
) -> None:
    config: dict[str, Any] = {"listeners": "SSL://127.0.0.1:0", **tls_settings(ca), **settings}
    config = {k: v for k, v in config.items() if v is not None}
    if message is None:
        brokers.start(config=config)
        return
    with pytest.raises(ConfigError, match=message) as refused:
        brokers.start(config=config)
    assert "\n" not in str(refused.value)
