"""Seed 000: fruit prices on a compacted topic, cleaned twice (spec 5.4, 5.5, 9.1; R12).

grape=$2.69, lime=$0.49, grape=null, lime=$1.59 at offsets 0-3; roll; clean: the old grape and
lime go, the tombstone stays (its batch is stamped with a delete horizon); later appends; clean
again before the horizon (tombstone kept) and after it (tombstone gone).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from compactlog.records import RecordBatch
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import manager_of

StoreFactory = Callable[..., Store]
DELETE_RETENTION_MS = 60_000


def state(store: Store) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in store.read("fruit-prices", 0)]


def logs(tmp_path: Path) -> list[str]:
    return sorted(n for n in os.listdir(tmp_path / "data" / "fruit-prices-0") if n.endswith(".log"))


def test_seed_example_cleaned_twice(
    open_store: StoreFactory, tmp_path: Path, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic(
        "fruit-prices",
        1,
        {
            "cleanup.policy": "compact",
            "delete.retention.ms": DELETE_RETENTION_MS,
            # later rounds clean a small dirty tail against a clean head: let them qualify
            "min.cleanable.dirty.ratio": 0.01,
        },
    )
    for key, value in [
        (b"grape", b"$2.69"),
        (b"lime", b"$0.49"),
        (b"grape", None),
        (b"lime", b"$1.59"),
    ]:
        store.append("fruit-prices", 0, [(key, value)])
    store.roll("fruit-prices", 0)
    t0 = clock.now
    result = manager_of(store).clean(t0)
    assert result.cleaned == ("fruit-prices", 0)
    assert result.end_offset == 4
    assert state(store) == [(2, b"grape", None), (3, b"lime", b"$1.59")]
    assert logs(tmp_path) == ["00000000000000000000.log", "00000000000000000004.log"]
    first = RecordBatch(next(store.log("fruit-prices", 0).iter_batches(0)).data)
    assert first.base_offset == 2 and first.delete_horizon_ms == t0 + DELETE_RETENTION_MS
    assert store.cleaner_offset_checkpoint.read() == {("fruit-prices", 0): 4}
    assert (
        "Log cleaner thread 0 cleaned log fruit-prices-0 (dirty section = [0, 4])" in result.summary
    )

    # Nothing new: nothing to clean (the dirty ratio is 0).
    assert manager_of(store).clean(t0 + 1).cleaned is None

    # More prices, then a clean one millisecond before the horizon: the tombstone stays.
    clock.now = t0 + 10
    store.append("fruit-prices", 0, [(b"kiwi", b"$0.30")])
    store.append("fruit-prices", 0, [(b"melon", b"$3.10")])
    store.roll("fruit-prices", 0)
    before = manager_of(store).clean(t0 + DELETE_RETENTION_MS - 1)
    assert before.cleaned == ("fruit-prices", 0)
    assert state(store) == [
        (2, b"grape", None),
        (3, b"lime", b"$1.59"),
        (4, b"kiwi", b"$0.30"),
        (5, b"melon", b"$3.10"),
    ]
    # Segments 0 and 4 were rewritten together into one, named after the first.
    assert logs(tmp_path) == ["00000000000000000000.log", "00000000000000000006.log"]

    # One more append so the log is dirty again, and a clean past the horizon: the tombstone goes.
    store.append("fruit-prices", 0, [(b"papaya", b"$1.20")])
    store.roll("fruit-prices", 0)
    after = manager_of(store).clean(t0 + DELETE_RETENTION_MS + 1)
    assert after.cleaned == ("fruit-prices", 0)
    assert state(store) == [
        (3, b"lime", b"$1.59"),
        (4, b"kiwi", b"$0.30"),
        (5, b"melon", b"$3.10"),
        (6, b"papaya", b"$1.20"),
    ]
    assert store.log_end_offset("fruit-prices", 0) == 7
    assert store.log_start_offset("fruit-prices", 0) == 0


def test_the_delete_horizon_survives_a_restart(
    open_store: StoreFactory, tmp_path: Path, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic(
        "t", 1, {"cleanup.policy": "compact", "delete.retention.ms": DELETE_RETENTION_MS}
    )
    store.append("t", 0, [(b"k", b"v")])
    store.append("t", 0, [(b"k", None)])
    store.roll("t", 0)
    t0 = clock.now
    manager_of(store).clean(t0)
    store.close()
    again = open_store()
    batch = RecordBatch(next(again.log("t", 0).iter_batches(0)).data)
    assert batch.delete_horizon_ms == t0 + DELETE_RETENTION_MS
    assert [(r.offset, r.value) for r in again.read("t", 0)] == [(1, None)]
