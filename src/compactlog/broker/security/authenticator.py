"""The SASL state of one connection, as Kafka's ``SaslServerAuthenticator`` and ``KafkaChannel``
keep it.

Theory of operation
-------------------

On a SASL_PLAINTEXT or SASL_SSL listener a connection starts unauthenticated. Until it has
authenticated, only these requests are served, in this order:

1. ApiVersions (optional, once: a second one closes the connection, as in Kafka);
2. SaslHandshake naming a mechanism: an enabled one is answered with the enabled list;
   another gets UNSUPPORTED_SASL_MECHANISM with the list, and the connection is closed after
   ``connection.failed.authentication.delay.ms``;
3. the mechanism's tokens: in SaslAuthenticate requests after a v1 handshake, or raw
   (a size prefix and the bytes, no request header) after a v0 handshake. A wrong password or
   an unknown user is SASL_AUTHENTICATION_FAILED with Kafka's message, and the connection is
   closed after the same delay.

Any other request before authentication closes the connection after that delay, unanswered
(Kafka: "Unexpected Kafka request of type ... during SASL handshake").

After authentication the principal is ``User:<name>``. With ``connections.max.reauth.ms`` > 0
the session lasts that long (SaslAuthenticate v1+ tells the client); a SaslHandshake from a
client that used SaslAuthenticate v1+ starts a re-authentication (same mechanism, same
principal, else it fails), and any other request that arrives after the session expired closes
the connection, unanswered, as Kafka's ``SocketServer`` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import Enum
from typing import NamedTuple

from compactlog import errors as codes
from compactlog.broker.security.sasl import IllegalSaslState, SaslFailed, SaslServer
from compactlog.protocol import ApiKey, Request, Struct
from compactlog.protocol.messages.security import SaslAuthenticateResponse, SaslHandshakeResponse

__all__ = ["Action", "Authenticator", "Outcome"]

#: Kafka's error code SASL_AUTHENTICATION_FAILED.
SASL_AUTHENTICATION_FAILED = 58
_AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


class Action(Enum):
    SERVE = "serve"  # hand the request to its handler
    REPLY = "reply"  # send ``body`` and go on
    FAIL = "fail"  # send ``body`` (if any), then close after the failed-authentication delay
    CLOSE = "close"  # close now, unanswered


class Outcome(NamedTuple):
    action: Action
    body: Struct | bytes | None = None
    reason: str = ""


class _State(Enum):
    HANDSHAKE = "handshake"  # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "authenticate"  # the mechanism's tokens expected
    COMPLETE = "complete"


class Authenticator:
    """One connection's SASL state; see the module docstring."""

    def __init__(
        self,
        mechanisms: tuple[str, ...],
        make_server: Callable[[str], SaslServer],
        reauth_ms: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._mechanisms = mechanisms
        self._make_server = make_server
        self._reauth_ms = reauth_ms
        self._monotonic = monotonic
        self._state = _State.HANDSHAKE
        self._server: SaslServer | None = None
        self._raw_tokens = False
        self._versions_seen = False
        self._supports_reauth = False
        self._reauthenticating = False
        self._mechanism: str | None = None
        self._expires_at: float | None = None
        #: ``User:<name>`` once authenticated.
        self.principal: str | None = None
        #: Successful re-authentications of this connection.
        self.reauthentications = 0

    @property
    def expects_raw_token(self) -> bool:
        """After a v0 handshake, the next frame is a raw SASL token, not a request."""
        return self._state is _State.AUTHENTICATE and self._raw_tokens

    @property
    def authenticated(self) -> bool:
        return self._state is _State.COMPLETE

    def on_request(self, request: Request) -> Outcome:
        header = request.header
        key = header.api_key
        if self._state is _State.COMPLETE:
            if key == ApiKey.SASL_HANDSHAKE and self._supports_reauth:
                self._reauthenticating = True
                self._state = _State.HANDSHAKE
                return self._handshake(request)
            if self._expires_at is not None and self._monotonic() > self._expires_at:
                return Outcome(
                    Action.CLOSE,
                    None,
                    "its SASL session expired (connections.max.reauth.ms) and it did not "
                    "re-authenticate",
                )
            if key == ApiKey.SASL_HANDSHAKE:
                return Outcome(
                    Action.REPLY,
                    SaslHandshakeResponse(
                        error_code=codes.ILLEGAL_SASL_STATE, mechanisms=list(self._mechanisms)
                    ),
                )
            if key == ApiKey.SASL_AUTHENTICATE:
                return Outcome(
                    Action.REPLY,
                    SaslAuthenticateResponse(
                        error_code=codes.ILLEGAL_SASL_STATE,
                        error_message=_AFTER_AUTHENTICATION,
                    ),
                )
            return Outcome(Action.SERVE)
        name = _api_name(key)
        if self._state is _State.HANDSHAKE:
            if key == ApiKey.API_VERSIONS and not self._reauthenticating:
                if self._versions_seen:  # Kafka takes one, then expects the handshake
                    return Outcome(
                        Action.CLOSE,
                        None,
                        "Unexpected ApiVersions request received during SASL authentication "
                        "state HANDSHAKE_REQUEST",
                    )
                self._versions_seen = True
                return Outcome(Action.SERVE)
            if key == ApiKey.SASL_HANDSHAKE:
                return self._handshake(request)
            return Outcome(
                Action.FAIL, None, f"Unexpected Kafka request of type {name} during SASL handshake."
            )
        if key != ApiKey.SASL_AUTHENTICATE or self._raw_tokens:
            return Outcome(
                Action.FAIL,
                None,
                f"Unexpected Kafka request of type {name} during SASL authentication.",
            )
        if header.api_version > 0:
            self._supports_reauth = True
        token, failure = self._evaluate(request.body.auth_bytes)
        if failure is not None:
            return Outcome(
                Action.FAIL,
                SaslAuthenticateResponse(
                    error_code=SASL_AUTHENTICATION_FAILED, error_message=failure
                ),
                failure,
            )
        lifetime = self._complete_if_done()
        return Outcome(
            Action.REPLY,
            SaslAuthenticateResponse(
                error_code=codes.NONE, auth_bytes=token, session_lifetime_ms=lifetime
            ),
        )

    def on_raw_token(self, token: bytes) -> Outcome:
        """A raw SASL token (after a v0 handshake): the answer is the raw server token."""
        answer, failure = self._evaluate(token)
        if failure is not None:
            return Outcome(Action.CLOSE, None, failure)  # v0 has no way to carry the error
        self._complete_if_done()
        return Outcome(Action.REPLY, answer)

    def _handshake(self, request: Request) -> Outcome:
        mechanism = request.body.mechanism
        enabled = list(self._mechanisms)
        if mechanism not in self._mechanisms:
            return Outcome(
                Action.FAIL,
                SaslHandshakeResponse(
                    error_code=codes.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
                ),
                f"Unsupported SASL mechanism {mechanism}",
            )
        if self._reauthenticating and mechanism != self._mechanism:
            return Outcome(
                Action.FAIL,
                SaslHandshakeResponse(
                    error_code=codes.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
                ),
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self._mechanism}'",
            )
        self._server = self._make_server(mechanism)
        self._mechanism = mechanism
        self._raw_tokens = request.header.api_version == 0
        self._state = _State.AUTHENTICATE
        return Outcome(
            Action.REPLY, SaslHandshakeResponse(error_code=codes.NONE, mechanisms=enabled)
        )

    def _evaluate(self, token: bytes) -> tuple[bytes, str | None]:
        server = self._server
        assert server is not None
        try:
            answer = server.evaluate(bytes(token))
        except SaslFailed as exc:
            return b"", str(exc)
        except IllegalSaslState as exc:
            return b"", str(exc)
        if server.complete:
            principal = f"User:{server.username}"
            if self._reauthenticating and principal != self.principal:
                old, new = (self.principal or "").split(":", 1), principal.split(":", 1)
                return b"", (
                    f"Cannot change principals during re-authentication from {old[0]}.{old[1]}: "
                    f"{new[0]}.{new[1]}"
                )
        return answer, None

    def _complete_if_done(self) -> int:
        server = self._server
        assert server is not None
        if not server.complete:
            return 0
        self.principal = f"User:{server.username}"
        self._state = _State.COMPLETE
        if self._reauthenticating:
            self.reauthentications += 1
        self._reauthenticating = False
        self._server = None
        if self._reauth_ms > 0:
            self._expires_at = self._monotonic() + self._reauth_ms / 1000
            return self._reauth_ms
        return 0


def _api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return str(key)
