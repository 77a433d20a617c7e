"""Every resource limit of the broker, in one place, with its default and the reason for it.

A limit is a broker setting by Kafka's name where Kafka has one (``socket.request.max.bytes``,
``message.max.bytes``, ``max.connections``, ``connections.max.idle.ms``, ``fetch.max.bytes``), or
``compactlog.``-prefixed where Kafka has none. :mod:`compactlog.broker.settings` reads them; the
connection code (:mod:`compactlog.broker.connection`) and the handlers enforce them.

================================================  ==============  =================================
setting                                           default         enforced by
================================================  ==============  =================================
``socket.request.max.bytes``                      104857600       the frame reader: a larger (or
                                                  (100 MiB)       negative) size prefix closes the
                                                                  connection before the body is read
``message.max.bytes`` (topic: max.message.bytes)  1048588         the store: a larger batch gets
                                                  (1 MiB + 12)    MESSAGE_TOO_LARGE (10)
decompressed size of one batch                    2 x max.        the store's decompression guard:
                                                  message.bytes   a larger expansion is
                                                  + 8 MiB         CORRUPT_MESSAGE, nothing appended
``max.connections``                               1000            accept: one more is closed at
                                                                  once, unless an unserved one
                                                                  makes room (see below)
``max.connections.per.ip``                        2147483647      accept: one more from the same
(``max.connections.per.ip.overrides``:            (Kafka's)       address is closed at once
``host:count,ip:count``)
``connections.max.idle.ms``                       600000 (10 min) each connection: no byte in or out
                                                                  for that long (and no request in
                                                                  progress) closes it
``compactlog.max.in.flight.requests.per.         5               each connection: requests read
connection``                                                      and not yet answered; beyond it
                                                                  the socket is not read (TCP
                                                                  back-pressure), nothing is refused
``compactlog.failed.request.close.delay.ms``      100             each connection: one that sent
                                                                  an undecodable or unsupported
                                                                  request is closed this much later
``fetch.max.bytes``                               57671680        Fetch: caps the request's
                                                  (55 MiB)        max_bytes (KIP-74's first batch
                                                                  is still returned whole)
================================================  ==============  =================================

Why these values:

* ``socket.request.max.bytes``: Kafka's default. A Produce request larger than this could not
  have been accepted by a Kafka broker either, and the bound is what keeps one connection from
  making the broker buffer an arbitrary amount of memory on the strength of a 4-byte prefix.
* ``message.max.bytes``: Kafka's default and the clients' default batch ceiling; it lives in the
  store (:data:`compactlog.storage.config.DEFAULT_MAX_MESSAGE_BYTES`) because it is also the
  default of the topic config ``max.message.bytes``.
* Decompressed size: a 1 KiB gzip or zstd payload can claim a gigabyte. The store decodes every
  client batch (CRC, keys, offset deltas) with the guard of
  :func:`compactlog.storage.validator.max_decompressed_bytes`, which stops inflating one byte past
  the cap, so a refused bomb costs the broker at most ``2 x message.max.bytes + 16 MiB`` (the
  cap, the request, and the decoder's working memory; measured by the R17 test). Twice the batch
  limit leaves room for honest, highly compressible batches.
* ``max.connections``: Kafka's default is unlimited (2147483647). Every connection costs a file
  descriptor and up to ``in-flight x socket.request.max.bytes`` of buffers, and the store needs
  descriptors of its own for segment and index files; a bound well under the usual hard limit of
  open files keeps a connection flood from starving the store. ``compactlog serve`` raises the
  soft limit of open files to the hard limit at start, as the JVM does for Kafka.
* ``max.connections.per.ip``: Kafka's setting, default and semantics: the connection that would
  be one more than the limit from its address is closed as soon as it is accepted (Kafka's
  ``ConnectionQuotas`` throws ``TooManyConnectionsException`` and closes it). Overrides name an
  address or a host name (resolved at start, as Kafka resolves them); 0 is allowed only with
  overrides, as in Kafka.
* Unserved connections make room: a flood of connections that send nothing (or half a request)
  and then sit idle would otherwise hold every ``max.connections`` slot for
  ``connections.max.idle.ms`` (10 minutes) and lock every client out. So when the broker is
  full, the new connection is admitted and the oldest connection that has not sent one whole
  request and has been silent for :data:`UNSERVED_EVICT_AFTER_S` is closed instead. A real
  client sends its first request (ApiVersions) within milliseconds of connecting, and one that
  has been served is never closed this way. Kafka has no such rule because it does not refuse
  at ``max.connections``: its acceptor stops accepting until a slot frees, so the same flood
  holds Kafka's clients back in the listen backlog instead.
* ``connections.max.idle.ms``: Kafka's default. A client that vanished without a FIN (a pulled
  cable, a killed VM) would otherwise hold its connection slot for ever.
* In-flight requests: Kafka reads one request per connection at a time (it mutes the socket until
  the response is sent). We read a little ahead, up to the Java producer's
  ``max.in.flight.requests.per.connection`` (5, the most an idempotent producer pipelines), so a
  well-behaved client never waits on us while the memory a connection holds stays bounded by
  ``(5 + 1) x socket.request.max.bytes``. Responses are still written strictly in request order.
* Failed-request close delay: a request that cannot be decoded closes its connection, and a
  client that then reconnects and sends another costs the broker an accept, a connection and a
  decode each time; one event loop serving a closed-loop flood of them from 50 connections was
  measured to raise a well-behaved producer's ack p99 from 1.3-1.7 ms to 10-14 ms (spec R15).
  Kafka holds a connection whose authentication failed for 100 ms before closing it
  (``connection.failed.authentication.delay.ms``) for the same reason; compactlog does the same
  for undecodable and unsupported requests. The connection reads nothing meanwhile. A frame
  size over the limit still closes at once (it is cheap, and R17 wants it under 100 ms).
* ``fetch.max.bytes``: Kafka's default (55 MiB); it bounds the size of one response, whatever the
  consumer asks for.
"""

from __future__ import annotations

from dataclasses import dataclass

from compactlog.protocol import MAX_REQUEST_FRAME_SIZE
from compactlog.storage.config import DEFAULT_MAX_MESSAGE_BYTES
from compactlog.storage.validator import DECOMPRESSION_HEADROOM

__all__ = [
    "DECOMPRESSION_HEADROOM",
    "DEFAULT_CONNECTIONS_MAX_IDLE_MS",
    "DEFAULT_FAILED_REQUEST_CLOSE_DELAY_MS",
    "DEFAULT_FETCH_MAX_BYTES",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_CONNECTIONS_PER_IP",
    "DEFAULT_MAX_IN_FLIGHT_REQUESTS",
    "DEFAULT_MESSAGE_MAX_BYTES",
    "DEFAULT_SOCKET_REQUEST_MAX_BYTES",
    "METRICS_REQUEST_MAX_BYTES",
    "METRICS_REQUEST_TIMEOUT_S",
    "SHUTDOWN_GRACE_S",
    "UNSERVED_EVICT_AFTER_S",
    "Limits",
]

#: ``socket.request.max.bytes``: the largest request frame (Kafka's default, 100 MiB).
DEFAULT_SOCKET_REQUEST_MAX_BYTES = MAX_REQUEST_FRAME_SIZE
#: ``message.max.bytes``: the largest record batch (Kafka's default, 1 MiB + 12 bytes).
DEFAULT_MESSAGE_MAX_BYTES = DEFAULT_MAX_MESSAGE_BYTES
#: ``max.connections``: concurrent client connections (Kafka: unlimited; see the docstring).
DEFAULT_MAX_CONNECTIONS = 1000
#: ``max.connections.per.ip``: connections from one address (Kafka's default: Integer.MAX_VALUE).
DEFAULT_MAX_CONNECTIONS_PER_IP = 2**31 - 1
#: A connection silent this long without having sent one whole request may be closed to admit
#: a new one when ``max.connections`` are open (see the docstring).
UNSERVED_EVICT_AFTER_S = 1.0
#: ``connections.max.idle.ms``: an idle connection is closed after this long (Kafka's default).
DEFAULT_CONNECTIONS_MAX_IDLE_MS = 600_000
#: ``compactlog.max.in.flight.requests.per.connection``: requests read ahead of the answers.
DEFAULT_MAX_IN_FLIGHT_REQUESTS = 5
#: ``compactlog.failed.request.close.delay.ms``: a connection that sent an undecodable request
#: is held this long before it is closed (Kafka's ``connection.failed.authentication.delay.ms``).
DEFAULT_FAILED_REQUEST_CLOSE_DELAY_MS = 100
#: ``fetch.max.bytes``: the most a Fetch response carries beyond its first batch (Kafka's).
DEFAULT_FETCH_MAX_BYTES = 57_671_680

#: The metrics endpoint reads at most this much of an HTTP request (the request line and
#: headers of a scraper fit many times over); more, or a slower sender, closes the connection.
METRICS_REQUEST_MAX_BYTES = 8 * 1024
METRICS_REQUEST_TIMEOUT_S = 5.0
#: How long :meth:`Broker.stop` waits for the requests in progress before it cuts connections.
SHUTDOWN_GRACE_S = 10.0


@dataclass(frozen=True)
class Limits:
    """The limits in force, as the settings resolved them (see the module docstring)."""

    socket_request_max_bytes: int = DEFAULT_SOCKET_REQUEST_MAX_BYTES
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS
    max_in_flight_requests: int = DEFAULT_MAX_IN_FLIGHT_REQUESTS
    failed_request_close_delay_ms: int = DEFAULT_FAILED_REQUEST_CLOSE_DELAY_MS
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP
    #: ``max.connections.per.ip.overrides`` as written: (host or address, limit) pairs.
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = ()
