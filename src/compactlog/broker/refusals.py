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
* Every other API: Kafka's levels vary (its controller logs every CreateTopics result at INFO,
  ``ReplicationControlManager``; ``KafkaApis`` and ``ReplicaManager`` leave most expected
  refusals, an unknown topic in a Fetch, an offset out of range, to DEBUG or to the response
  alone). compactlog logs each error code a response carries at INFO, naming the topic,
  partition or group it is about, except the codes that are steps of the group protocol rather
  than refusals (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS), which are DEBUG.

The lines go through a rate-limited log: a client that loops on a refused request costs the broker
at most :data:`REFUSALS_PER_SECOND` lines a second (the rest are counted in the next line).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import NamedTuple

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

_NAME_FIELDS = ("name", "topic", "topic_name", "group_id", "key", "resource_name")
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
    # Names and messages come from the client: a newline in a topic name must not forge a line.
    return _CONTROL.sub(_escape, f"{line}: {reason}" if reason else line)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _escape(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]


def response_errors(body: Struct) -> Iterator[tuple[str, int, str | None]]:
    """Every non-zero ``error_code`` of a response: where (`` on partition t-0``, `` for topic
    t``, `` for group g``, or empty), the code, and the response's error message if it has one."""
    yield from _walk(body, "")


class _Plan(NamedTuple):
    """Which fields of a struct class matter here (worked out once per class)."""

    name: str | None
    partition: str | None
    error_code: bool
    error_message: bool
    group: bool
    nested: tuple[str, ...]


_PLANS: dict[type[Struct], _Plan] = {}


def _plan(cls: type[Struct]) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        fields = cls.FIELDS
        plan = _Plan(
            name=next((f for f in _NAME_FIELDS if f in fields), None),
            partition=next((f for f in _PARTITION_FIELDS if f in fields), None),
            error_code="error_code" in fields,
            error_message="error_message" in fields,
            group="group_id" in fields or "key" in fields,
            nested=tuple(cls._NESTED),
        )
        _PLANS[cls] = plan
    return plan


def _walk(s: Struct, topic: str) -> Iterator[tuple[str, int, str | None]]:
    plan = _plan(type(s))
    name = topic
    if plan.name is not None:
        value = getattr(s, plan.name)
        if isinstance(value, str) and value:
            name = value
    code = s.error_code if plan.error_code else 0
    if code:
        partition = getattr(s, plan.partition) if plan.partition is not None else None
        if isinstance(partition, int) and name:
            where = f" on partition {name}-{partition}"
        elif name:
            where = f" for {'group' if plan.group else 'topic'} {name}"
        else:
            where = ""
        yield where, code, s.error_message if plan.error_message else None
    for f in plan.nested:
        value = getattr(s, f)
        if isinstance(value, list):
            for item in value:
                yield from _walk(item, name)
        elif value is not None:
            yield from _walk(value, name)
