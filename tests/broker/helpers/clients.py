"""The four clients of spec section 1 (kafka-python, confluent-kafka, aiokafka, Debian's kcat):
which are installed (skip markers for a missing client library or tool: kcat and gawk come from
Debian, installed by scripts/setup-env.sh when it runs as root), how long one client operation may
take, and :class:`Seen`, the one shape (partition, offset, key, value) in which every reader
returns what it saw, so that tests compare clients with each other and with the store.
"""

from __future__ import annotations

import importlib.util
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import pytest

#: How long one client operation may take before the test fails instead of waiting.
CLIENT_TIMEOUT_S = 20.0

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka", "kcat")


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


needs_kafka_python = pytest.mark.skipif(not _has_module("kafka"), reason="kafka-python missing")
needs_confluent = pytest.mark.skipif(
    not _has_module("confluent_kafka"), reason="confluent-kafka missing"
)
needs_aiokafka = pytest.mark.skipif(not _has_module("aiokafka"), reason="aiokafka missing")
needs_kcat = pytest.mark.skipif(
    shutil.which("kcat") is None,
    reason="kcat missing (scripts/setup-env.sh installs Debian's kcat when run as root)",
)
needs_gawk = pytest.mark.skipif(
    shutil.which("gawk") is None,
    reason="gawk missing (scripts/setup-env.sh installs it when run as root)",
)
INSTALLED = {
    "kafka-python": _has_module("kafka"),
    "confluent-kafka": _has_module("confluent_kafka"),
    "aiokafka": _has_module("aiokafka"),
    "kcat": shutil.which("kcat") is not None,
}
NEEDS = {
    "kafka-python": needs_kafka_python,
    "confluent-kafka": needs_confluent,
    "aiokafka": needs_aiokafka,
    "kcat": needs_kcat,
}


def client_params(clients: Iterable[str] = CLIENTS) -> list[Any]:
    """``pytest.param`` per client, each with its skip marker."""
    return [pytest.param(c, marks=NEEDS[c], id=c) for c in clients]


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = CLIENT_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class Seen(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def keyed_records(n: int, keys: int, tag: str = "") -> list[tuple[bytes, bytes]]:
    """``n`` records over ``keys`` keys; compressible values, or librdkafka sends small batches
    uncompressed when compressing would not make them smaller."""
    return [(b"key-%d" % (i % keys), (f"value-{tag}-{i}-".encode() + b"x" * 200)) for i in range(n)]


def deadline_error(client: str, positions: Mapping[int, int], ends: Mapping[int, int]) -> str:
    return f"{client}: positions {dict(positions)} never reached the end offsets {dict(ends)}"


#: The consumer settings of the read helpers; kafka-python and aiokafka share these names.
PY_CONSUMER_SETTINGS: dict[str, Any] = {
    "auto_offset_reset": "earliest",
    "enable_auto_commit": False,
    "fetch_max_wait_ms": 100,
    "request_timeout_ms": 10_000,
    "session_timeout_ms": 10_000,
    "heartbeat_interval_ms": 500,
}


def by_partition(records: Iterable[Seen]) -> dict[int, list[Seen]]:
    out: dict[int, list[Seen]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out
