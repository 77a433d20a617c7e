"""A live Kafka broker's log dir is locked for compactlog, and a directory compactlog holds is
locked for Kafka: both take the record lock on ``<dir>/.lock`` (Kafka through
``FileChannel.tryLock``), so neither writes under the other."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from compactlog.cli.main import main
from compactlog.errors import StorageError
from compactlog.storage.store import Store
from tests.kafka.harness import KafkaBroker

pytestmark = pytest.mark.kafka


def _files(data: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(data)): p.read_bytes()
        for p in data.rglob("*")
        if p.is_file() and p.name != ".lock"  # reading .lock would drop this process's locks
    }


def test_compactlog_refuses_a_live_kafka_log_dir_and_kafka_refuses_compactlogs(
    kafka: Callable[..., KafkaBroker], tmp_path: Path
) -> None:
    broker = kafka()
    created = broker.tool("kafka-topics", "--create", "--topic", "t")
    assert created.returncode == 0, created.stderr
    with pytest.raises(StorageError, match="in use by another process"):
        Store.open(broker.data_dir)
    result = CliRunner().invoke(main, ["--data-dir", str(broker.data_dir), "clean", "t"])
    assert result.exit_code != 0
    assert "in use by another process" in result.output
    broker.stop()

    data = tmp_path / "compactlog-data"
    with Store.open(data) as store:
        store.create_topic("t", 1)
        before = _files(data)
        second = kafka(data_dir=data, start=False)
        second.format()
        with pytest.raises(RuntimeError, match="Kafka exited with 1 while starting"):
            second.start(timeout=60)
        assert "Failed to acquire lock on file .lock" in second.server_log.read_text()
        after = _files(data)  # kafka-storage format added its own files (meta.properties, ...)
        assert {name: after.get(name) for name in before} == before
