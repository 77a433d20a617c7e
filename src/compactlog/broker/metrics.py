"""The broker's and the cleaner's metrics, served over HTTP in Prometheus text format 0.0.4.

Names are Kafka's JMX metric names turned into Prometheus names the way a JMX exporter does:
``kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce`` becomes
``kafka_network_requestmetrics_requests_total{request="Produce"}`` (Kafka's meters are rates over
a counter; Prometheus wants the counter), a gauge such as
``kafka.log:type=LogCleanerManager,name=max-dirty-percent`` becomes
``kafka_log_logcleanermanager_max_dirty_percent``, per-partition gauges such as
``kafka.log:type=Log,name=LogEndOffset,topic=T,partition=P`` become
``kafka_log_log_logendoffset{topic="T",partition="P"}``. What Kafka has no name for is
``compactlog_broker_*``.

:class:`BrokerMetrics` is plain counters, updated on the event loop by the connections and the
handlers; :func:`render` reads them with the store's per-partition figures and the cleaner's
gauges when the endpoint is scraped. :class:`MetricsServer` is a tiny asyncio HTTP/1.0
responder: ``GET /metrics`` (or ``/``), one response, close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable

from compactlog.broker.limits import METRICS_REQUEST_MAX_BYTES, METRICS_REQUEST_TIMEOUT_S
from compactlog.log_manager import LogManager
from compactlog.storage.quarantine import list_quarantined

__all__ = ["CONTENT_TYPE", "BrokerMetrics", "MetricsServer", "prometheus_name", "render"]

logger = logging.getLogger("compactlog.broker")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class BrokerMetrics:
    """Counters and gauges of the network and request layers (event-loop thread only)."""

    def __init__(self) -> None:
        self.requests: dict[str, int] = defaultdict(int)
        self.request_time_ms: dict[str, float] = defaultdict(float)
        self.bytes_in = 0  # record bytes appended by Produce
        self.bytes_out = 0  # record bytes sent by Fetch
        self.messages_in = 0  # records appended by Produce
        self.fetch_records = 0  # records sent by Fetch
        self.failed_produce_partitions = 0
        self.failed_fetch_partitions = 0
        self.incoming_bytes = 0
        self.outgoing_bytes = 0
        self.connections = 0
        self.connections_created = 0
        self.connections_closed = 0
        self.connections_rejected = 0
        self.connections_idle_closed = 0
        self.invalid_requests = 0

    def record_request(self, api_name: str, elapsed_ms: float) -> None:
        self.requests[api_name] += 1
        self.request_time_ms[api_name] += elapsed_ms


_INVALID_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(*parts: str) -> str:
    """``("kafka.log", "LogCleanerManager", "max-dirty-percent")`` ->
    ``kafka_log_logcleanermanager_max_dirty_percent``."""
    return _INVALID_NAME_CHARS.sub("_", "_".join(parts)).lower()


def _label_value(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(
        self,
        name: str,
        kind: str,
        help_text: str,
        samples: Iterable[tuple[dict[str, object], float]],
        suffix: str = "",
    ) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        self.samples(name + suffix, samples)

    def samples(self, name: str, samples: Iterable[tuple[dict[str, object], float]]) -> None:
        for labels, value in samples:
            if labels:
                inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
                self.lines.append(f"{name}{{{inner}}} {_number(value)}")
            else:
                self.lines.append(f"{name} {_number(value)}")


def render(metrics: BrokerMetrics, logs: LogManager | None) -> str:
    """Every metric in Prometheus text format 0.0.4."""
    w = _Writer()
    names = sorted(metrics.requests)
    w.metric(
        "kafka_network_requestmetrics_requests_total",
        "counter",
        "Requests answered (or handled, for acks=0 produce), by API (Kafka's RequestsPerSec).",
        (({"request": n}, metrics.requests[n]) for n in names),
    )
    name = "kafka_network_requestmetrics_totaltimems"
    w.metric(
        name,
        "summary",
        "Milliseconds from a request's decoding to its response being written (TotalTimeMs).",
        (({"request": n}, metrics.request_time_ms[n]) for n in names),
        suffix="_sum",
    )
    w.samples(name + "_count", (({"request": n}, metrics.requests[n]) for n in names))
    counters = (
        ("kafka_server_brokertopicmetrics_bytesin_total", metrics.bytes_in,
         "Record bytes appended by Produce (BytesInPerSec)."),
        ("kafka_server_brokertopicmetrics_bytesout_total", metrics.bytes_out,
         "Record bytes sent by Fetch (BytesOutPerSec)."),
        ("kafka_server_brokertopicmetrics_messagesin_total", metrics.messages_in,
         "Records appended by Produce (MessagesInPerSec)."),
        ("kafka_server_brokertopicmetrics_failedproducerequests_total",
         metrics.failed_produce_partitions,
         "Partitions of Produce requests answered with an error (FailedProduceRequestsPerSec)."),
        ("kafka_server_brokertopicmetrics_failedfetchrequests_total",
         metrics.failed_fetch_partitions,
         "Partitions of Fetch requests answered with an error (FailedFetchRequestsPerSec)."),
        ("compactlog_broker_fetch_records_total", metrics.fetch_records,
         "Records sent by Fetch (counted from the batch headers)."),
        ("kafka_server_socket_server_metrics_incoming_byte_total", metrics.incoming_bytes,
         "Bytes received from clients."),
        ("kafka_server_socket_server_metrics_outgoing_byte_total", metrics.outgoing_bytes,
         "Bytes sent to clients."),
        ("kafka_server_socket_server_metrics_connection_creation_total",
         metrics.connections_created, "Client connections accepted."),
        ("kafka_server_socket_server_metrics_connection_close_total",
         metrics.connections_closed, "Client connections closed."),
        ("compactlog_broker_connections_rejected_total", metrics.connections_rejected,
         "Connections closed on accept: max.connections or max.connections.per.ip were open."),
        ("compactlog_broker_connections_idle_closed_total", metrics.connections_idle_closed,
         "Connections closed after connections.max.idle.ms without traffic, or silent "
         "without a request when max.connections were open."),
        ("compactlog_broker_invalid_requests_total", metrics.invalid_requests,
         "Connections closed for a request that could not be read (bad frame, bad bytes, "
         "unsupported API or version)."),
    )  # fmt: skip
    for counter, value, help_text in counters:
        w.metric(counter, "counter", help_text, [({}, value)])
    w.metric(
        "kafka_server_socket_server_metrics_connection_count",
        "gauge",
        "Open client connections.",
        [({}, metrics.connections)],
    )
    if logs is not None:
        _render_logs(w, logs)
    return "\n".join(w.lines) + "\n"


_LOG_GAUGES: tuple[tuple[str, str, Callable[..., float]], ...] = (
    ("logendoffset", "The log end offset (Kafka's LogEndOffset).", lambda log: log.log_end_offset),
    ("logstartoffset", "The log start offset (LogStartOffset).", lambda log: log.log_start_offset),
    ("size", "Bytes of the partition's segments (Size).", lambda log: log.size()),
    ("numlogsegments", "Segments of the partition (NumLogSegments).",
     lambda log: len(log.segments())),
)  # fmt: skip


def _render_logs(w: _Writer, manager: LogManager) -> None:
    logs = sorted(manager.store.logs().items())
    for suffix, help_text, read in _LOG_GAUGES:
        w.metric(
            f"kafka_log_log_{suffix}",
            "gauge",
            help_text,
            (({"topic": t, "partition": p}, read(log)) for (t, p), log in logs),
        )
    quarantined = {(t, p): list_quarantined(manager.store.fs, log.dir) for (t, p), log in logs}
    w.metric(
        "compactlog_log_quarantined_ranges",
        "gauge",
        "Damaged byte ranges of the partition kept in quarantine files (compactlog quarantine).",
        (({"topic": t, "partition": p}, len(q)) for (t, p), q in quarantined.items()),
    )
    w.metric(
        "compactlog_log_quarantined_bytes",
        "gauge",
        "Bytes of the partition's quarantine files.",
        (
            ({"topic": t, "partition": p}, sum(r.size for r in q))
            for (t, p), q in quarantined.items()
        ),
    )
    w.metric(
        "compactlog_broker_offline_logs",
        "gauge",
        "Partitions whose log refuses writes since an I/O error it could not undo, until the "
        "store is reopened (Kafka takes the whole log directory offline instead: "
        "OfflineLogDirectoryCount).",
        [({}, float(len(manager.store.offline_logs())))],
    )
    cleaner = manager.cleaner
    manager_names = set(cleaner.manager.gauges())
    for gauge, value in sorted(cleaner.gauges().items()):
        kind = "LogCleanerManager" if gauge in manager_names else "LogCleaner"
        w.metric(
            prometheus_name("kafka.log", kind, gauge),
            "gauge",
            f"The log cleaner's {gauge} (kafka.log:type={kind}).",
            [({}, float(value))],
        )


class MetricsServer:
    """``GET /metrics`` over HTTP/1.0 on its own listening socket."""

    def __init__(self, text: Callable[[], str]) -> None:
        self._text = text
        self._server: asyncio.Server | None = None
        self.port: int | None = None

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(
            self._serve, host, port, limit=METRICS_REQUEST_MAX_BYTES
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    def _respond(self, method: str, path: str) -> tuple[str, bytes, str]:
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", b"GET only\n", "text/plain"
        if path not in ("/metrics", "/"):
            return "404 Not Found", b"try /metrics\n", "text/plain"
        try:
            return "200 OK", self._text().encode(), CONTENT_TYPE
        except Exception:  # a scrape must never take the broker down; say why in the log
            logger.exception("rendering the metrics failed")
            return "500 Internal Server Error", b"see the broker's log\n", "text/plain"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(
                reader.readuntil(b"\r\n\r\n"), timeout=METRICS_REQUEST_TIMEOUT_S
            )
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request_line.split()
            method, path = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
            path = path.split("?", 1)[0]
            status, body, ctype = self._respond(method, path)
            headers = (
                f"HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            writer.write(headers if method == "HEAD" else headers + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # a scraper that sent too little, too much or too slowly: just close
        except (ConnectionError, OSError) as exc:
            logger.debug("metrics connection failed: %s", exc)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
