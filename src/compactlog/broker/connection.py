"""One client connection: frames in, requests handled one at a time in order, responses out.

Theory of operation
-------------------

A :class:`Connection` is the socket's :class:`asyncio.Protocol`, so that a connection costs
no task until it sends a request that needs one (a flood of bad connections is mostly accepts
and closes, and their cost is what the good clients wait behind):

* **arrival** (:meth:`Connection.data_received`, called by the event loop): the bytes are cut
  into frames (:class:`FrameReader`, which checks every size prefix against
  ``socket.request.max.bytes`` before waiting for the body) and each frame is decoded at once
  and queued. When the queue holds ``compactlog.max.in.flight.requests.per.connection``
  requests, reading pauses, so a client that pipelines more is slowed down by TCP, never
  refused.
* the **processor**, a task that lives while the queue is not empty, takes one request at a
  time, awaits its handler and writes the response before it takes the next. Responses
  therefore leave in request order, with their correlation ids, even when a handler waits (a
  Fetch long poll, a delayed JoinGroup): the wait holds up this connection only; the event
  loop serves the others meanwhile.

Ends of a connection, and what the peer sees:

* the peer closes its side: the requests already read are still answered, then we close; the
  peer gone altogether (a reset): the request in progress is abandoned;
* a frame size over the limit, or negative: the requests before it are answered, the body is
  never read, the connection is closed and the reason logged (the stream cannot be
  resynchronised);
* a request that cannot be decoded, or an API or version we do not implement: nothing more is
  read, the requests before it are answered, and the connection is closed
  ``compactlog.failed.request.close.delay.ms`` later
  (default 100 ms, jittered by +-50 %), logged. Kafka closes at once, but delays the close
  after a failed authentication the same way: the delay keeps a client that floods bad
  requests from costing the others their latency (see :mod:`compactlog.broker.limits`). The
  exception is ApiVersions above v2, which gets the v0 error body and keeps the connection
  (spec 1.1). Produce v0-v2 are advertised but refused this way, as Kafka 4.0 does;
* a handler that raises :class:`CloseConnection` (acks=0 produce that failed): closed, logged;
* a handler bug: logged with its traceback, closed; the broker and the other connections go on;
* :meth:`Connection.stop_reading` (broker shutdown): no more requests are read; the ones read are
  answered, except group requests, which close the connection (the coordinator is gone);
  :meth:`Connection.abort` ends one that is still busy when the shutdown's grace is over;
* :meth:`Connection.close_if_idle`, called by the broker's periodic check: closed after
  ``connections.max.idle.ms`` without a byte in or out while no request is queued or in
  progress.

Reasons for closing are logged through the broker's rate-limited log (a flood of bad connections
costs neither latency nor log space), except handler bugs, logged with their traceback.
"""

from __future__ import annotations

import asyncio
import logging
import random
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple, cast

from compactlog.broker.context import CURRENT_LISTENER, BrokerContext, CloseConnection, Peer
from compactlog.broker.handlers.dispatch import api_versions_error_frame, handler_for
from compactlog.broker.handlers.metadata import GROUP_API_KEYS
from compactlog.broker.refusals import refusal_level, refusal_line, response_errors
from compactlog.broker.security.authenticator import Action, Authenticator
from compactlog.broker.security.tls import ANONYMOUS, certificate_principal
from compactlog.errors import ProtocolError
from compactlog.protocol import (
    API_NAMES,
    ApiKey,
    FrameReader,
    MalformedRequestError,
    Request,
    RequestHeader,
    Struct,
    UnsupportedRequestError,
    decode_request,
    encode_response,
)

__all__ = ["Connection"]

logger = logging.getLogger("compactlog.broker")


class _TooNewApiVersions(NamedTuple):
    """An ApiVersions request above the versions we speak: answered with the v0 error body."""

    header: RequestHeader


class _RawToken(NamedTuple):
    """A SASL token sent raw, after a SaslHandshake v0 (no request header)."""

    token: bytes


class Connection(asyncio.Protocol):
    """Serves one accepted socket until it closes; see the module docstring.

    ``admit(connection)`` is asked when the socket is accepted (False: closed at once, never
    counted); ``on_close(connection)`` is called once when the socket has closed. :attr:`closed`
    is done then too.
    """

    def __init__(
        self,
        ctx: BrokerContext,
        admit: Callable[[Connection], bool] = lambda conn: True,
        on_close: Callable[[Connection], None] = lambda conn: None,
        listener: str | None = None,
        authenticator: Authenticator | None = None,
    ) -> None:
        self.ctx = ctx
        #: The name of the listener this connection came in on, and its SASL state (None: the
        #: listener does not use SASL).
        self.listener = listener
        self._auth = authenticator
        #: Who the client is: ``User:ANONYMOUS``, the subject of its TLS certificate, or the
        #: SASL user once authenticated.
        self.principal = ANONYMOUS
        self._failed_auth_delay_s = ctx.settings.security.failed_authentication_delay_ms / 1000
        self._admit = admit
        self._on_close = on_close
        limits = ctx.settings.limits
        self._frames = FrameReader(limits.socket_request_max_bytes)
        self._queue: deque[Request | _TooNewApiVersions | _RawToken] = deque()
        self._max_queued = limits.max_in_flight_requests
        self._idle_s = limits.connections_max_idle_ms / 1000
        self._failed_close_delay_s = limits.failed_request_close_delay_ms / 1000
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.host, self.port = "?", -1
        self._transport: asyncio.Transport | None = None
        self._processor: asyncio.Task[None] | None = None
        self._last_active = time.monotonic()
        self._busy = False
        self._input_ended = False  # no more requests will be read
        self._reading_paused = False
        self._close_delay_s: float | None = None  # close once the queue is answered, this late
        self._closing = False
        self._counted = False
        #: Whether a whole request (even an undecodable one) has arrived: a connection that
        #: has sent none may be closed to make room for a new one (see Broker._admit).
        self.served = False
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        return f"Connection({self.host}:{self.port})"

    # --- the event loop's calls (asyncio.Protocol) ----------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A TCP transport (uvloop's does not subclass asyncio.Transport, hence no isinstance).
        self._transport = transport = cast(asyncio.Transport, transport)
        address = transport.get_extra_info("peername")
        if isinstance(address, tuple) and len(address) >= 2:
            self.host, self.port = str(address[0]), int(address[1])
        else:
            self.host = str(address)
        if not self._admit(self):
            self._closing = True
            transport.close()
            return
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            try:
                self.principal = certificate_principal(ssl_object.getpeercert(binary_form=True))
            except Exception as exc:  # a certificate the TLS layer accepted but we cannot parse
                self._log_close(logging.WARNING, f"its client certificate cannot be read: {exc}")
                self._closing = True
                transport.close()
                return
        self._counted = True
        metrics = self.ctx.metrics
        metrics.connections += 1
        metrics.connections_created += 1

    def data_received(self, data: bytes) -> None:
        if self._input_ended:
            return  # bytes that were on their way when reading stopped
        self._last_active = time.monotonic()
        self.ctx.metrics.incoming_bytes += len(data)
        try:
            frames = self._frames.feed(data)
        except ProtocolError as exc:
            self._bad_frame(str(exc))
            return
        for frame in frames:
            if not self._arrived(frame):
                return
        if self._frames.failed:
            try:
                self._frames.feed(b"")
            except ProtocolError as exc:
                self._bad_frame(str(exc))
            return
        if len(self._queue) >= self._max_queued:
            self._pause_reading()

    def eof_received(self) -> bool:
        # The peer closed its side: answer what was read, then close (True: not yet). TLS has
        # no half-close: there the transport closes whatever we answer.
        self._end_input(0.0)
        return self._transport is None or self._transport.get_extra_info("ssl_object") is None

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            logger.debug("connection from %s:%d failed: %s", self.host, self.port, exc)
        self._closing = self._input_ended = True
        self._queue.clear()
        if self._processor is not None:
            self._processor.cancel()  # nobody to answer
        if self._drained is not None and not self._drained.done():
            self._drained.set_exception(ConnectionResetError("the connection was lost"))
        if self._counted:
            metrics = self.ctx.metrics
            metrics.connections -= 1
            metrics.connections_closed += 1
        if not self.closed.done():
            self.closed.set_result(None)
        self._on_close(self)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # --- the broker's calls ---------------------------------------------------------------------
    def stop_reading(self) -> None:
        """Read no further request; the ones already read are answered (broker shutdown)."""
        self._end_input(0.0)

    def abort(self) -> None:
        """Close now: what is queued or in progress is not answered."""
        self._queue.clear()
        self._input_ended = True
        if self._processor is not None and self._processor is not asyncio.current_task():
            self._processor.cancel()
        self._close_transport()

    def unserved_silence(self, now: float) -> float | None:
        """Seconds since the last byte of a connection that has not sent one whole request
        (None once it has, or while it is closing)."""
        if self.served or self._closing or self._input_ended:
            return None
        return now - self._last_active

    def close_if_idle(self, now: float) -> bool:
        """Close the connection if nothing went in or out for ``connections.max.idle.ms`` and no
        request is queued or in progress (the broker's idle check calls this periodically)."""
        if self._busy or self._queue or self._input_ended:
            return False
        if now - self._last_active < self._idle_s:
            return False
        self.ctx.close_log.log(
            logging.INFO,
            "closing idle connection from %s:%d after %d ms without traffic",
            self.host, self.port, int(self._idle_s * 1000),
        )  # fmt: skip
        self.ctx.metrics.connections_idle_closed += 1
        self.abort()
        return True

    # --- arrival --------------------------------------------------------------------------------
    def _arrived(self, frame: bytes) -> bool:
        """Decode and queue one request; False when the connection must read no more."""
        self.served = True
        if self._auth is not None and self._auth.expects_raw_token:
            self._queue.append(_RawToken(bytes(frame)))
            self._start_processor()
            return True
        try:
            request: Request | _TooNewApiVersions | _RawToken = decode_request(frame)
        except UnsupportedRequestError as exc:
            if exc.header.api_key != ApiKey.API_VERSIONS:
                self._bad_request(f"{exc} (client id {exc.header.client_id!r})")
                return False
            request = _TooNewApiVersions(exc.header)
        except MalformedRequestError as exc:
            self._bad_request(f"malformed request: {exc}")
            return False
        self._queue.append(request)
        self._start_processor()
        return True

    def _start_processor(self) -> None:
        if self._processor is None:
            self._processor = asyncio.get_running_loop().create_task(
                self._process(), name=f"{self!r} processor"
            )

    def _bad_request(self, reason: str) -> None:
        """An undecodable or unsupported request: answer what came before it, then close after
        the failed-request delay, jittered so that a flood's connections, refused together, do
        not all come back (and cost an accept each) in the same instant."""
        self.ctx.metrics.invalid_requests += 1
        self._log_close(logging.WARNING, reason)
        self._end_input(self._failed_close_delay_s * random.uniform(0.5, 1.5))

    def _bad_frame(self, reason: str) -> None:
        # The requests before the bad size are still answered; the body is never read.
        self.ctx.metrics.invalid_requests += 1
        self._log_close(logging.WARNING, reason)
        self._end_input(0.0)

    def _log_close(self, level: int, reason: str) -> None:
        self.ctx.close_log.log(
            level, "closing connection from %s:%d: %s", self.host, self.port, reason
        )

    # --- the ends -------------------------------------------------------------------------------
    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    def _end_input(self, close_delay_s: float) -> None:
        """Read nothing more; close ``close_delay_s`` after the queued requests are answered."""
        if self._input_ended:
            return
        self._input_ended = True
        self._close_delay_s = close_delay_s
        self._pause_reading()
        if self._processor is None:
            self._close_when_answered()

    def _close_when_answered(self) -> None:
        delay = self._close_delay_s
        if delay is None or self._closing:
            return
        if delay > 0:
            self._closing = True  # nothing more to do here; the timer closes the socket
            asyncio.get_running_loop().call_later(delay, self._close_transport)
        else:
            self._close_transport()

    def _close_transport(self) -> None:
        self._closing = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    # --- processing -----------------------------------------------------------------------------
    async def _process(self) -> None:
        CURRENT_LISTENER.set(self.listener)  # this task's own context
        try:
            while self._queue:
                request = self._queue.popleft()
                if self._reading_paused and not self._input_ended:
                    self._reading_paused = False
                    assert self._transport is not None
                    self._transport.resume_reading()
                self._busy = True
                try:
                    keep_open = await self._handle(request)
                finally:
                    self._busy = False
                    self._last_active = time.monotonic()
                if not keep_open:
                    self._queue.clear()
                    break
        except Exception:
            logger.exception("connection from %s:%d failed", self.host, self.port)
            self._queue.clear()
            self._close_delay_s = 0.0
            self._input_ended = True
        finally:
            self._processor = None
        if self._input_ended:
            self._close_when_answered()

    def _fail(self, reason: str, level: int, delay_s: float = 0.0) -> bool:
        """Close once this request is done (``delay_s`` later); nothing queued after it is
        answered."""
        self._log_close(level, reason)
        self._input_ended = True
        self._close_delay_s = delay_s
        self._pause_reading()
        return False

    async def _authenticate(self, request: Request | _RawToken) -> bool | None:
        """Let the SASL state see the request: None when its handler may serve it, else
        whether the connection stays open (the authenticator answered or refused it)."""
        auth = self._auth
        assert auth is not None
        reauthentications = auth.reauthentications
        if isinstance(request, _RawToken):
            outcome = auth.on_raw_token(request.token)
        else:
            outcome = auth.on_request(request)
            if outcome.action is Action.SERVE:
                return None
        if auth.authenticated and auth.principal is not None:
            if self.principal != auth.principal:
                logger.debug("%s authenticated as %s", self, auth.principal)
            elif auth.reauthentications != reauthentications:
                logger.debug("%s re-authenticated as %s", self, auth.principal)
            self.principal = auth.principal
        body = outcome.body
        ok = True
        if isinstance(body, bytes):
            ok = await self._write(struct.pack(">i", len(body)) + body)
        elif body is not None and not isinstance(request, _RawToken):
            ok = await self._write(encode_response(request.header, body))
        if outcome.action is Action.CLOSE:
            return self._fail(outcome.reason, logging.INFO)
        if outcome.action is Action.FAIL:
            self.ctx.metrics.invalid_requests += 1
            delay = self._failed_auth_delay_s
            return self._fail(f"authentication failed: {outcome.reason}", logging.INFO, delay)
        return ok

    async def _handle(self, request: Request | _TooNewApiVersions | _RawToken) -> bool:
        """Answer one request; False when the connection must close."""
        ctx = self.ctx
        started = time.monotonic()
        if self._auth is not None and not isinstance(request, _TooNewApiVersions):
            answered = await self._authenticate(request)
            if answered is not None:
                return answered
        assert not isinstance(request, _RawToken)
        header = request.header
        if isinstance(request, _TooNewApiVersions):
            ok = await self._write(api_versions_error_frame(ctx, header))
            ctx.metrics.record_request("ApiVersions", (time.monotonic() - started) * 1000)
            return ok
        name = API_NAMES.get(header.api_key, str(header.api_key))
        if ctx.stopping and header.api_key in GROUP_API_KEYS:
            # The coordinator has shut down (its parked requests got NOT_COORDINATOR); a group
            # request read before the stop is not answered: the client reconnects and looks for
            # the coordinator again, as after any broker stop.
            return self._fail(f"{name} arrived while the broker stops", logging.INFO)
        handler = handler_for(ctx, header.api_key)
        if handler is None:
            ctx.metrics.invalid_requests += 1
            reason = f"{name} is not served by this broker (no group coordinator)"
            return self._fail(reason, logging.WARNING)
        peer = Peer(header.client_id or "", self.host, self.port, self.principal)
        try:
            body = await handler(ctx, request, peer)
            response = None if body is None else encode_response(header, body)
        except CloseConnection as exc:
            return self._fail(str(exc), logging.INFO)
        except Exception:
            logger.exception(
                "%s v%d (correlation id %d) from %s:%d failed; closing the connection",
                name, header.api_version, header.correlation_id, self.host, self.port,
            )  # fmt: skip
            return self._fail(f"{name} failed (a bug; see the traceback above)", logging.DEBUG)
        if body is not None and header.api_key != ApiKey.PRODUCE:  # produce logs its own
            self._log_refusals(name, header, body)
        ok = True
        if response is not None:
            ok = await self._write(response)
        ctx.metrics.record_request(name, (time.monotonic() - started) * 1000)
        return ok

    def _log_refusals(self, name: str, header: RequestHeader, body: Struct) -> None:
        for where, code, message in response_errors(body):
            line = refusal_line(
                name, header.correlation_id, header.client_id or "", self.host, self.port,
                where, code, message,
            )  # fmt: skip
            self.ctx.refusal_log.log(refusal_level(code), "%s", line)

    async def _write(self, frame: bytes | bytearray) -> bool:
        transport = self._transport
        if transport is None or transport.is_closing():
            return False
        transport.write(frame)
        self.ctx.metrics.outgoing_bytes += len(frame)
        self._last_active = time.monotonic()
        if self._write_paused:
            self._drained = asyncio.get_running_loop().create_future()
            try:
                await self._drained
            except ConnectionError as exc:
                logger.debug("writing to %s:%d failed: %s", self.host, self.port, exc)
                return False
            finally:
                self._drained = None
        return True
