"""SASL on SASL_PLAINTEXT and SASL_SSL listeners, refusals first: wrong passwords and unknown
users (SASL_AUTHENTICATION_FAILED with Kafka's message, then a close after
connection.failed.authentication.delay.ms), unsupported mechanisms (UNSUPPORTED_SASL_MECHANISM
with the enabled list), requests before authentication (closed unanswered), a flood of bad
handshakes beside a good producer; then the handshake v0 raw-token form, the principal, and
re-authentication (connections.max.reauth.ms)."""

from __future__ import annotations

import logging
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from compactlog.errors import ConfigError
from tests.broker.helpers.security import (
    PLAIN_USERS,
    Auth,
    add_scram_user,
    make_ca,
    plain_jaas,
    roundtrip,
    tls_settings,
)
from tests.broker.helpers.server import Brokers
from tests.broker.helpers.wire import API_VERSIONS, METADATA, Closed, Reader, Wire, array, string

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(180),
    pytest.mark.usefixtures("collect_client_garbage"),
]

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE = 58, 33, 34
SASL = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.jaas.config": plain_jaas(PLAIN_USERS)}


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ca(tmp_path_factory.mktemp("ca"))


def handshake(wire: Wire, mechanism: str, version: int = 1) -> tuple[int, list[str | None]]:
    reader = Reader(wire.request(SASL_HANDSHAKE, version, string(mechanism)))
    return reader.i16(), reader.array(lambda r: r.string())


def authenticate(wire: Wire, token: bytes, version: int = 1) -> tuple[int, str | None, bytes, int]:
    reader = Reader(wire.request(SASL_AUTHENTICATE, version, struct.pack(">i", len(token)) + token))
    code, message = reader.i16(), reader.string()
    size = reader.i32()
    data = reader.data[reader.pos : reader.pos + size]
    reader.pos += size
    lifetime = reader.i64() if version >= 1 else 0
    return code, message, data, lifetime


def closed_within(wire: Wire, seconds: float) -> float:
    """Seconds until the broker closed ``wire`` (no byte may arrive first)."""
    started = time.monotonic()
    wire.sock.settimeout(seconds)
    data = wire.sock.recv(1)
    assert data == b"", f"a response arrived: {data!r}"
    return time.monotonic() - started


def _auth_error(bootstrap: str, auth: Auth) -> str:
    """The error confluent-kafka reports (its error callback) when it cannot authenticate."""
    from confluent_kafka import Producer

    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            **auth.confluent(),
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "confluent-kafka reported no error"
    return errors[0]


@pytest.mark.parametrize(
    ("mechanism", "user", "password", "message"),
    [
        ("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"),
        ("PLAIN", "nobody", "x", "Authentication failed: Invalid username or password"),
        ("SCRAM-SHA-256", "carol", "wrong", "Authentication failed during authentication due to "
         "invalid credentials with SASL mechanism SCRAM-SHA-256"),
        ("SCRAM-SHA-512", "nobody", "x", "Authentication failed during authentication due to "
         "invalid credentials with SASL mechanism SCRAM-SHA-512"),
    ],
)  # fmt: skip
def test_wrong_password_and_unknown_user(
    brokers: Brokers,
    caplog: pytest.LogCaptureFixture,
    mechanism: str,
    user: str,
    password: str,
    message: str,
) -> None:
    b = brokers.start(config=SASL)
    add_scram_user(b, "carol", "carol-secret")
    bootstrap = b.bootstrap_for("SASL_PLAINTEXT")
    auth = Auth("SASL_PLAINTEXT", mechanism=mechanism, user=user, password=password)
    assert message in _auth_error(bootstrap, auth)
    # kafka-python gets error 58 with the same message (it logs it, then gives up bootstrapping)
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaError):
        KafkaAdminClient(
            bootstrap_servers=bootstrap, **auth.kafka_python(), bootstrap_timeout_ms=3000
        )
    assert "[Error 58] SaslAuthenticationFailedError" in caplog.text
    assert f"SaslAuthenticationFailedError: {message}" in caplog.text
    good = Auth("SASL_PLAINTEXT", mechanism="SCRAM-SHA-256", user="carol", password="carol-secret")
    assert len(roundtrip("confluent-kafka", bootstrap, good)) == 3


def test_failed_authentication_answers_then_closes_after_the_delay(brokers: Brokers) -> None:
    b = brokers.start(config={**SASL, "connection.failed.authentication.delay.ms": 600})
    with Wire(b.bootstrap_for("SASL_PLAINTEXT")) as wire:
        assert handshake(wire, "PLAIN") == (0, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        code, message, _, _ = authenticate(wire, b"\0alice\0wrong")
        assert (code, message) == (
            SASL_AUTHENTICATION_FAILED,
            "Authentication failed: Invalid username or password",
        )
        waited = closed_within(wire, 10)
    assert 0.4 <= waited < 8, waited


def test_unsupported_mechanism_lists_the_enabled_ones(brokers: Brokers) -> None:
    b = brokers.start(
        config={**SASL, "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    )
    bootstrap = b.bootstrap_for("SASL_PLAINTEXT")
    for mechanism in ("GSSAPI", "OAUTHBEARER", "PLAIN"):
        with Wire(bootstrap) as wire:
            assert handshake(wire, mechanism) == (UNSUPPORTED_SASL_MECHANISM, ["SCRAM-SHA-512"])
            closed_within(wire, 10)
    error = _auth_error(
        bootstrap, Auth("SASL_PLAINTEXT", mechanism="PLAIN", user="alice", password="alice-secret")
    )
    assert "SCRAM-SHA-512" in error and "PLAIN" in error, error


def test_requests_before_authentication_close_the_connection(brokers: Brokers) -> None:
    b = brokers.start(config=SASL)
    bootstrap = b.bootstrap_for("SASL_PLAINTEXT")
    with Wire(bootstrap) as wire:  # nothing but ApiVersions and SaslHandshake first
        wire.send(METADATA, 1, array([]))
        closed_within(wire, 10)
    with Wire(bootstrap) as wire:  # ApiVersions is answered; then the handshake is expected
        assert wire.request(API_VERSIONS, 1, b"")[:2] == b"\0\0"
        wire.send(METADATA, 1, array([]))
        closed_within(wire, 10)
    with Wire(bootstrap) as wire:  # ApiVersions once only
        assert wire.request(API_VERSIONS, 1, b"")[:2] == b"\0\0"
        wire.send(API_VERSIONS, 1, b"")
        closed_within(wire, 10)
    with Wire(bootstrap) as wire:  # after the handshake, only SaslAuthenticate
        assert handshake(wire, "PLAIN")[0] == 0
        wire.send(METADATA, 1, array([]))
        closed_within(wire, 10)
    with Wire(b.bootstrap_for("SASL_PLAINTEXT")) as wire:  # and the broker is fine
        assert handshake(wire, "PLAIN")[0] == 0
        assert authenticate(wire, b"\0alice\0alice-secret")[0] == 0
        assert Reader(wire.request(METADATA, 1, array([]))).i32() == 1  # one broker


def test_handshake_v0_takes_raw_tokens(brokers: Brokers) -> None:
    b = brokers.start(config=SASL)
    with Wire(b.bootstrap_for("SASL_PLAINTEXT")) as wire:
        assert handshake(wire, "PLAIN", version=0)[0] == 0
        token = b"\0bob\0bob-secret"
        wire.sock.sendall(struct.pack(">i", len(token)) + token)
        assert wire.sock.recv(4) == b"\0\0\0\0"  # an empty raw server token
        assert Reader(wire.request(METADATA, 1, array([]))).i32() == 1
    with Wire(b.bootstrap_for("SASL_PLAINTEXT")) as wire:
        assert handshake(wire, "PLAIN", version=0)[0] == 0
        token = b"\0bob\0wrong"
        wire.sock.sendall(struct.pack(">i", len(token)) + token)
        closed_within(wire, 10)


def test_sasl_apis_on_a_plaintext_listener(brokers: Brokers) -> None:
    b = brokers.start()
    with Wire(b.bootstrap) as wire:
        assert handshake(wire, "PLAIN")[0] == ILLEGAL_SASL_STATE
        assert authenticate(wire, b"\0alice\0alice-secret")[0] == ILLEGAL_SASL_STATE


def test_principal_is_the_sasl_user(brokers: Brokers, ca: Path) -> None:
    from confluent_kafka import Producer

    b = brokers.start(config={**SASL, "listeners": "SASL_SSL://127.0.0.1:0", **tls_settings(ca)})
    auth = Auth("SASL_SSL", ca, mechanism="PLAIN", user="alice", password="alice-secret")
    producer = Producer({"bootstrap.servers": b.bootstrap_for("SASL_SSL"), **auth.confluent()})
    producer.produce("t", b"v")
    assert producer.flush(20) == 0
    principals = b.call(lambda: [c.principal for c in b.broker._connections])
    assert "User:alice" in principals


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI is not implemented"),
        ({"sasl.enabled.mechanisms": "PLAIN,DIGEST-MD5"}, "unknown mechanism 'DIGEST-MD5'"),
        ({"sasl.enabled.mechanisms": ""}, "is empty"),
        ({"sasl.jaas.config": "PlainLoginModule"}, "is not"),
        ({"sasl.jaas.config": "com.example.Other required;"}, "not org.apache.kafka"),
        ({"connections.max.reauth.ms": "-1"}, "at least 0"),
    ],
)
def test_bad_sasl_settings_are_one_line_errors(
    brokers: Brokers, config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        brokers.start(config={**SASL, **config})
    assert "\n" not in str(refused.value)


def test_flood_of_bad_handshakes_beside_a_good_producer(brokers: Brokers, ca: Path) -> None:
    """Five threads send a few hundred failing logins (wrong password, unknown mechanism,
    requests before authentication, plaintext on the TLS port) while a SASL_SSL producer sends
    records: every record is stored, once."""
    from confluent_kafka import Producer

    b = brokers.start(
        config={
            **SASL,
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            **tls_settings(ca),
            "connection.failed.authentication.delay.ms": 20,
        }
    )
    add_scram_user(b, "carol", "carol-secret")
    bad_bootstrap = b.bootstrap_for("SASL_PLAINTEXT")
    tls_bootstrap = b.bootstrap_for("SASL_SSL")
    stop = threading.Event()
    done: list[int] = []
    failures: list[BaseException] = []

    def flood(kind: int) -> None:
        count = 0
        try:
            while not stop.is_set() and count < 80:
                try:
                    target = tls_bootstrap if kind == 4 else bad_bootstrap
                    with Wire(target, timeout=10) as wire:
                        if kind == 0:
                            handshake(wire, "PLAIN")
                            authenticate(wire, b"\0alice\0wrong")
                        elif kind == 1:
                            handshake(wire, "OAUTHBEARER")
                        elif kind in (2, 4):  # 4: a PLAINTEXT client on the TLS port
                            wire.send(METADATA, 1, array([]))
                        else:
                            handshake(wire, "SCRAM-SHA-256")
                            authenticate(wire, b"n,,n=carol,r=abc")
                            authenticate(wire, b"c=biws,r=abcX,p=AAAA")
                        closed_within(wire, 10)
                except (Closed, ConnectionError):
                    pass
                count += 1
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)
        done.append(count)

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(5)]
    for thread in threads:
        thread.start()
    auth = Auth("SASL_SSL", ca, mechanism="SCRAM-SHA-512", user="carol", password="carol-secret")
    producer = Producer(
        {
            "bootstrap.servers": b.bootstrap_for("SASL_SSL"),
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            **auth.confluent(),
        }
    )
    errors: list[Any] = []
    sent = 0
    while any(t.is_alive() for t in threads) or sent < 2000:
        producer.produce("flooded", str(sent).encode(), on_delivery=lambda e, m: errors.append(e))
        sent += 1
        producer.poll(0)
        if sent % 100 == 0:
            time.sleep(0.01)
        if sent > 20000:
            break
    stop.set()
    assert producer.flush(60) == 0
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    assert sum(done) >= 200, done
    assert len(errors) == sent and not any(errors)
    stored = b.call(lambda: b.broker.store.log("flooded", 0).log_end_offset)
    assert stored == sent


def test_reauthentication_keeps_a_producer_going(brokers: Brokers) -> None:
    """connections.max.reauth.ms=2000: librdkafka re-authenticates (KIP-368) on the same
    connection before each session expires, and keeps producing."""
    from confluent_kafka import Producer

    b = brokers.start(config={**SASL, "connections.max.reauth.ms": 2000})
    add_scram_user(b, "carol", "carol-secret")
    auth = Auth("SASL_PLAINTEXT", mechanism="SCRAM-SHA-256", user="carol", password="carol-secret")
    producer = Producer(
        {"bootstrap.servers": b.bootstrap_for("SASL_PLAINTEXT"), "linger.ms": 0, **auth.confluent()}
    )
    errors: list[Any] = []
    deadline = time.monotonic() + 7.5
    sent = 0
    while time.monotonic() < deadline:
        producer.produce("reauth", str(sent).encode(), on_delivery=lambda e, m: errors.append(e))
        sent += 1
        producer.poll(0.1)
    assert producer.flush(30) == 0
    assert len(errors) == sent and not any(errors)

    def reauths() -> list[int]:
        return [c._auth.reauthentications for c in b.broker._connections if c._auth]

    assert max(b.call(reauths)) >= 2, b.call(reauths)
    assert b.call(lambda: b.broker.store.log("reauth", 0).log_end_offset) == sent


def test_expired_session_without_reauthentication_is_closed(brokers: Brokers) -> None:
    b = brokers.start(config={**SASL, "connections.max.reauth.ms": 500})
    with Wire(b.bootstrap_for("SASL_PLAINTEXT")) as wire:
        assert handshake(wire, "PLAIN")[0] == 0
        code, _, _, lifetime = authenticate(wire, b"\0alice\0alice-secret")
        assert (code, lifetime) == (0, 500)
        assert Reader(wire.request(METADATA, 1, array([]))).i32() == 1
        time.sleep(0.8)
        wire.send(METADATA, 1, array([]))
        closed_within(wire, 10)
    with Wire(b.bootstrap_for("SASL_PLAINTEXT")) as wire:  # re-authenticating in time is fine
        assert handshake(wire, "PLAIN")[0] == 0
        assert authenticate(wire, b"\0alice\0alice-secret")[0] == 0
        time.sleep(0.3)
        assert handshake(wire, "PLAIN")[0] == 0
        assert authenticate(wire, b"\0alice\0alice-secret")[:1] == (0,)
        time.sleep(0.3)  # past the first session, inside the second
        assert Reader(wire.request(METADATA, 1, array([]))).i32() == 1
        assert handshake(wire, "PLAIN")[0] == 0  # a different principal is refused
        assert authenticate(wire, b"\0bob\0bob-secret")[:2] == (
            SASL_AUTHENTICATION_FAILED,
            "Cannot change principals during re-authentication from User.alice: User.bob",
        )
