"""Finding 8 of issue 17: a producer could set the delete-horizon bit (attributes bit 6) on a
tombstone, and the cleaner then removed it at the next cleaning, not after delete.retention.ms.
The validator clears the bit of client batches (only the cleaner writes it); nothing else in the
batch changes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from compactlog.log_manager import LogManager
from compactlog.records import Compression, RecordBatch, build_batch, decode_columns
from compactlog.storage import validator

NOW = 1_700_000_000_000
DAY = 86_400_000


def stored_bytes(manager: LogManager, topic: str = "t") -> list[bytes]:
    return [bytes(b.data) for b in manager.store.log(topic, 0).iter_batches(0)]


def stored_batches(manager: LogManager, topic: str = "t") -> list[RecordBatch]:
    return [RecordBatch(data) for data in stored_bytes(manager, topic)]


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP])
@pytest.mark.parametrize("recompressed", [False, True], ids=["in-place", "recompressed"])
def test_a_clients_delete_horizon_is_cleared_and_the_tombstone_kept(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    compression: Compression,
    recompressed: bool,
) -> None:
    monkeypatch.setattr(validator, "_horizon_warned", set())
    clock = [NOW]
    config = {
        "cleanup.policy": "compact",
        "delete.retention.ms": DAY,
        "min.cleanable.dirty.ratio": 0.01,
    }
    if recompressed:
        config["compression.type"] = "lz4"
    with LogManager.open(tmp_path / "data", lambda: clock[0]) as manager:
        store = manager.store
        store.create_topic("t", 1, config)
        store.append_batch(
            "t", 0, build_batch([(b"k", b"v")], timestamps=NOW, compression=compression)
        )
        # The horizon claims "remove after NOW - 1 day": long past.
        forged = build_batch(
            [(b"k", None), (b"j", None)],
            timestamps=[NOW, NOW + 5],
            compression=compression,
            delete_horizon_ms=NOW - DAY,
        )
        assert RecordBatch(forged).header.has_delete_horizon
        with caplog.at_level(logging.WARNING, logger="compactlog.storage"):
            store.append_batch("t", 0, forged)
            store.append_batch("t", 0, forged)  # logged once per partition
        assert caplog.text.count("cleared the delete-horizon flag") == 1
        assert "t-0" in caplog.text
        store.roll("t", 0)
        store.append("t", 0, [(b"z", b"active")], timestamp=NOW)

        raw = stored_bytes(manager)[1]
        tombstones = RecordBatch(raw)
        assert not tombstones.header.has_delete_horizon
        decode_columns(raw, verify_crc=True)  # the CRC was recomputed
        # The records are what the producer sent: keys, null values, timestamps.
        sent = [(r.key, r.value, r.timestamp) for r in RecordBatch(forged).records()]
        assert [(r.key, r.value, r.timestamp) for r in tombstones.records()] == sent

        # A cleaning now keeps the tombstones (delete.retention.ms has not passed since).
        clock[0] = NOW + 1000
        manager.clean_log("t", 0, now=clock[0])
        kept = [(r.key, r.value) for b in stored_batches(manager) for r in b.records()]
        assert (b"k", None) in kept and (b"j", None) in kept


def test_a_cleaner_written_horizon_is_kept_when_not_from_a_client(tmp_path: Path) -> None:
    with LogManager.open(tmp_path / "data", lambda: NOW) as manager:
        store = manager.store
        store.create_topic("t", 1, {"cleanup.policy": "compact"})
        batch = build_batch([(b"k", None)], timestamps=NOW, delete_horizon_ms=NOW + DAY)
        store.append_batch("t", 0, batch, from_client=False)
        (stored,) = stored_batches(manager)
        assert stored.header.delete_horizon_ms == NOW + DAY
