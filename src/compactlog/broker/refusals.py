"""One log line for every refused request: which request, which client, where, and Kafka's error.

Kafka's levels, and where compactlog departs from them:

* Produce. ``ReplicaManager.appendToLocalLog`` logs "Error processing append operation on
  partition" at ERROR for records the log refuses (Kafka's ``RecordValidationException``: a
  keyless record on a compacted topic, a bad timestamp) and for any unexpected error, at INFO for
  a fenced producer epoch, and not at all for the refusals it expects (an unknown partition,
  MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, CORRUPT_MESSAGE, a storage error, which the log
  directory's failure channel reports instead); ``KafkaApis.handleProduceRequest`` then logs every
  failed partition at DEBUG ("Produce request with correlation id ... failed due to ...").
  compactlog logs the expected refusals at INFO rather than DEBUG, so that a refused produce is
  visible in a default log; the other levels are Kafka's, and a storage error is a WARNING (the
  log is offline, the broker goes on).
* Every other API: Kafka logs its refusals at DEBUG or not at all, here and there. compactlog
  logs each error code a response carries at INFO, naming the topic, partition or group it is
  about, except the codes that are steps of the group protocol rather than refusals
  (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS), which are DEBUG.

The lines go through a rate-limited log: a client that loops on a refused request costs the broker
at most :data:`REFUSALS_PER_SECOND` lines a second (the rest are counted in the next line).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from compactlog import errors as codes
from compactlog.protocol import Struct, error_name

__all__ = [
    "REFUSALS_PER_SECOND",
    "produce_refusal_level",
    "refusal_level",
    "refusal_line",
    "response_errors",
]

#: Enough for every partition of a few refused requests a second, few enough that a client
#: looping on a refusal cannot fill the disk with the broker's log.
REFUSALS_PER_SECOND = 100

#: Produce refusals Kafka expects (it logs them at DEBUG only; compactlog at INFO).
_EXPECTED_PRODUCE_ERRORS = frozenset(
    {
        codes.UNKNOWN_TOPIC_OR_PARTITION,
        codes.NOT_LEADER_OR_FOLLOWER,
        codes.MESSAGE_TOO_LARGE,
        codes.RECORD_LIST_TOO_LARGE,
        codes.CORRUPT_MESSAGE,
        codes.INVALID_REQUIRED_ACKS,
        codes.INVALID_TOPIC_EXCEPTION,
        codes.INVALID_TXN_STATE,
        codes.UNSUPPORTED_COMPRESSION_TYPE,
        codes.INVALID_PRODUCER_EPOCH,
    }
)

#: Error codes that are steps of the group protocol, not refusals.
_ROUTINE_ERRORS = frozenset({codes.MEMBER_ID_REQUIRED, codes.REBALANCE_IN_PROGRESS})

_NAME_FIELDS = ("name", "topic", "topic_name", "group_id", "resource_name")
_PARTITION_FIELDS = ("index", "partition_index", "partition")


def produce_refusal_level(error_code: int) -> int:
    """The level of a refused produce's line (the module docstring says why)."""
    if error_code == codes.KAFKA_STORAGE_ERROR:
        return logging.WARNING
    if error_code in _EXPECTED_PRODUCE_ERRORS:
        return logging.INFO
    return logging.ERROR


def refusal_level(error_code: int) -> int:
    """The level of another API's refusal."""
    return logging.DEBUG if error_code in _ROUTINE_ERRORS else logging.INFO


def refusal_line(
    api_name: str,
    correlation_id: int,
    client_id: str,
    host: str,
    port: int,
    where: str,
    error_code: int,
    reason: str | None,
) -> str:
    """``Produce request with correlation id 7 from client rdkafka (127.0.0.1:50112) on
    partition t-0 failed due to RECORD_LIST_TOO_LARGE: <reason>`` (Kafka's wording)."""
    line = (
        f"{api_name} request with correlation id {correlation_id} from client {client_id!r} "
        f"({host}:{port}){where} failed due to {error_name(error_code)}"
    )
    return f"{line}: {reason}" if reason else line


def response_errors(body: Struct) -> Iterator[tuple[str, int, str | None]]:
    """Every non-zero ``error_code`` of a response: where (`` on partition t-0``, `` for topic
    t``, `` for group g``, or empty), the code, and the response's error message if it has one."""
    yield from _walk(body, "")


def _walk(s: Struct, topic: str) -> Iterator[tuple[str, int, str | None]]:
    fields = s.FIELDS
    where_name = topic
    for f in _NAME_FIELDS:
        if f in fields:
            value = getattr(s, f)
            if isinstance(value, str) and value:
                where_name = value
                break
    where = ""
    partition = None
    for f in _PARTITION_FIELDS:
        if f in fields and isinstance(getattr(s, f), int):
            partition = getattr(s, f)
            break
    if partition is not None and where_name:
        where = f" on partition {where_name}-{partition}"
    elif where_name:
        kind = "group" if "group_id" in fields else "topic"
        where = f" for {kind} {where_name}"
    code = getattr(s, "error_code", 0) if "error_code" in fields else 0
    if code:
        message = getattr(s, "error_message", None) if "error_message" in fields else None
        yield where, code, message
    for f in fields:
        value = getattr(s, f)
        if isinstance(value, Struct):
            yield from _walk(value, where_name)
        elif isinstance(value, list) and value and isinstance(value[0], Struct):
            for item in value:
                yield from _walk(item, where_name)
