"""One client connection: frames in, requests handled one at a time in order, responses out.

Theory of operation
-------------------

Two tasks share a bounded queue:

* the **reader** (the connection's own task, :meth:`Connection.run`) reads the socket, cuts the
  bytes into frames (:class:`FrameReader`, which checks every size prefix against
  ``socket.request.max.bytes`` before waiting for the body) and puts the frames in the queue.
  When the queue holds ``compactlog.max.in.flight.requests.per.connection`` frames it stops
  reading, so a client that pipelines more is slowed down by TCP, never refused.
* the **processor** takes one frame at a time, decodes it, awaits its handler and writes the
  response before it takes the next. Responses therefore leave in request order, with their
  correlation ids, even when a handler waits (a Fetch long poll, a delayed JoinGroup): the wait
  holds up this connection only; the event loop serves the others meanwhile.

Ends of a connection, and what the peer sees:

* the peer closes its side: the frames already read are still answered, then we close;
* a frame size over the limit, or negative: the frames before it are answered, the body is
  never read, the connection is closed and the reason logged (the stream cannot be
  resynchronised);
* a request that cannot be decoded, or an API or version we do not implement: nothing more is
  read, and the connection is closed ``compactlog.failed.request.close.delay.ms`` later
  (default 100 ms, jittered by +-50 %), logged. Kafka closes at once, but delays the close
  after a failed authentication the same way: the delay keeps a client that floods bad
  requests from costing the others their latency (see :mod:`compactlog.broker.limits`). The
  exception is ApiVersions above v2, which gets the v0 error body and keeps the connection
  (spec 1.1). Produce v0-v2 are advertised but refused this way, as Kafka 4.0 does;
* a handler that raises :class:`CloseConnection` (acks=0 produce that failed): closed, logged;
* a handler bug: logged with its traceback, closed; the broker and the other connections go on;
* :meth:`Connection.stop_reading` (broker shutdown): no more requests are read; the ones read are
  answered, except group requests, which close the connection (the coordinator is gone);
* :meth:`Connection.close_if_idle`, called by the broker's periodic check: closed after
  ``connections.max.idle.ms`` without a byte in or out while no request is queued or in
  progress.

Reasons for closing are logged through the broker's rate-limited log (a flood of bad connections
costs neither latency nor log space), except handler bugs, logged with their traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable

from compactlog.broker.context import BrokerContext, CloseConnection, Peer
from compactlog.broker.handlers.dispatch import api_versions_error_frame, handler_for
from compactlog.broker.handlers.metadata import GROUP_API_KEYS
from compactlog.broker.limits import READ_CHUNK_BYTES
from compactlog.errors import ProtocolError
from compactlog.protocol import (
    API_NAMES,
    ApiKey,
    FrameReader,
    MalformedRequestError,
    UnsupportedRequestError,
    decode_request,
    encode_response,
)

__all__ = ["Connection"]

logger = logging.getLogger("compactlog.broker")


class Connection:
    """Serves one accepted socket until it closes; see the module docstring."""

    def __init__(
        self,
        ctx: BrokerContext,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_close: Callable[[Connection], None] = lambda conn: None,
    ) -> None:
        self.ctx = ctx
        self._reader = reader
        self._writer = writer
        self._on_close = on_close
        limits = ctx.settings.limits
        self._frames = FrameReader(limits.socket_request_max_bytes)
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(limits.max_in_flight_requests)
        self._idle_s = limits.connections_max_idle_ms / 1000
        self._failed_close_delay_s = limits.failed_request_close_delay_ms / 1000
        address = writer.get_extra_info("peername")
        if isinstance(address, tuple) and len(address) >= 2:
            self.host, self.port = str(address[0]), int(address[1])
        else:
            self.host, self.port = str(address), -1
        self._last_active = time.monotonic()
        self._busy = False
        self._abort = False
        self._input_stopped = False
        self._delay_close = False

    def __repr__(self) -> str:
        return f"Connection({self.host}:{self.port})"

    # --- the life of the connection -------------------------------------------------------------
    async def run(self) -> None:
        """Serve until the connection ends (see the module docstring). Reads on this task; the
        requests are handled by a second one, in order."""
        metrics = self.ctx.metrics
        metrics.connections += 1
        metrics.connections_created += 1
        processor = asyncio.create_task(self._process(), name=f"{self!r} processor")
        try:
            await self._read()
            if self._abort:
                processor.cancel()
            else:
                await self._queue.put(None)  # answer what was read, then stop
            await asyncio.wait({processor})
            if self._delay_close:
                # Jittered, so that a flood's connections, refused together, do not all come
                # back (and cost an accept each) in the same instant.
                await asyncio.sleep(self._failed_close_delay_s * random.uniform(0.5, 1.5))
        finally:
            processor.cancel()
            await self._close()
            metrics.connections -= 1
            metrics.connections_closed += 1
            self._on_close(self)

    def stop_reading(self) -> None:
        """Read no further request; the ones already read are answered (broker shutdown)."""
        self._stop_input()

    def close_if_idle(self, now: float) -> bool:
        """Close the connection if nothing went in or out for ``connections.max.idle.ms`` and no
        request is queued or in progress (the broker's idle check calls this periodically)."""
        if self._busy or not self._queue.empty() or self._input_stopped:
            return False
        if now - self._last_active < self._idle_s:
            return False
        self.ctx.close_log.log(
            logging.INFO,
            "closing idle connection from %s:%d after %d ms without traffic",
            self.host, self.port, int(self._idle_s * 1000),
        )  # fmt: skip
        self.ctx.metrics.connections_idle_closed += 1
        self._abort = True
        self._stop_input()
        return True

    def _stop_input(self) -> None:
        """End the reading loop: no more bytes are read, the pending read returns at once."""
        if self._input_stopped:
            return
        self._input_stopped = True
        transport = self._writer.transport
        if isinstance(transport, asyncio.ReadTransport):
            transport.pause_reading()  # no more bytes: feed_eof must be the stream's last event
        self._reader.feed_eof()
        if self._abort:
            # A read loop waiting for room in the queue must not wait for a processor that has
            # stopped: what is queued will not be answered anyway.
            while not self._queue.empty():
                self._queue.get_nowait()

    async def _close(self) -> None:
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()

    def _fail(
        self, reason: str, *, level: int = logging.WARNING, bad_request: bool = False
    ) -> None:
        """Close: stop reading, drop what is queued; after a bad request, close only after the
        failed-request delay."""
        self.ctx.close_log.log(
            level, "closing connection from %s:%d: %s", self.host, self.port, reason
        )
        self._abort = True
        self._delay_close = bad_request
        self._stop_input()

    # --- reading --------------------------------------------------------------------------------
    async def _read(self) -> None:
        metrics = self.ctx.metrics
        while not self._input_stopped:
            try:
                data = await self._reader.read(READ_CHUNK_BYTES)
            except (ConnectionError, OSError) as exc:
                logger.debug("connection from %s:%d failed: %s", self.host, self.port, exc)
                self._abort = True
                return
            if not data or self._input_stopped:
                return  # the peer closed its side, or we stopped reading
            self._last_active = time.monotonic()
            metrics.incoming_bytes += len(data)
            try:
                frames = self._frames.feed(data)
            except ProtocolError as exc:
                self._bad_frame(str(exc))
                return
            for frame in frames:
                await self._queue.put(frame)
                if self._input_stopped:
                    return
            if self._frames.failed:
                try:
                    self._frames.feed(b"")
                except ProtocolError as exc:
                    self._bad_frame(str(exc))
                return

    def _bad_frame(self, reason: str) -> None:
        # The frames before the bad size are still answered; the body is never read.
        self.ctx.close_log.log(
            logging.WARNING, "closing connection from %s:%d: %s", self.host, self.port, reason
        )
        self.ctx.metrics.invalid_requests += 1

    # --- processing -----------------------------------------------------------------------------
    async def _process(self) -> None:
        try:
            while True:
                frame = await self._queue.get()
                if frame is None:
                    return
                self._busy = True
                try:
                    keep_open = await self._handle(frame)
                finally:
                    self._busy = False
                    self._last_active = time.monotonic()
                if not keep_open:
                    return  # _fail stopped the input
        except Exception:
            logger.exception("connection from %s:%d failed", self.host, self.port)
            self._abort = True
            self._stop_input()

    async def _handle(self, frame: bytes) -> bool:
        """Answer one request; False when the connection must close."""
        ctx = self.ctx
        started = time.monotonic()
        try:
            request = decode_request(frame)
        except UnsupportedRequestError as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS:
                ok = await self._write(api_versions_error_frame(ctx, exc.header))
                ctx.metrics.record_request("ApiVersions", (time.monotonic() - started) * 1000)
                return ok
            ctx.metrics.invalid_requests += 1
            self._fail(f"{exc} (client id {exc.header.client_id!r})", bad_request=True)
            return False
        except MalformedRequestError as exc:
            ctx.metrics.invalid_requests += 1
            self._fail(f"malformed request: {exc}", bad_request=True)
            return False
        header = request.header
        name = API_NAMES.get(header.api_key, str(header.api_key))
        if ctx.stopping and header.api_key in GROUP_API_KEYS:
            # The coordinator has shut down (its parked requests got NOT_COORDINATOR); a group
            # request read before the stop is not answered: the client reconnects and looks for
            # the coordinator again, as after any broker stop.
            self._fail(f"{name} arrived while the broker stops", level=logging.INFO)
            return False
        handler = handler_for(ctx, header.api_key)
        if handler is None:
            ctx.metrics.invalid_requests += 1
            self._fail(f"{name} is not served by this broker (no group coordinator)")
            return False
        peer = Peer(header.client_id or "", self.host, self.port)
        try:
            body = await handler(ctx, request, peer)
            response = None if body is None else encode_response(header, body)
        except CloseConnection as exc:
            self._fail(str(exc), level=logging.INFO)
            return False
        except Exception:
            logger.exception(
                "%s v%d (correlation id %d) from %s:%d failed; closing the connection",
                name, header.api_version, header.correlation_id, self.host, self.port,
            )  # fmt: skip
            self._fail(f"{name} failed (a bug; see the traceback above)", level=logging.DEBUG)
            return False
        ok = True
        if response is not None:
            ok = await self._write(response)
        ctx.metrics.record_request(name, (time.monotonic() - started) * 1000)
        return ok

    async def _write(self, frame: bytes | bytearray) -> bool:
        try:
            self._writer.write(frame)
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            logger.debug("writing to %s:%d failed: %s", self.host, self.port, exc)
            self._abort = True
            self._stop_input()
            return False
        self.ctx.metrics.outgoing_bytes += len(frame)
        self._last_active = time.monotonic()
        return True
