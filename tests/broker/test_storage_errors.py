"""A produce that meets a disk error is answered KAFKA_STORAGE_ERROR (56), and nothing of it stays.

The broker's store runs over :class:`~tests.support.faultfs.FaultInjectingFileSystem` (its
``_open_logs`` is patched to pass it to ``LogManager.open``), which makes the writes of the
partition's ``.index`` fail with ENOSPC while a test wants the disk full: the append is undone, the
client gets error 56 for that partition only, and once "space returns" the next produce is given
the offset the refused one would have had (no offset handed out twice), and a Fetch returns exactly
the acknowledged records.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog import errors as c
from compactlog.broker.metrics import render
from compactlog.broker.server import Broker, BrokerThread
from compactlog.broker.settings import BrokerSettings
from compactlog.log_manager import LogManager
from tests.broker.test_server_basics import (
    Client,
    batch,
    connected,
    create_topic,
    start_broker,
)
from tests.broker.test_server_data import fetch, produce, records_of
from tests.support.faultfs import FaultInjectingFileSystem

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]


@pytest.fixture
def faultfs() -> FaultInjectingFileSystem:
    return FaultInjectingFileSystem(trace=False)


@pytest.fixture
def server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, faultfs: FaultInjectingFileSystem
) -> Iterator[BrokerThread]:
    def open_logs(self: Broker, settings: BrokerSettings) -> LogManager:
        return LogManager.open(
            self.data_dir, self.clock, dict(settings.store_config), background=True, fs=faultfs
        )

    monkeypatch.setattr(Broker, "_open_logs", open_logs)
    broker = start_broker(tmp_path / "data")
    try:
        yield broker
    finally:
        faultfs.clear_faults()
        broker.stop()


@pytest.fixture
def client(server: BrokerThread) -> Iterator[Client]:
    yield from connected(server)


def _records(n: int, tag: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"k%d" % i, tag + b"-%d" % i) for i in range(n)]


def test_produce_on_a_full_disk_is_kafka_storage_error_then_resumes(
    server: BrokerThread, client: Client, faultfs: FaultInjectingFileSystem
) -> None:
    create_topic(server, "t", 2, {"index.interval.bytes": 1})
    acked: list[tuple[int, bytes, bytes]] = []
    for i in range(4):
        records = _records(2, b"a%d" % i)
        result = produce(client, "t", 0, batch(records))
        assert result.error_code == c.NONE
        acked += [(result.base_offset + j, k, v) for j, (k, v) in enumerate(records)]
    t0_dir = str(Path(server.broker.data_dir) / "t-0")

    def index_of_t0(n: int, op: str, path: str) -> bool:
        return op in ("write_at", "append") and path.startswith(t0_dir) and ".index" in path

    faultfs.fail_when(index_of_t0, errno.ENOSPC)
    refused = produce(client, "t", 0, batch(_records(2, b"refused")))
    assert refused.error_code == c.KAFKA_STORAGE_ERROR
    assert refused.base_offset == -1
    other: Any = produce(client, "t", 1, batch(_records(1, b"other")))
    assert (other.error_code, other.base_offset) == (c.NONE, 0), "only t-0's disk writes fail"

    faultfs.clear_faults()  # space returns
    for i in range(3):
        records = _records(1, b"b%d" % i)
        result = produce(client, "t", 0, batch(records))
        assert (result.error_code, result.base_offset) == (c.NONE, 8 + i)
        acked.append((result.base_offset, *records[0]))
    fetched = fetch(client, "t", 0, 0)
    assert fetched.error_code == c.NONE
    assert records_of(fetched.records) == acked


def test_offline_log_answers_kafka_storage_error_until_reopened(
    server: BrokerThread, client: Client, faultfs: FaultInjectingFileSystem
) -> None:
    """An fsync failure takes the partition offline: every later produce gets 56, even after
    the disk recovers, while Fetch keeps serving what was acknowledged."""
    create_topic(server, "t", 1, {"flush.messages": 1})
    first = produce(client, "t", 0, batch(_records(2, b"a")))
    assert first.error_code == c.NONE
    faultfs.fail_when(lambda n, op, path: op == "sync" and "/t-0/" in path, errno.EIO)
    assert produce(client, "t", 0, batch(_records(1, b"x"))).error_code == c.KAFKA_STORAGE_ERROR
    faultfs.clear_faults()
    assert produce(client, "t", 0, batch(_records(1, b"y"))).error_code == c.KAFKA_STORAGE_ERROR
    fetched = fetch(client, "t", 0, 0)
    assert fetched.error_code == c.NONE
    assert [r[0] for r in records_of(fetched.records)] == [0, 1], "the refused append is withdrawn"
    ctx, logs = server.broker.ctx, server.broker.log_manager
    assert ctx is not None
    text = server.call(lambda: render(ctx.metrics, logs))
    assert "\ncompactlog_broker_offline_logs 1.0\n" in text  # prometheus_client's number format
