"""Generate the golden corpus of segment directories (R21), deterministically.

    python tests/golden/make_corpus.py [OUT_DIR]      # default: tests/golden/corpus

Cases, one data directory each:

* ``normal``: two partitions, several segments, every codec, headers, tombstones, null and
  empty keys and values, sparse offset and time index entries.
* ``compacted``: what a cleaned log looks like: offset gaps inside batches, gaps between
  segments, a 61-byte empty batch that keeps a producer's last offset, a batch stamped with a
  delete horizon (KIP-534).
* ``torn-tail``: ``normal``'s first partition with half a batch left at the end of the active
  segment, as a crash during a write leaves it.
* ``transactions``: transactional batches with COMMIT and ABORT markers (control batches).

The files are checked in; ``test_golden.py`` regenerates them into a scratch directory and
requires every byte to be identical, so any change to what compactlog writes shows up as a
diff here first. Only the random topic id in ``partition.metadata`` and the metadata files
(``compactlog-topics.json`` and each partition's ``compactlog-topic.json``, which hold it) differ
between runs, so they are left out of the corpus.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

from compactlog.records import Compression, build_batch, build_empty_batch
from compactlog.records.control import build_end_txn_marker_batch
from compactlog.storage.store import Store
from compactlog.storage.topic_catalog import PARTITION_CATALOG_FILE, TOPICS_FILE

T0 = 1_700_000_000_000
SKIPPED = {TOPICS_FILE, PARTITION_CATALOG_FILE, "partition.metadata", ".lock"}


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def _store(path: Path) -> tuple[Store, _Clock]:
    clock = _Clock()
    return Store.open(path, clock=clock, rng=random.Random(0)), clock


def normal(path: Path) -> None:
    store, clock = _store(path)
    store.create_topic("orders", 2, {"segment.bytes": 1200, "index.interval.bytes": 200})
    codecs = list(Compression)
    for i in range(24):
        clock.now += 1000
        records: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]] = [
            (b"order-%d" % (i % 7), b"amount=%d" % (i * 13), (("source", b"web"),)),
            (b"order-%d" % ((i + 3) % 7), None if i % 5 == 0 else b"", ()),
        ]
        if i % 6 == 0:
            records.append((None, b"keyless", (("trace", None),)))
        store.append("orders", i % 2, records, compression=codecs[i % len(codecs)])
    store.close()


def compacted(path: Path) -> None:
    store, clock = _store(path)
    store.create_topic("prices", 1, {"cleanup.policy": "compact", "segment.bytes": 4000})
    append = store.log("prices", 0).append
    # Offsets 0..4 with 1 and 3 compacted away.
    append(
        build_batch(
            [(b"grape", b"$2.69"), (b"lime", b"$1.59"), (b"kiwi", b"$0.30")],
            timestamps=[T0, T0 + 2, T0 + 4],
            offset_deltas=[0, 2, 4],
            last_offset_delta=4,
        ),
        from_client=False,
    )
    # A producer's last batch emptied by cleaning: a bare header keeps offsets 5..7.
    append(
        build_empty_batch(
            base_offset=0,
            last_offset_delta=2,
            max_timestamp=T0 + 7,
            producer_id=42,
            producer_epoch=0,
            base_sequence=10,
        ),
        from_client=False,
    )
    # A surviving tombstone whose batch carries the delete horizon.
    append(
        build_batch([(b"grape", None)], timestamps=[T0 + 8], delete_horizon_ms=T0 + 86_400_000),
        from_client=False,
    )
    store.roll("prices", 0)
    clock.now = T0 + 100
    store.append("prices", 0, [(b"kiwi", b"$0.35")], compression="zstd")
    store.close()


def torn_tail(path: Path, normal_dir: Path) -> None:
    shutil.copytree(normal_dir / "orders-0", path / "orders-0")
    for name in sorted(os.listdir(normal_dir)):
        if (normal_dir / name).is_file() and name not in SKIPPED:
            shutil.copy(normal_dir / name, path / name)
    (path / ".kafka_cleanshutdown").unlink(missing_ok=True)
    active = sorted((path / "orders-0").glob("*.log"))[-1]
    whole = build_batch([(b"order-9", b"amount=999")], base_offset=99, timestamps=T0 + 99_000)
    with open(active, "ab") as f:
        f.write(whole[: len(whole) // 2])


def transactions(path: Path) -> None:
    store, clock = _store(path)
    store.create_topic("ledger", 1)
    append = store.log("ledger", 0).append
    for commit, pid in ((True, 7), (False, 8), (True, 7)):
        clock.now += 10
        append(
            build_batch(
                [(b"acct-%d" % pid, b"debit"), (b"acct-%d" % pid, b"credit")],
                timestamps=clock.now,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
            ),
            from_client=False,
        )
        append(
            build_end_txn_marker_batch(
                commit=commit,
                producer_id=pid,
                producer_epoch=0,
                coordinator_epoch=3,
                timestamp=clock.now + 1,
            ),
            from_client=False,
        )
    store.close()


def generate(out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    normal(out / "normal")
    compacted(out / "compacted")
    (out / "torn-tail").mkdir()
    torn_tail(out / "torn-tail", out / "normal")
    transactions(out / "transactions")
    for root, _dirs, names in os.walk(out):
        for name in names:
            if name in SKIPPED:
                os.remove(os.path.join(root, name))


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "corpus")
