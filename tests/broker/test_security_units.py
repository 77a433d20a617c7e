"""The sans-I/O parts of the security layer, without a socket: SCRAM against RFC 7677's
example exchange, PLAIN's refusals, the JAAS parser, PEM re-wrapping, and the authenticator's
order of requests."""

from __future__ import annotations

import base64
import re

import pytest

from compactlog.broker.security.sasl import (
    PlainServer,
    SaslFailed,
    ScramServer,
    parse_jaas,
    plain_users,
)
from compactlog.broker.security.scram import MECHANISMS, ScramCredential
from compactlog.broker.security.tls import normalize_pem
from compactlog.errors import ConfigError

# RFC 7677 section 3: user "user", password "pencil".
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_credential() -> ScramCredential:
    mechanism = MECHANISMS["SCRAM-SHA-256"]
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    return mechanism.credential(mechanism.salted_password("pencil", salt, 4096), salt, 4096)


def _server(credential: ScramCredential | None) -> ScramServer:
    return ScramServer(
        "SCRAM-SHA-256",
        lambda user, mechanism: credential if user == "user" else None,
        lambda: SERVER_NONCE,
    )


def test_scram_sha_256_rfc7677_exchange() -> None:
    server = _server(_rfc_credential())
    assert server.evaluate(CLIENT_FIRST) == SERVER_FIRST
    assert server.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.username == "user"


@pytest.mark.parametrize(
    "final",
    [
        CLIENT_FINAL.replace(b"p=dHzb", b"p=dHzc"),  # a wrong proof (wrong password)
        CLIENT_FINAL.replace(b"r=rOpr", b"r=XOpr"),  # another nonce
        CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),  # channel binding claimed
        b"garbage",
    ],
)
def test_scram_refusals_say_nothing_more(final: bytes) -> None:
    server = _server(_rfc_credential())
    server.evaluate(CLIENT_FIRST)
    with pytest.raises(SaslFailed) as failed:
        server.evaluate(final)
    assert str(failed.value) == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )
    assert not server.complete


def test_scram_unknown_user_and_too_few_iterations() -> None:
    with pytest.raises(SaslFailed):
        _server(None).evaluate(CLIENT_FIRST)
    weak = MECHANISMS["SCRAM-SHA-256"].credential_for("pencil", iterations=1000)
    with pytest.raises(SaslFailed):
        _server(weak).evaluate(CLIENT_FIRST)


def test_scram_escaped_user_name() -> None:
    credential = _rfc_credential()
    server = ScramServer("SCRAM-SHA-256", lambda u, m: credential if u == "a,b=c" else None)
    assert server.evaluate(b"n,,n=a=2Cb=3Dc,r=abc").startswith(b"r=abc")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0nobody\0x", "Authentication failed: Invalid username or password"),
        (b"\0\0x", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
        (
            b"bob\0alice\0alice-secret",
            "Authentication failed: Client requested an authorization id that is different "
            "from username",
        ),
    ],
)
def test_plain_refusals(token: bytes, message: str) -> None:
    with pytest.raises(SaslFailed, match=re.escape(message)):
        PlainServer({"alice": "alice-secret"}).evaluate(token)


def test_plain_accepts_with_and_without_authzid() -> None:
    for token in (
        b"\0alice\0alice-secret",
        b"alice\0alice\0alice-secret",
    ):
        server = PlainServer({"alice": "alice-secret"})
        server.evaluate(token)
        assert server.username == "alice"


def test_jaas() -> None:
    text = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="admin-secret"\n'
        '  user_admin="admin-secret" user_alice="a \\"quoted\\" secret";'
    )
    module, options = parse_jaas(text)
    assert module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert options["username"] == "admin"
    assert plain_users(text) == {"admin": "admin-secret", "alice": 'a "quoted" secret'}
    with pytest.raises(ConfigError):
        parse_jaas("PlainLoginModule required user_a=")
    with pytest.raises(ConfigError, match=r"not org\.apache\.kafka"):
        plain_users("org.apache.kafka.common.security.scram.ScramLoginModule required;")


def test_pem_on_one_line_is_rewrapped() -> None:
    body = "QUJD" * 40
    pem = f"-----BEGIN CERTIFICATE-----\n{body[:64]}\n{body[64:]}\n-----END CERTIFICATE-----\n"
    assert normalize_pem(" ".join(pem.splitlines())) == normalize_pem(pem)
    assert normalize_pem(pem).splitlines()[1] == body[:64]
