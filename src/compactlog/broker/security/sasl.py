"""Sans-I/O SASL servers: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677).

Each server takes the client's tokens one at a time (:meth:`evaluate`) and returns the next
server token; when it is complete, :attr:`username` is who authenticated. A failure raises
:class:`SaslFailed` with the message Kafka sends to the client (Kafka's ``PlainSaslServer``
sends its reason; for SCRAM it sends the same sentence whatever went wrong, so that the
answer does not tell whether the user exists).

Users of PLAIN come from the JAAS configuration Kafka uses, e.g.
``org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";``
(:func:`parse_jaas`: each option ``user_NAME="PASSWORD"`` is a user).
"""

from __future__ import annotations

import base64
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Final

from compactlog.broker.security.scram import MECHANISMS, ScramCredential, ScramMechanism
from compactlog.errors import ConfigError

__all__ = ["PlainServer", "SaslFailed", "SaslServer", "ScramServer", "parse_jaas", "plain_users"]

_JAAS_RE: Final = re.compile(
    r"^\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?)\s*;\s*$", re.DOTALL
)
_OPTION_RE: Final = re.compile(r'\s*([^\s=]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s";]+)')


class SaslFailed(Exception):
    """Authentication failed; ``str()`` is the message for the client."""


class IllegalSaslState(Exception):
    """The client sent a token the mechanism did not expect at this point."""


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """The login module class and options of one JAAS entry; ConfigError when malformed."""
    match = _JAAS_RE.match(text)
    if match is None:
        raise ConfigError(
            f"sasl.jaas.config {text[:60]!r}... is not '<LoginModule> required key=\"value\" ...;'"
        )
    module, _, rest = match.groups()
    options: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        opt = _OPTION_RE.match(rest, pos)
        if opt is None:
            if rest[pos:].strip():
                raise ConfigError(
                    f"sasl.jaas.config: cannot parse the options at {rest[pos : pos + 30]!r}"
                )
            break
        key, value = opt.groups()
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[key] = value
        pos = opt.end()
    return module, options


_PLAIN_MODULE: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"


def plain_users(jaas: str | None) -> dict[str, str]:
    """``user_NAME="PASSWORD"`` options of a PlainLoginModule entry, by name."""
    if not jaas:
        return {}
    module, options = parse_jaas(jaas)
    if module != _PLAIN_MODULE:
        raise ConfigError(f"the JAAS configuration of PLAIN names {module}, not {_PLAIN_MODULE}")
    return {key[5:]: value for key, value in options.items() if key.startswith("user_")}


class SaslServer:
    mechanism: str = ""
    username: str | None = None
    complete: bool = False

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError


class PlainServer(SaslServer):
    """``[authzid] NUL authcid NUL passwd``, checked against the JAAS users."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise IllegalSaslState("PLAIN takes one token")
        parts = token.decode("utf-8", errors="replace").split("\0")
        if len(parts) != 3:
            raise SaslFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslFailed("Authentication failed: username not specified")
        if not password:
            raise SaslFailed("Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self.username, self.complete = username, True
        return b""


def _scram_name(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is a comma, ``=3D`` an equals sign."""
    if re.search(r"=(?!2C|3D)", name):
        raise ValueError(f"invalid saslname {name!r}")
    return name.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ValueError(f"malformed attribute {part!r}")
        out.setdefault(key, value)
    return out


def _random_nonce() -> str:
    return base64.b64encode(secrets.token_bytes(24)).decode()


class ScramServer(SaslServer):
    """The server side of SCRAM: client-first, server-first, client-final, server-final."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str, str], ScramCredential | None],
        server_nonce: Callable[[], str] | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._scram: ScramMechanism = MECHANISMS[mechanism]
        self._lookup = lookup
        #: The server's part of the nonce (tests give RFC 7677's; otherwise 32 random chars).
        self._server_nonce = server_nonce or _random_nonce
        self._state = "first"
        self._failure = (
            "Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {mechanism}"
        )
        self._client_first_bare = self._server_first = self._nonce = ""
        self._credential: ScramCredential | None = None
        self._user = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
            if self._state == "first":
                return self._first(message)
            if self._state == "final":
                return self._final(message)
        except (ValueError, UnicodeDecodeError):
            raise SaslFailed(self._failure) from None
        raise IllegalSaslState(f"Unexpected challenge in Sasl server state {self._state}")

    def _first(self, message: str) -> bytes:
        # gs2-header: "n,," or "y,," (no channel binding), optionally "n,a=authzid,"
        flag, _, rest = message.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag not in ("n", "y") or (authzid and not authzid.startswith("a=")):
            raise ValueError("bad gs2 header")
        attrs = _attributes(bare)
        user = _scram_name(attrs["n"])
        client_nonce = attrs["r"]
        if not client_nonce:
            raise ValueError("empty nonce")
        credential = self._lookup(user, self.mechanism)
        if credential is None:
            raise SaslFailed(self._failure)
        if authzid and _scram_name(authzid[2:]) != user:
            raise SaslFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        if credential.iterations < self._scram.min_iterations:
            raise SaslFailed(self._failure)
        self._user, self._credential = user, credential
        self._nonce = client_nonce + self._server_nonce()
        self._client_first_bare = bare
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._gs2 = f"{flag},{authzid},"
        self._state = "final"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        without_proof, _, proof_part = message.rpartition(",p=")
        attrs = _attributes(without_proof)
        # Kafka accepts a nonce that ends with ours: librdkafka before 1.9 repeats the
        # client's part of it (the nonce stays unguessable either way).
        if not attrs.get("r", "").endswith(self._nonce):
            raise ValueError("nonce mismatch")
        if base64.b64decode(attrs["c"]) != self._gs2.encode():
            raise ValueError("channel binding mismatch")
        proof = base64.b64decode(proof_part, validate=True)
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = self._scram.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ValueError("proof length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self._scram.hash(client_key), credential.stored_key):
            raise SaslFailed(self._failure)
        server_signature = self._scram.hmac(credential.server_key, auth_message)
        self.username, self.complete, self._state = self._user, True, "done"
        return b"v=" + base64.b64encode(server_signature)
