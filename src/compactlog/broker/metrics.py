"""The broker's and the cleaner's metrics in Prometheus text format 0.0.4, and the HTTP
listener that serves them (with the admin routes of :mod:`compactlog.broker.admin`).

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
handlers. The exposition is ``prometheus_client``'s: at each scrape :func:`read_figures` copies
the counters, the store's per-partition figures and the cleaner's gauges as plain values on the
event loop, and :func:`exposition`, in a worker thread, turns them into the library's metric
families and text (``generate_latest``: escaping, number formats and order are the library's).

:class:`MetricsServer` stays a small asyncio HTTP/1.0 responder, not ``prometheus_client``'s
``start_http_server``: that one serves from its own thread, while the store, the counters and
the admin routes belong to the broker's event loop (one thread touches the store), and the
admin routes need POST, which it does not route.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from compactlog.broker.admin import ADMIN_PREFIX, AdminRoutes
from compactlog.broker.limits import METRICS_REQUEST_MAX_BYTES, METRICS_REQUEST_TIMEOUT_S
from compactlog.log_manager import LogManager
from compactlog.storage.quarantine import list_quarantined

__all__ = [
    "CONTENT_TYPE",
    "BrokerMetrics",
    "Figures",
    "MetricsServer",
    "PartitionFigures",
    "exposition",
    "prometheus_name",
    "read_figures",
    "render",
]

logger = logging.getLogger("compactlog.broker")

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4


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


_TP = ["topic", "partition"]


class PartitionFigures(NamedTuple):
    topic: str
    partition: int
    logendoffset: int
    logstartoffset: int
    size: int
    numlogsegments: int
    quarantined_ranges: int
    quarantined_bytes: int


@dataclass
class Figures:
    """Every figure of one scrape, read on the event loop (which owns the counters and the
    store) as plain values, so that the metric families and the text can be made elsewhere."""

    broker: BrokerMetrics
    #: Every partition's figures; None without a store.
    partitions: list[PartitionFigures] | None = None
    offline_logs: int = 0
    #: (gauge name, LogCleaner or LogCleanerManager, value) of the cleaner's gauges.
    cleaner: list[tuple[str, str, float]] = field(default_factory=list)


def read_figures(metrics: BrokerMetrics, logs: LogManager | None) -> Figures:
    """The figures of a scrape, read now (event-loop thread)."""
    broker = copy.copy(metrics)
    broker.requests = defaultdict(int, metrics.requests)
    broker.request_time_ms = defaultdict(float, metrics.request_time_ms)
    figures = Figures(broker)
    if logs is None:
        return figures
    store = logs.store
    figures.partitions = []
    for (t, p), log in sorted(store.logs().items()):
        quarantined = list_quarantined(store.fs, log.dir)
        figures.partitions.append(
            PartitionFigures(
                t, p, log.log_end_offset, log.log_start_offset, log.size(), len(log.segments()),
                len(quarantined), sum(r.size for r in quarantined),
            )
        )  # fmt: skip
    figures.offline_logs = len(store.offline_logs())
    cleaner = logs.cleaner
    manager_names = set(cleaner.manager.gauges())
    figures.cleaner = [
        (name, "LogCleanerManager" if name in manager_names else "LogCleaner", float(value))
        for name, value in sorted(cleaner.gauges().items())
    ]
    return figures


class _Collector(Collector):
    """The metric families of one scrape's figures."""

    def __init__(self, figures: Figures) -> None:
        self._figures = figures

    def collect(self) -> Iterator[Metric]:
        metrics = self._figures.broker
        names = sorted(metrics.requests)
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests_total",
            "Requests answered (or handled, for acks=0 produce), by API (Kafka's RequestsPerSec).",
            labels=["request"],
        )
        total_time = SummaryMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Milliseconds from a request's decoding to its response being written (TotalTimeMs).",
            labels=["request"],
        )
        for n in names:
            requests.add_metric([n], metrics.requests[n])
            total_time.add_metric([n], metrics.requests[n], metrics.request_time_ms[n])
        yield requests
        yield total_time
        counters = (
            ("kafka_server_brokertopicmetrics_bytesin_total", metrics.bytes_in,
             "Record bytes appended by Produce (BytesInPerSec)."),
            ("kafka_server_brokertopicmetrics_bytesout_total", metrics.bytes_out,
             "Record bytes sent by Fetch (BytesOutPerSec)."),
            ("kafka_server_brokertopicmetrics_messagesin_total", metrics.messages_in,
             "Records appended by Produce (MessagesInPerSec)."),
            ("kafka_server_brokertopicmetrics_failedproducerequests_total",
             metrics.failed_produce_partitions,
             "Partitions of Produce requests answered with an error "
             "(FailedProduceRequestsPerSec)."),
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
             "Connections closed on accept: max.connections or max.connections.per.ip were "
             "open."),
            ("compactlog_broker_connections_idle_closed_total", metrics.connections_idle_closed,
             "Connections closed after connections.max.idle.ms without traffic, or silent "
             "without a request when max.connections were open."),
            ("compactlog_broker_invalid_requests_total", metrics.invalid_requests,
             "Connections closed for a request that could not be read (bad frame, bad bytes, "
             "unsupported API or version)."),
        )  # fmt: skip
        for name, value, help_text in counters:
            yield CounterMetricFamily(name, help_text, value=value)
        yield GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open client connections.",
            value=metrics.connections,
        )
        if self._figures.partitions is not None:
            yield from _log_metrics(self._figures)


class _Collected(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


def exposition(figures: Figures) -> bytes:
    """The figures as Prometheus text format 0.0.4, by ``prometheus_client`` (any thread: it
    reads only ``figures``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(figures))
    return generate_latest(registry)


def render(metrics: BrokerMetrics, logs: LogManager | None) -> str:
    """Every metric in Prometheus text format 0.0.4."""
    return exposition(read_figures(metrics, logs)).decode()


#: The per-partition gauges: the name's suffix (a :class:`PartitionFigures` field) and help.
_LOG_GAUGES: tuple[tuple[str, str], ...] = (
    ("logendoffset", "The log end offset (Kafka's LogEndOffset)."),
    ("logstartoffset", "The log start offset (LogStartOffset)."),
    ("size", "Bytes of the partition's segments (Size)."),
    ("numlogsegments", "Segments of the partition (NumLogSegments)."),
)


def _log_metrics(figures: Figures) -> Iterator[Metric]:
    rows = figures.partitions or []
    for suffix, help_text in _LOG_GAUGES:
        gauge = GaugeMetricFamily(f"kafka_log_log_{suffix}", help_text, labels=_TP)
        for row in rows:
            gauge.add_metric([row.topic, str(row.partition)], getattr(row, suffix))
        yield gauge
    ranges = GaugeMetricFamily(
        "compactlog_log_quarantined_ranges",
        "Damaged byte ranges of the partition kept in quarantine files (compactlog quarantine).",
        labels=_TP,
    )
    size = GaugeMetricFamily(
        "compactlog_log_quarantined_bytes", "Bytes of the partition's quarantine files.", labels=_TP
    )
    for row in rows:
        ranges.add_metric([row.topic, str(row.partition)], row.quarantined_ranges)
        size.add_metric([row.topic, str(row.partition)], row.quarantined_bytes)
    yield ranges
    yield size
    yield GaugeMetricFamily(
        "compactlog_broker_offline_logs",
        "Partitions whose log refuses writes since an I/O error it could not undo, until the "
        "store is reopened (Kafka takes the whole log directory offline instead: "
        "OfflineLogDirectoryCount).",
        value=figures.offline_logs,
    )
    for gauge_name, kind, value in figures.cleaner:
        yield GaugeMetricFamily(
            prometheus_name("kafka.log", kind, gauge_name),
            f"The log cleaner's {gauge_name} (kafka.log:type={kind}).",
            value=value,
        )


class MetricsServer:
    """The broker's HTTP listener: ``GET /metrics`` (or ``/``) and the admin routes under
    ``/v1/`` (:mod:`compactlog.broker.admin`); HTTP/1.0, one request per connection."""

    def __init__(self, figures: Callable[[], Figures], admin: AdminRoutes | None = None) -> None:
        self._figures = figures
        self._admin = admin
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

    async def _respond(self, method: str, path: str, peer_host: str) -> tuple[str, bytes, str]:
        if self._admin is not None and path.startswith(ADMIN_PREFIX):
            answer = self._admin.answer(method, path, peer_host)
            return answer.status, answer.body, answer.content_type
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", b"GET only\n", "text/plain"
        if path not in ("/metrics", "/"):
            return "404 Not Found", b"try /metrics\n", "text/plain"
        try:
            # The figures are read on the event loop; the families and the text are made in a
            # worker thread, most of a scrape's time (benchmarks/bench_metrics.py).
            figures = self._figures()
            return "200 OK", await asyncio.to_thread(exposition, figures), CONTENT_TYPE
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
            peer = writer.get_extra_info("peername")
            peer_host = str(peer[0]) if isinstance(peer, tuple) and peer else ""
            status, body, ctype = await self._respond(method, path, peer_host)
            headers = (
                f"HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            writer.write(headers if method == "HEAD" else headers + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # a client that sent too little, too much or too slowly: just close
        except (ConnectionError, OSError) as exc:
            logger.debug("metrics connection failed: %s", exc)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
