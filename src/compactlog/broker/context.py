"""What every request handler shares: the store, the settings, the identity of the node, the
waiters of long-polling fetches, the metrics and the group coordinator.

Threading: everything here lives on the broker's event loop and is touched from it only. The
store is called from the loop thread too, synchronously: its calls are short (an append writes
to the page cache; a read slices files), and one thread owning it means no two requests ever
interleave inside it. The store's own background threads (the log cleaner, retention, flushes,
checkpoints) take the logs' locks, as they would beside any single caller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from compactlog.broker.acl_store import AclFile
from compactlog.broker.authorizer import StandardAuthorizer
from compactlog.broker.coordinator.service import GroupCoordinator
from compactlog.broker.metrics import BrokerMetrics
from compactlog.broker.node_state import NODE_ID, ProducerIdManager
from compactlog.broker.refusals import REFUSALS_PER_SECOND
from compactlog.broker.settings import BrokerSettings
from compactlog.storage.store import Store

if TYPE_CHECKING:
    from compactlog.broker.security.scram import ScramCredentials

__all__ = [
    "CURRENT_LISTENER",
    "AppendWaiters",
    "BrokerContext",
    "CloseConnection",
    "Peer",
    "RateLimitedLog",
]

logger = logging.getLogger("compactlog.broker")

TopicPartition = tuple[str, int]


class CloseConnection(Exception):
    """Raised by a handler: send nothing and close the connection (the reason is logged)."""


class RateLimitedLog:
    """Log lines of one kind, at most ``per_second`` a second; the rest are counted and the
    count is reported with the next line that is logged. A flood of bad connections must cost
    the broker neither its latency (a log write per connection) nor its log file."""

    def __init__(self, logger: logging.Logger, per_second: int = 10) -> None:
        self._logger = logger
        self._per_second = per_second
        self._window_start = 0.0
        self._in_window = 0
        self._suppressed = 0

    def log(self, level: int, message: str, *args: object) -> None:
        if not self._logger.isEnabledFor(level):
            return
        now = time.monotonic()
        if now - self._window_start >= 1.0:
            self._window_start, self._in_window = now, 0
        if self._in_window >= self._per_second:
            self._suppressed += 1
            return
        self._in_window += 1
        if self._suppressed:
            message += " (%d similar lines not logged)"
            args = (*args, self._suppressed)
            self._suppressed = 0
        self._logger.log(level, message, *args)


class Peer(NamedTuple):
    """Who sent a request: the client id of its header and the connection's remote address."""

    client_id: str
    host: str
    port: int
    principal: str = "User:ANONYMOUS"


#: The name of the listener the request being handled came in on (set by the connection for
#: its processor task), so that Metadata, FindCoordinator and DescribeCluster answer with that
#: listener's advertised address, as Kafka does.
CURRENT_LISTENER: ContextVar[str | None] = ContextVar("compactlog_listener", default=None)


class AppendWaiters:
    """Wakes long-polling Fetch requests when a partition they read is appended to.

    A waiting fetch registers one future under every partition it reads; an append completes the
    futures of its partition; :meth:`wake_all` (broker shutdown) completes every one.
    """

    def __init__(self) -> None:
        self._by_partition: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self._all: set[asyncio.Future[None]] = set()

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return after an append to one of ``partitions``, :meth:`wake_all`, or the timeout."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(dict.fromkeys(partitions))
        for key in keys:
            self._by_partition.setdefault(key, set()).add(future)
        self._all.add(future)
        try:
            await asyncio.wait({future}, timeout=max(timeout_s, 0.0))
        finally:
            self._all.discard(future)
            for key in keys:
                waiting = self._by_partition.get(key)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        del self._by_partition[key]
            if not future.done():
                future.cancel()

    def notify(self, topic: str, partition: int) -> None:
        for future in self._by_partition.pop((topic, partition), ()):
            if not future.done():
                future.set_result(None)

    def wake_all(self) -> None:
        for future in list(self._all):
            if not future.done():
                future.set_result(None)


@dataclass
class BrokerContext:
    """The state the handlers work on (one per running broker)."""

    store: Store
    settings: BrokerSettings
    cluster_id: str
    #: The host and port that Metadata and FindCoordinator advertise.
    host: str
    port: int
    producer_ids: ProducerIdManager
    clock: Callable[[], int]
    #: The group coordinator once loaded; see :meth:`coordinator`.
    groups: GroupCoordinator | None = None
    #: Loads the coordinator (creating ``__consumer_offsets``) at the first group request, as
    #: Kafka creates that topic on first use; None when the broker serves no group APIs.
    load_groups: Callable[[], GroupCoordinator] | None = None
    node_id: int = NODE_ID
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    waiters: AppendWaiters = field(default_factory=AppendWaiters)
    #: Where connections log why they were closed (rate-limited).
    close_log: RateLimitedLog = field(default_factory=lambda: RateLimitedLog(logger))
    #: Where refused requests are logged (rate-limited; :mod:`compactlog.broker.refusals`).
    refusal_log: RateLimitedLog = field(
        default_factory=lambda: RateLimitedLog(logger, per_second=REFUSALS_PER_SECOND)
    )
    #: Set when the broker stops: long polls answer at once, delayed group responses end.
    stopping: bool = False
    #: Called after every group request, so the coordinator's timer re-arms for its deadline.
    on_group_request: Callable[[], None] = field(default=lambda: None)
    #: The advertised (host, port) of each listener by name; ``host``/``port`` above are the
    #: first listener's.
    advertised_listeners: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: The SCRAM credentials of the data directory (None until the broker has loaded them).
    scram: ScramCredentials | None = None

    def advertised_address(self) -> tuple[str, int]:
        """The advertised host and port of the listener the current request came in on."""
        listener = CURRENT_LISTENER.get()
        if listener is not None and listener in self.advertised_listeners:
            return self.advertised_listeners[listener]
        return self.host, self.port

    #: The ACLs and their file when ``authorizer.class.name`` is set; None: everything allowed.
    authorizer: StandardAuthorizer | None = None
    acl_file: AclFile | None = None

    @property
    def groups_enabled(self) -> bool:
        return self.groups is not None or self.load_groups is not None

    def coordinator(self) -> GroupCoordinator:
        """The group coordinator, loaded on first use."""
        if self.groups is None:
            if self.load_groups is None:
                raise RuntimeError("this broker serves no group APIs")
            self.groups = self.load_groups()
        return self.groups
