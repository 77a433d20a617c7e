"""Idempotent producers' state (Kafka's ``ProducerStateManager``): the sequence and epoch rules
of client appends, duplicates, the ``.snapshot`` file format, loading after a clean or an
unclean stop, expiration, and snapshots going with their segments."""

from __future__ import annotations

import os
import random
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import crc32c
import pytest

from compactlog.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidRequestError,
    OutOfOrderSequenceError,
    ProducerStateError,
)
from compactlog.records import Compression, build_batch, build_end_txn_marker_batch
from compactlog.storage.fs import OsFileSystem
from compactlog.storage.producer_snapshot import SnapshotEntry, decode_snapshot
from compactlog.storage.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerState,
    ProducerStateEntry,
    read_snapshot,
    write_snapshot,
)
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import manager_of
from tests.support.faultfs import FaultInjectingFileSystem, SimulatedCrash

StoreFactory = Callable[..., Store]
T = "t"
DAY = 86_400_000
INT32_MAX = 2**31 - 1


def idempotent(
    seq: int,
    count: int = 1,
    *,
    pid: int = 1,
    epoch: int = 0,
    ts: int = 1_700_000_000_000,
    key: bytes = b"k",
    compression: Compression = Compression.NONE,
) -> bytes:
    """A producer's batch of ``count`` records starting at sequence ``seq``."""
    return build_batch(
        [(key, b"v%d" % i) for i in range(count)],
        timestamps=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        compression=compression,
    )


def new_store(open_store: StoreFactory, **config: Any) -> Store:
    store: Store = open_store()
    store.create_topic(T, 1, {k.replace("_", "."): v for k, v in config.items()})
    return store


def snapshot_names(store: Store) -> list[str]:
    directory = store.log(T, 0).dir
    return sorted(n for n in os.listdir(directory) if ".snapshot" in n)


# --- sequences and epochs --------------------------------------------------------------------


def test_batches_in_sequence_are_appended_and_remembered(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    first = store.append_batch_info(T, 0, idempotent(0, 3, ts=clock.now))
    second = store.append_batch_info(T, 0, idempotent(3, 2, ts=clock.now + 5))
    assert (first.first_offset, first.last_offset, first.duplicate) == (0, 2, False)
    assert (second.first_offset, second.last_offset, second.duplicate) == (3, 4, False)
    assert store.producer_state(T, 0) == [ProducerState(1, 0, 4, 4, clock.now + 5, -1, -1)]
    entry = store.log(T, 0).producer_state_manager.last_entry(1)
    assert entry is not None
    assert entry.batches == (
        BatchMetadata(2, 2, 2, clock.now),
        BatchMetadata(4, 4, 1, clock.now + 5),
    )


def test_an_unknown_producer_may_start_at_any_sequence(open_store: StoreFactory) -> None:
    # Kafka: with no epoch known (all of its data gone), any sequence is accepted.
    store = new_store(open_store)
    store.append_batch(T, 0, idempotent(42, 2))
    store.append_batch(T, 0, idempotent(44))
    assert store.producer_state(T, 0)[0].last_sequence == 44


def test_a_gap_is_out_of_order_and_nothing_is_written(open_store: StoreFactory) -> None:
    store = new_store(open_store)
    store.append_batch(T, 0, idempotent(0, 2))
    with pytest.raises(OutOfOrderSequenceError) as info:
        store.append_batch(T, 0, idempotent(3))
    assert info.value.error_code == 45
    assert isinstance(info.value, ProducerStateError)
    assert store.log_end_offset(T, 0) == 2
    store.append_batch(T, 0, idempotent(2))  # the right one still goes
    assert store.log_end_offset(T, 0) == 3


def test_a_retry_of_each_of_the_last_five_batches_returns_its_offsets(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    sent = []
    seq = 0
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        raw = idempotent(seq, i + 1, ts=clock.now + i)
        info = store.append_batch_info(T, 0, raw)
        sent.append((raw, info.first_offset, info.last_offset))
        seq += i + 1
    end = store.log_end_offset(T, 0)
    data = store.log(T, 0).read(0, 1 << 20)
    for i, (raw, first, last) in enumerate(sent[1:], start=1):
        retry = store.append_batch_info(T, 0, raw)
        assert retry.duplicate, i
        assert (retry.first_offset, retry.last_offset) == (first, last)
        assert retry.log_append_time == clock.now + i  # the earlier batch's max timestamp
        assert retry.data == b""
    assert store.log_end_offset(T, 0) == end
    assert store.log(T, 0).read(0, 1 << 20) == data
    # The sixth most recent is forgotten: its retry is out of sequence (Kafka's answer).
    with pytest.raises(OutOfOrderSequenceError):
        store.append_batch(T, 0, sent[0][0])
    # append_batch answers a retry with the first offset it got the first time.
    assert store.append_batch(T, 0, sent[-1][0]) == sent[-1][1]


def test_a_retry_on_a_log_append_time_topic_answers_the_first_append_time(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, message_timestamp_type="LogAppendTime")
    raw = idempotent(0, 2)
    first = store.append_batch_info(T, 0, raw)
    assert first.log_append_time == clock.now
    appended_at = clock.now
    clock.advance(1000)
    retry = store.append_batch_info(T, 0, raw)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset, retry.log_append_time) == (0, 1, appended_at)


def test_a_retry_after_another_producer_wrote_is_still_a_duplicate(
    open_store: StoreFactory,
) -> None:
    store = new_store(open_store)
    raw = idempotent(0, pid=1)
    store.append_batch(T, 0, raw)
    store.append_batch(T, 0, idempotent(0, pid=2))
    store.append(T, 0, [(b"x", b"y")])
    assert store.append_batch_info(T, 0, raw).duplicate
    assert store.log_end_offset(T, 0) == 3


def test_a_new_epoch_starts_at_sequence_zero(open_store: StoreFactory) -> None:
    store = new_store(open_store)
    store.append_batch(T, 0, idempotent(0, 3, epoch=0))
    with pytest.raises(OutOfOrderSequenceError):
        store.append_batch(T, 0, idempotent(3, epoch=1))
    store.append_batch(T, 0, idempotent(0, epoch=1))
    state = store.producer_state(T, 0)[0]
    assert (state.producer_epoch, state.last_sequence, state.last_offset) == (1, 0, 3)
    entry = store.log(T, 0).producer_state_manager.last_entry(1)
    assert entry is not None and len(entry.batches) == 1  # the old epoch's batches are gone
    # A retry from the old epoch is no duplicate: its epoch is fenced.
    with pytest.raises(InvalidProducerEpochError):
        store.append_batch(T, 0, idempotent(0, 3, epoch=0))


def test_an_older_epoch_is_refused(open_store: StoreFactory) -> None:
    store = new_store(open_store)
    store.append_batch(T, 0, idempotent(0, epoch=5))
    with pytest.raises(InvalidProducerEpochError) as info:
        store.append_batch(T, 0, idempotent(1, epoch=4))
    assert info.value.error_code == 47
    assert store.log_end_offset(T, 0) == 1


def test_sequences_wrap_at_int32_max(open_store: StoreFactory) -> None:
    store = new_store(open_store)
    store.append_batch(T, 0, idempotent(INT32_MAX - 1, 2))
    assert store.producer_state(T, 0)[0].last_sequence == INT32_MAX
    with pytest.raises(OutOfOrderSequenceError):
        store.append_batch(T, 0, idempotent(1))
    store.append_batch(T, 0, idempotent(0, 2))
    assert store.producer_state(T, 0)[0].last_sequence == 1
    # A batch that itself wraps: sequences MAX, 0, 1; its retry is recognised.
    store.create_topic("w", 1)
    store.append_batch("w", 0, idempotent(INT32_MAX, 3))
    retry = store.append_batch_info("w", 0, idempotent(INT32_MAX, 3))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (0, 2)
    assert store.producer_state("w", 0)[0].last_sequence == 1
    store.append_batch("w", 0, idempotent(2))


def test_producers_are_independent(open_store: StoreFactory) -> None:
    store = new_store(open_store)
    store.append_batch(T, 0, idempotent(0, pid=1))
    store.append_batch(T, 0, idempotent(7, pid=2))
    store.append_batch(T, 0, idempotent(1, pid=1))
    with pytest.raises(OutOfOrderSequenceError):
        store.append_batch(T, 0, idempotent(9, pid=2))
    assert [
        (p.producer_id, p.last_sequence, p.last_offset) for p in store.producer_state(T, 0)
    ] == [
        (1, 1, 2),
        (2, 7, 1),
    ]


def test_what_the_validator_refuses(open_store: StoreFactory) -> None:
    store = new_store(open_store)
    with pytest.raises(InvalidRequestError) as txn:
        store.append_batch(
            T,
            0,
            build_batch(
                [(b"k", b"v")],
                producer_id=1,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
            ),
        )
    assert txn.value.error_code == 42
    with pytest.raises(InvalidRecordError, match="Invalid sequence number -1"):
        store.append_batch(T, 0, build_batch([(b"k", b"v")], producer_id=1, producer_epoch=0))
    with pytest.raises(InvalidRecordError, match="exactly one record batch"):
        store.append_batch(T, 0, idempotent(0) + idempotent(1))
    assert store.log_end_offset(T, 0) == 0
    assert store.producer_state(T, 0) == []


def test_the_logs_own_appends_are_not_checked(open_store: StoreFactory) -> None:
    """``from_client=False`` is Kafka's replication origin: no sequence check, no duplicate
    detection, an older epoch only warns; the state follows what is written."""
    store = new_store(open_store)
    store.append_batch(T, 0, idempotent(0, epoch=3), from_client=False)
    store.append_batch(T, 0, idempotent(10, epoch=3), from_client=False)
    store.append_batch(T, 0, idempotent(10, epoch=3), from_client=False)
    store.append_batch(T, 0, idempotent(0, epoch=2), from_client=False)
    assert store.log_end_offset(T, 0) == 4
    state = store.producer_state(T, 0)[0]
    assert (state.producer_epoch, state.last_sequence, state.last_offset) == (2, 0, 3)


def test_a_transaction_marker_sets_the_epoch_and_clears_the_transaction(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    txn = build_batch(
        [(b"k", b"v")],
        timestamps=clock.now,
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
        is_transactional=True,
    )
    store.append_batch(T, 0, txn, from_client=False)
    assert store.producer_state(T, 0) == [ProducerState(9, 1, 0, 0, clock.now, -1, 0)]
    marker = build_end_txn_marker_batch(
        commit=True, producer_id=9, producer_epoch=1, coordinator_epoch=4, timestamp=clock.now + 1
    )
    store.append_batch(T, 0, marker, from_client=False)
    assert store.producer_state(T, 0) == [ProducerState(9, 1, 0, 0, clock.now + 1, 4, -1)]
    records = store.log(T, 0).last_records_of_active_producers()
    assert records[9].last_data_offset == 0


# --- the snapshot file -------------------------------------------------------------------------


def test_the_snapshot_file_layout_field_by_field(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    store.append_batch(T, 0, idempotent(0, 3, pid=7, epoch=2, ts=clock.now))  # 0-2
    store.append(T, 0, [(b"x", b"y")])  # 3
    store.append_batch(T, 0, idempotent(5, 2, pid=3, epoch=0, ts=clock.now + 9))  # 4-5
    store.roll(T, 0)  # a snapshot at the new segment's base offset, 6
    path = Path(store.log(T, 0).dir) / "00000000000000000006.snapshot"
    data = path.read_bytes()
    assert len(data) == 2 + 4 + 4 + 2 * 46
    version, crc, count = struct.unpack_from(">hIi", data, 0)
    assert (version, count) == (1, 2)
    assert crc == crc32c.crc32c(data[6:])
    entry = struct.Struct(">qhiqiqiq")
    # Producer ids in order; lastSequence, lastOffset, offsetDelta of the last batch; timestamp,
    # coordinatorEpoch -1 and currentTxnFirstOffset -1 (no transaction).
    assert entry.unpack_from(data, 10) == (3, 0, 6, 5, 1, clock.now + 9, -1, -1)
    assert entry.unpack_from(data, 56) == (7, 2, 2, 2, 2, clock.now, -1, -1)
    # Read back: one batch of metadata per producer (only the last batch is written).
    entries = read_snapshot(OsFileSystem(), str(path))
    assert [(e.producer_id, e.producer_epoch, e.batches, e.last_timestamp) for e in entries] == [
        (3, 0, (BatchMetadata(6, 5, 1, clock.now + 9),), clock.now + 9),
        (7, 2, (BatchMetadata(2, 2, 2, clock.now),), clock.now),
    ]


def test_a_hand_written_snapshot_is_read(tmp_path: Path) -> None:
    """The bytes built from the documented layout alone, including a producer without batch
    metadata (only markers) and one in a transaction."""
    body = struct.pack(">i", 2)
    body += struct.pack(">qhiqiqiq", 11, 4, -1, -1, 0, 1234, 7, -1)
    body += struct.pack(">qhiqiqiq", 12, 0, 9, 100, 3, 5678, -1, 97)
    data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    path = tmp_path / "00000000000000000101.snapshot"
    path.write_bytes(data)
    assert decode_snapshot(data) == [
        SnapshotEntry(11, 4, -1, -1, 0, 1234, 7, -1),
        SnapshotEntry(12, 0, 9, 100, 3, 5678, -1, 97),
    ]
    markers_only, in_txn = read_snapshot(OsFileSystem(), str(path))
    assert (markers_only.batches, markers_only.coordinator_epoch, markers_only.last_seq) == (
        (),
        7,
        -1,
    )
    assert markers_only.current_txn_first_offset is None
    assert in_txn.batches == (BatchMetadata(9, 100, 3, 5678),)
    assert (in_txn.first_seq, in_txn.current_txn_first_offset) == (6, 97)
    # Written back, the same bytes.
    copy = tmp_path / "copy.snapshot"
    write_snapshot(OsFileSystem(), str(copy), [in_txn, markers_only], sync=False)
    assert copy.read_bytes() == data


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:5],  # shorter than the header
        lambda d: struct.pack(">h", 2) + d[2:],  # unknown version
        lambda d: d[:-1],  # the count claims more than is there
        lambda d: d[:-1] + bytes([d[-1] ^ 1]),  # CRC mismatch
        lambda d: d[:6] + struct.pack(">i", -1) + d[10:],  # negative count
    ],
)
def test_damaged_snapshots_are_corrupt(damage: Callable[[bytes], bytes]) -> None:
    entry = ProducerStateEntry(1, 0, batches=[BatchMetadata(0, 0, 0, 5)])
    fs = OsFileSystem()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "00000000000000000001.snapshot")
        write_snapshot(fs, path, [entry], sync=False)
        with open(path, "rb") as f:
            data = f.read()
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(damage(data))


def test_snapshots_are_taken_at_rolls_and_at_close_only_when_the_state_moved(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = new_store(open_store)
    store.append_batch(T, 0, idempotent(0))
    store.roll(T, 0)
    store.roll(T, 0)  # an empty active segment: nothing to roll, no snapshot
    assert snapshot_names(store) == ["00000000000000000001.snapshot"]
    store.append(T, 0, [(b"a", b"b")])
    store.close()
    names = sorted(n for n in os.listdir(tmp_path / "data" / "t-0") if ".snapshot" in n)
    assert names == ["00000000000000000001.snapshot", "00000000000000000002.snapshot"]
    again = open_store()
    again.close()  # loaded at the log end: no new snapshot
    assert sorted(n for n in os.listdir(tmp_path / "data" / "t-0") if ".snapshot" in n) == names


# --- loading -----------------------------------------------------------------------------------


def _fill(store: Store, clock: ManualClock, rng: random.Random, batches: int) -> dict[int, int]:
    """Appends from three producers (one bumps its epoch), plain appends and rolls, going on
    from the producers' state in the log; returns the next sequence of each producer."""
    seqs = {1: 0, 2: 0, 3: 0}
    epoch3 = 0
    for p in store.producer_state(T, 0):
        seqs[p.producer_id] = (p.last_sequence + 1) % (INT32_MAX + 1)
        if p.producer_id == 3:
            epoch3 = p.producer_epoch
    for i in range(batches):
        pid = rng.choice([1, 2, 3])
        if pid == 3 and rng.random() < 0.2:
            epoch3, seqs[3] = epoch3 + 1, 0
        count = rng.randint(1, 4)
        codec = rng.choice([Compression.NONE, Compression.GZIP])
        store.append_batch(
            T,
            0,
            idempotent(
                seqs[pid],
                count,
                pid=pid,
                epoch=epoch3 if pid == 3 else 0,
                ts=clock.now,
                key=b"k%d" % (i % 5),
                compression=codec,
            ),
        )
        seqs[pid] = (seqs[pid] + count) % (INT32_MAX + 1)
        if rng.random() < 0.3:
            store.append(T, 0, [(b"plain", b"%d" % i)])
        if rng.random() < 0.25:
            store.roll(T, 0)
        clock.advance(1)
    return seqs


def expected_state(store: Store) -> list[ProducerState]:
    """The state a clean run over the log's batches builds, computed from the batches alone."""
    log = store.log(T, 0)
    found: dict[int, ProducerState] = {}
    for batch in log.iter_batches(log.log_start_offset):
        h = batch.header
        if h.has_producer_id:
            found[h.producer_id] = ProducerState(
                h.producer_id,
                h.producer_epoch,
                h.last_sequence,
                h.last_offset,
                h.max_timestamp,
                -1,
                -1,
            )
    return [found[p] for p in sorted(found)]


def test_a_clean_restart_restores_the_state(open_store: StoreFactory, clock: ManualClock) -> None:
    store = new_store(open_store, segment_bytes=1000)
    seqs = _fill(store, clock, random.Random(1), 60)
    before = store.producer_state(T, 0)
    assert before == expected_state(store)
    last = store.log(T, 0).producer_state_manager.last_entry(2)
    assert last is not None
    store.close()
    again = open_store()
    assert again.producer_state(T, 0) == before
    # The appends go on in sequence, and a retry of each producer's last batch is known.
    again.append_batch(T, 0, idempotent(seqs[1], pid=1, ts=clock.now))
    batch = last.batches[-1]
    retry = idempotent(batch.first_seq, batch.offset_delta + 1, pid=2, ts=clock.now)
    info = again.append_batch_info(T, 0, retry)
    assert info.duplicate and info.last_offset == last.last_data_offset


def test_an_unclean_restart_replays_the_log_after_the_last_snapshot(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, segment_bytes=1000)
    _fill(store, clock, random.Random(2), 60)
    before = store.producer_state(T, 0)
    store.flush()
    store.abandon()
    again = open_store()
    assert not again.had_clean_shutdown
    assert again.producer_state(T, 0) == before == expected_state(again)


def test_a_corrupt_snapshot_is_ignored_and_the_state_rebuilt(
    open_store: StoreFactory, clock: ManualClock, tmp_path: Path
) -> None:
    store = new_store(open_store, segment_bytes=1000)
    _fill(store, clock, random.Random(3), 50)
    before = store.producer_state(T, 0)
    store.close()
    directory = tmp_path / "data" / "t-0"
    latest = max(n for n in os.listdir(directory) if n.endswith(".snapshot"))
    damaged = bytearray((directory / latest).read_bytes())
    damaged[-1] ^= 0xFF
    (directory / latest).write_bytes(bytes(damaged))
    again = open_store()
    assert again.producer_state(T, 0) == before
    # Deleted, and written again (intact) at the log end once the state was rebuilt.
    assert decode_snapshot((directory / latest).read_bytes())


def test_a_log_without_snapshots_after_a_clean_stop_is_not_scanned(
    open_store: StoreFactory, clock: ManualClock, tmp_path: Path
) -> None:
    """Kafka's upgrade path: no snapshot and a clean shutdown mean a log written before producer
    state existed; the state starts empty (snapshots are written so the next load is quick)."""
    store = new_store(open_store, segment_bytes=1000)
    _fill(store, clock, random.Random(4), 30)
    store.close()
    directory = tmp_path / "data" / "t-0"
    for name in os.listdir(directory):
        if name.endswith(".snapshot"):
            os.remove(directory / name)
    again = open_store()
    assert again.producer_state(T, 0) == []
    assert snapshot_names(again)
    again.append_batch(T, 0, idempotent(1000, pid=1))  # any sequence: the producer is unknown


def test_snapshots_outside_the_log_are_removed_at_load(
    open_store: StoreFactory, clock: ManualClock, tmp_path: Path
) -> None:
    store = new_store(open_store, segment_bytes=1000)
    _fill(store, clock, random.Random(5), 30)
    before = store.producer_state(T, 0)
    end = store.log_end_offset(T, 0)
    bases = [s.base_offset for s in store.segments(T, 0)]
    store.close()
    directory = tmp_path / "data" / "t-0"
    good = directory / f"{end:020d}.snapshot"
    # A stray one between segments, and one beyond the log end (a crash lost that data).
    shutil.copy(good, directory / f"{bases[1] + 1:020d}.snapshot")
    shutil.copy(good, directory / f"{end + 50:020d}.snapshot")
    again = open_store()
    assert again.producer_state(T, 0) == before
    names = snapshot_names(again)
    assert f"{bases[1] + 1:020d}.snapshot" not in names
    assert f"{end + 50:020d}.snapshot" not in names
    assert f"{end:020d}.snapshot" in names


# --- crashes -----------------------------------------------------------------------------------

RAM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


@pytest.fixture
def work_dir(tmp_path: Path) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="producer-state-", dir=RAM_DIR or tmp_path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _crash_workload(data: Path, fs: Any, now: int) -> None:
    clock = ManualClock(now)
    store = Store.open(data, clock, fs=fs)
    try:
        _fill(store, clock, random.Random(7), 12)
        store.close()
    except SimulatedCrash:
        # The crash closed the store's files; only the directory lock (plain os calls, outside
        # the filesystem seam) is left to release, as the kernel would for a killed process.
        store._release()
        raise


def test_every_crash_point_recovers_the_state_a_clean_run_builds(work_dir: Path) -> None:
    """Crash at every mutating call of a run of appends, rolls and the close (and tear every
    write, snapshots included); after the restart the state is what the surviving batches give,
    a clean close and reopen keeps it, and the producers can go on."""
    now = 1_700_000_000_000
    pristine = work_dir / "pristine"
    clock = ManualClock(now)
    with Store.open(pristine, clock) as store:
        store.create_topic(T, 1, {"segment.bytes": 700})
        _fill(store, clock, random.Random(6), 10)
    scratch = work_dir / "count"
    shutil.copytree(pristine, scratch)
    traced = FaultInjectingFileSystem()
    _crash_workload(scratch, traced, clock.now)
    assert traced.trace is not None
    writes = {c.number for c in traced.trace if c.op in ("write_at", "append")}
    snapshot_writes = {n for n in writes if traced.trace[n - 1].path.endswith(".snapshot")}
    n = len(traced.trace)
    assert n > 50 and snapshot_writes
    checked = 0
    for k in range(1, n + 1):
        for torn in (False, True) if k in writes else (False,):
            data = work_dir / f"crash-{k}-{torn}"
            shutil.copytree(pristine, data)
            fs = FaultInjectingFileSystem()
            fs.crash_at(k, partial_write=random.Random(k) if torn else False)
            with pytest.raises(SimulatedCrash):
                _crash_workload(data, fs, clock.now)
            context = f"crash at call {k} (torn={torn}), trace: {fs.trace and fs.trace[-3:]}"
            with Store.open(data, ManualClock(clock.now + 100)) as store:
                state = store.producer_state(T, 0)
                assert state == expected_state(store), context
            with Store.open(data, ManualClock(clock.now + 100)) as store:
                assert store.producer_state(T, 0) == state, context
                for p in state:
                    nxt = (p.last_sequence + 1) % (INT32_MAX + 1)
                    store.append_batch(
                        T, 0, idempotent(nxt, pid=p.producer_id, epoch=p.producer_epoch)
                    )
            shutil.rmtree(data)
            checked += 1
    assert checked == n + len(writes)


# --- expiration --------------------------------------------------------------------------------


def test_producers_expire_after_producer_id_expiration_ms(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config={"producer.id.expiration.ms": 1000})
    store.create_topic(T, 1)
    store.append_batch(T, 0, idempotent(0, pid=1, ts=clock.now))
    store.append_batch(T, 0, idempotent(0, pid=2, ts=clock.now + 500))
    log = store.log(T, 0)
    assert set(log.last_records_of_active_producers(clock.now + 999)) == {1, 2}
    assert set(log.last_records_of_active_producers(clock.now + 1000)) == {2}
    clock.advance(1000)
    assert store.remove_expired_producers() == 1
    assert [p.producer_id for p in store.producer_state(T, 0)] == [2]
    # An expired producer is unknown again: any sequence goes.
    store.append_batch(T, 0, idempotent(77, pid=1, ts=clock.now))
    assert store.remove_expired_producers() == 0


def test_expired_producers_are_dropped_when_a_snapshot_is_loaded(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config={"producer.id.expiration.ms": DAY})
    store.create_topic(T, 1)
    store.append_batch(T, 0, idempotent(0, pid=1, ts=clock.now - DAY + 10))
    store.append_batch(T, 0, idempotent(0, pid=2, ts=clock.now))
    store.close()
    clock.advance(10)
    again = open_store(config={"producer.id.expiration.ms": DAY})
    assert [p.producer_id for p in again.producer_state(T, 0)] == [2]


def test_the_check_interval_is_a_broker_config() -> None:
    from compactlog.storage.config import BROKER_CONFIGS, BrokerConfig

    assert BrokerConfig.from_dict({}).producer_id_expiration_check_interval_ms == 600_000
    assert BROKER_CONFIGS["producer.id.expiration.check.interval.ms"].internal


# --- snapshots go with their segments ---------------------------------------------------------


def test_retention_deletes_the_snapshots_of_deleted_segments(
    open_store: StoreFactory, clock: ManualClock, tmp_path: Path
) -> None:
    store = new_store(open_store, retention_bytes=1, file_delete_delay_ms=1000)
    for seq in range(4):
        store.append_batch(T, 0, idempotent(seq, ts=clock.now))
        store.roll(T, 0)
    assert snapshot_names(store) == [f"{o:020d}.snapshot" for o in (1, 2, 3, 4)]
    state = store.producer_state(T, 0)
    assert store.run_retention() == 3  # segments 0, 1, 2 (the last one with data stays)
    assert store.log_start_offset(T, 0) == 3
    kept = ["00000000000000000003.snapshot", "00000000000000000004.snapshot"]
    assert snapshot_names(store) == [
        *(f"{o:020d}.snapshot.deleted" for o in (1, 2)),
        *kept,
    ]
    clock.advance(1000)
    store.log(T, 0).remove_deleted_files()
    assert snapshot_names(store) == kept
    # The state itself stays (Kafka keeps it in memory), and survives a restart.
    assert store.producer_state(T, 0) == state
    store.close()
    assert open_store().producer_state(T, 0) == state


def test_delete_records_moves_the_state_offsets(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, cleanup_policy="delete")
    for seq in range(3):
        store.append_batch(T, 0, idempotent(seq, ts=clock.now))
    store.roll(T, 0)
    store.delete_records(T, 0, 3)
    store.run_retention()
    manager = store.log(T, 0).producer_state_manager
    assert manager.map_end_offset == 3
    assert manager.snapshot_offsets() == [3]


def test_cleaning_deletes_the_snapshots_of_the_segments_it_merges(
    open_store: StoreFactory, clock: ManualClock
) -> None:

    store = new_store(
        open_store, cleanup_policy="compact", file_delete_delay_ms=1000, segment_bytes=100_000
    )
    for seq in range(4):
        store.append_batch(T, 0, idempotent(seq, ts=clock.now, key=b"k%d" % seq))
        store.roll(T, 0)
    assert snapshot_names(store) == [f"{o:020d}.snapshot" for o in (1, 2, 3, 4)]
    manager_of(store).clean_log(T, 0, clock.now)
    # One group [0, 4) replaced segments 0-3: the snapshots at 1, 2, 3 go with them; the one at
    # the group's own base (none here) and at the active segment's base stay.
    assert [s.base_offset for s in store.segments(T, 0)] == [0, 4]
    assert snapshot_names(store) == [
        *(f"{o:020d}.snapshot.deleted" for o in (1, 2, 3)),
        "00000000000000000004.snapshot",
    ]
    clock.advance(1000)
    store.log(T, 0).remove_deleted_files()
    assert snapshot_names(store) == ["00000000000000000004.snapshot"]


def test_the_background_task_removes_expired_producers(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    import time

    store = open_store(
        config={"producer.id.expiration.ms": 1000, "producer.id.expiration.check.interval.ms": 5}
    )
    store.create_topic(T, 1)
    store.append_batch(T, 0, idempotent(0, ts=clock.now))
    clock.advance(1000)
    manager_of(store).start()
    deadline = time.monotonic() + 10
    while store.producer_state(T, 0) and time.monotonic() < deadline:
        time.sleep(0.01)
    manager_of(store).stop()
    assert store.producer_state(T, 0) == []
