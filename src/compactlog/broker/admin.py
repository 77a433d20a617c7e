"""The broker's HTTP admin routes, beside ``/metrics`` on the same listener.

Kafka has no request that rolls a segment (its ``UnifiedLog.roll`` is reached only from inside
the broker: ``segment.bytes``, ``segment.ms``, ``log.roll.jitter.ms``); Redpanda puts such
operator actions on an HTTP admin API beside the Kafka port. compactlog does the same, with
Redpanda's ``/v1/`` prefix:

* ``POST /v1/topics/{topic}/partitions/{partition}/roll``: roll that partition's active segment;
* ``POST /v1/topics/{topic}/roll``: roll every partition of the topic.

The answer is JSON: ``{"partitions": [{"topic", "partition", "rolled", "log_end_offset"}]}``
(``rolled`` false: the active segment was empty, so nothing changed), or on error
``{"error": "UNKNOWN_TOPIC_OR_PARTITION", "message": ...}`` with an HTTP status (404 unknown
topic or partition, 403 not allowed, 405 not a POST, 409 the log is offline or refused).

There is no authentication yet, so the routes answer loopback clients only (127.0.0.0/8, ::1)
whatever address the listener is bound to, unless the broker was started with
``--admin-allow-remote-unauthenticated`` (``allow_remote``): then anyone who can reach the port
can roll segments, which costs files and the cleaner's work but loses no data.

The routes run on the broker's event loop, the one thread that touches the store (see
:mod:`compactlog.broker.context`), which is why the listener is the broker's own asyncio server
and not ``prometheus_client``'s threaded HTTP server.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

from compactlog import errors as codes
from compactlog.errors import CompactlogError, StorageError, UnknownTopicOrPartitionError
from compactlog.protocol import error_name
from compactlog.storage.store import Store

__all__ = ["ADMIN_PREFIX", "AdminRoutes", "is_loopback"]

logger = logging.getLogger("compactlog.broker")

ADMIN_PREFIX = "/v1/"

_ROLL_ONE = re.compile(r"^/v1/topics/([^/]+)/partitions/(-?\d+)/roll$")
_ROLL_ALL = re.compile(r"^/v1/topics/([^/]+)/roll$")

JSON_TYPE = "application/json"


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and IPv4-mapped loopback; False for names and anything else."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


@dataclass(frozen=True)
class Answer:
    status: str
    body: bytes
    content_type: str = JSON_TYPE


def _json(status: str, doc: object) -> Answer:
    return Answer(status, (json.dumps(doc) + "\n").encode())


def _error(status: str, code: int, message: str) -> Answer:
    return _json(status, {"error": error_name(code), "message": message})


class AdminRoutes:
    """The ``/v1/`` routes over the broker's store (event-loop thread only)."""

    def __init__(self, store: Callable[[], Store | None], allow_remote: bool = False) -> None:
        self._store = store
        self.allow_remote = allow_remote

    def answer(self, method: str, path: str, peer_host: str) -> Answer:
        if not self.allow_remote and not is_loopback(peer_host):
            logger.warning("refused admin request %s %s from %s: not loopback", method, path,
                           peer_host)  # fmt: skip
            return _error(
                "403 Forbidden",
                codes.CLUSTER_AUTHORIZATION_FAILED,
                "the admin routes answer loopback clients only (the broker has no "
                "authentication yet; --admin-allow-remote-unauthenticated lifts this)",
            )
        one = _ROLL_ONE.match(path)
        every = _ROLL_ALL.match(path)
        if one is None and every is None:
            return _error("404 Not Found", codes.INVALID_REQUEST, f"no admin route {path}")
        if method != "POST":
            return _error("405 Method Not Allowed", codes.INVALID_REQUEST, "POST only")
        store = self._store()
        if store is None:
            message = "the broker is not running"
            return _error("503 Service Unavailable", codes.LEADER_NOT_AVAILABLE, message)
        match = one or every
        assert match is not None
        topic = unquote(match.group(1))
        try:
            if topic not in store.topics():
                raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
            count = store.partitions(topic)
            if one is not None:
                partition = int(one.group(2))
                if not 0 <= partition < count:
                    raise UnknownTopicOrPartitionError(
                        f"topic {topic!r} has no partition {partition} (it has {count})"
                    )
                partitions = [partition]
            else:
                partitions = list(range(count))
            rolled = []
            for p in partitions:
                did_roll = store.roll(topic, p)
                end = store.log_end_offset(topic, p)
                if did_roll:
                    logger.info("admin: rolled %s-%d; the new active segment starts at offset %d",
                                topic, p, end)  # fmt: skip
                else:
                    logger.info("admin: %s-%d not rolled: its active segment (offset %d) is empty",
                                topic, p, end)  # fmt: skip
                rolled.append(
                    {"topic": topic, "partition": p, "rolled": did_roll, "log_end_offset": end}
                )
        except UnknownTopicOrPartitionError as exc:
            return _error("404 Not Found", exc.error_code, str(exc))
        except (StorageError, CompactlogError) as exc:
            return _error("409 Conflict", exc.error_code, str(exc))
        return _json("200 OK", {"partitions": rolled})
