"""Recovery at start-up (spec 1.5, 1.6) and reliability tests R3, R5 and R6 at their CI tiers."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.storage.datadir import CLEAN_SHUTDOWN_FILE
from compactlog.storage.fs import OsFileSystem
from compactlog.storage.quarantine import QuarantinedRange, list_quarantined
from compactlog.storage.store import Store
from tests.conftest import ManualClock

StoreFactory = Callable[..., Store]


def seg_dir(tmp_path: Path, topic: str = "t", partition: int = 0) -> Path:
    return tmp_path / "data" / f"{topic}-{partition}"


def fill(
    store: Store, batches: int, *, topic: str = "t", rng: random.Random | None = None
) -> list[int]:
    """Append ``batches`` batches of 1-5 records with unique values; returns their base offsets."""
    rng = rng or random.Random(0)
    bases = []
    for _ in range(batches):
        n = rng.randint(1, 5)
        end = store.log_end_offset(topic, 0)
        bases.append(
            store.append(
                topic, 0, [(b"k%d" % (end + i), b"value-%d" % (end + i)) for i in range(n)]
            )
        )
    return bases


def values(store: Store, topic: str = "t") -> list[bytes | None]:
    return [r.value for r in store.read(topic, 0)]


def test_clean_shutdown_recovers_nothing(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    store.create_topic("t", 1, {"segment.bytes": 500})
    fill(store, 100)
    store.close()
    assert (tmp_path / "data" / CLEAN_SHUTDOWN_FILE).exists()
    again = open_store()
    assert again.had_clean_shutdown
    assert not (tmp_path / "data" / CLEAN_SHUTDOWN_FILE).exists()  # removed at once on open
    stats = again.load_stats[("t", 0)]
    assert stats.segments_recovered == 0 and stats.indexes_rebuilt == 0


def test_unclean_stop_recovers_only_from_the_recovery_point(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"segment.bytes": 500})
    fill(store, 60)
    store.flush()  # recovery point = LEO, checkpoint written
    flushed_segments = len(store.segments("t", 0))
    fill(store, 60)
    total_segments = len(store.segments("t", 0))
    expected = values(store)
    store.abandon()
    again = open_store()
    stats = again.load_stats[("t", 0)]
    assert not again.had_clean_shutdown
    # the segment holding the recovery point and every later one; rolls flush too
    assert 1 <= stats.segments_recovered <= total_segments - flushed_segments + 1
    assert stats.bytes_truncated == 0
    assert values(again) == expected


def test_torn_tail_is_truncated_and_appends_continue(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("t", 1)
    bases = fill(store, 10)
    expected = values(store)
    store.abandon()
    log = seg_dir(tmp_path) / "00000000000000000000.log"
    with open(log, "ab") as f:
        f.write(b"\x00" * 8 + b"\x00\x00\x01\x00" + b"partial")  # claims 256 bytes, has 11
    again = open_store()
    assert again.load_stats[("t", 0)].bytes_truncated == 19
    assert values(again) == expected
    end = again.log_end_offset("t", 0)
    assert again.append("t", 0, [(b"k", b"new")]) == end
    assert bases[0] == 0


def quarantined(tmp_path: Path, topic: str = "t") -> list[QuarantinedRange]:
    return list_quarantined(OsFileSystem(), str(seg_dir(tmp_path, topic)))


@pytest.mark.parametrize("seed", range(100))
def test_r3_garbage_tail(open_store: StoreFactory, tmp_path: Path, seed: int) -> None:
    """R3: overwrite from a random batch (+0-15 bytes) to the end of its segment with random
    bytes. The cut bytes go to quarantine first; every later segment is kept (salvage)."""
    rng = random.Random(seed)
    store = open_store()
    store.create_topic("t", 1, {"segment.bytes": 4000})
    bases = fill(store, rng.randint(20, 200), rng=rng)
    segments = store.segments("t", 0)
    log = store.log("t", 0)
    end = log.log_end_offset
    by_offset = {r.offset: r.value for r in store.read("t", 0)}
    positions = []  # (segment index, position, base offset) of every batch
    for i, seg in enumerate(log.segments()):
        for batch in seg.batches():
            positions.append((i, batch.position, batch.header.base_offset))
    store.abandon()  # nothing was flushed: every segment is after the recovery point
    seg_i, position, base = rng.choice(positions)
    path = Path(segments[seg_i].path)
    cut = position + rng.randint(0, 15)
    data = path.read_bytes()
    garbage = bytes(rng.getrandbits(8) for _ in range(max(len(data) - cut, 1)))
    if cut == position and garbage[8:12] == data[position + 8 : position + 12]:
        garbage = bytes([garbage[0] ^ 1]) + garbage[1:]
    damaged = data[:cut] + garbage
    path.write_bytes(damaged)
    segment_end = segments[seg_i + 1].base_offset if seg_i + 1 < len(segments) else end
    again = open_store()
    stats = again.load_stats[("t", 0)]
    last = seg_i == len(segments) - 1
    assert again.log_end_offset("t", 0) == (base if last else end), f"seed {seed}"
    assert [s.base_offset for s in again.segments("t", 0)] == [s.base_offset for s in segments], (
        f"seed {seed}"
    )
    assert stats.bytes_truncated == len(damaged) - position, f"seed {seed}"
    [kept] = quarantined(tmp_path)
    assert Path(kept.path).read_bytes() == damaged[position:], f"seed {seed}"
    assert (kept.start, kept.first_offset) == (position, base), f"seed {seed}"
    survivors = {o: v for o, v in by_offset.items() if not base <= o < segment_end}
    assert {r.offset: r.value for r in again.read("t", 0)} == survivors, f"seed {seed}"
    leo = again.log_end_offset("t", 0)
    assert again.append("t", 0, [(b"k", b"after")]) == leo, f"seed {seed}"
    assert [r.value for r in again.read("t", 0, leo)] == [b"after"]
    assert base in bases


def test_bit_flip_above_the_recovery_point_is_cut_and_later_batches_kept(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("t", 1)
    fill(store, 10)
    store.flush()
    fill(store, 10)
    log = store.log("t", 0)
    end = log.log_end_offset
    batches = list(log.active_segment.batches())
    victim = batches[15]
    lost = range(victim.header.base_offset, victim.header.next_offset)
    expected = {r.offset: r.value for r in store.read("t", 0) if r.offset not in lost}
    store.abandon()
    path = seg_dir(tmp_path) / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[victim.position + 40] ^= 0x10  # inside the CRC-covered header (max timestamp)
    path.write_bytes(bytes(data))
    again = open_store()
    assert again.log_end_offset("t", 0) == end
    assert again.load_stats[("t", 0)].bytes_truncated == len(victim.data)
    assert {r.offset: r.value for r in again.read("t", 0)} == expected
    [kept] = quarantined(tmp_path)
    assert Path(kept.path).read_bytes() == bytes(data[victim.position :][: len(victim.data)])
    assert kept.offsets == f"{lost.start}..{lost.stop - 1}"


def test_bit_flip_below_the_recovery_point_is_not_recovered_but_never_served(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    from compactlog.errors import CorruptRecordError

    store = open_store()
    store.create_topic("t", 1, {"segment.bytes": 400})
    fill(store, 30)
    store.flush()
    first = store.segments("t", 0)[0]
    end = store.log_end_offset("t", 0)
    store.close()
    path = Path(first.path)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # a record byte of the last batch of the first segment
    path.write_bytes(bytes(data))
    again = open_store()
    assert again.log_end_offset("t", 0) == end  # below the recovery point: not re-checked
    with pytest.raises(CorruptRecordError):
        list(again.read("t", 0))


def _damage_cases() -> list[str]:
    return ["delete-all", "truncate-odd", "zero-fill", "out-of-order", "orphan", "time-zero"]


@pytest.mark.parametrize("case", _damage_cases())
def test_r5_index_damage_is_rebuilt(open_store: StoreFactory, tmp_path: Path, case: str) -> None:
    store = open_store()
    store.create_topic("t", 1, {"segment.bytes": 2000, "index.interval.bytes": 150})
    fill(store, 120, rng=random.Random(5))
    store.close()
    # What a fresh rebuild gives: indexes rebuilt from the logs in a scratch copy.
    d = seg_dir(tmp_path)
    fresh = tmp_path / "fresh"
    shutil.copytree(tmp_path / "data", fresh)
    for name in os.listdir(fresh / "t-0"):
        if name.endswith((".index", ".timeindex")):
            os.remove(fresh / "t-0" / name)
    indexes = sorted(n for n in os.listdir(d) if n.endswith(".index"))
    rng = random.Random(case)
    victim = d / rng.choice(indexes[:-1])
    if case == "delete-all":
        for name in os.listdir(d):
            if name.endswith((".index", ".timeindex")):
                os.remove(d / name)
    elif case == "truncate-odd":
        raw = victim.read_bytes()
        victim.write_bytes(raw[: len(raw) - 3])
    elif case == "zero-fill":
        victim.write_bytes(b"\x00" * victim.stat().st_size)
    elif case == "out-of-order":
        raw = victim.read_bytes()
        entries = [raw[i : i + 8] for i in range(0, len(raw), 8)]
        assert len(entries) >= 2
        victim.write_bytes(b"".join(reversed(entries)))
    elif case == "orphan":
        (d / "00000000000000999999.index").write_bytes(b"\x00" * 16)
        (d / "00000000000000999999.timeindex").write_bytes(b"")
    elif case == "time-zero":
        tvictim = victim.with_suffix(".timeindex")
        tvictim.write_bytes(b"\x00" * tvictim.stat().st_size)
    again = open_store()
    reference = Store.open(fresh, clock=ManualClock())
    try:
        if case == "orphan":
            assert not (d / "00000000000000999999.index").exists()
            assert not (d / "00000000000000999999.timeindex").exists()
        else:
            assert again.load_stats[("t", 0)].indexes_rebuilt >= 1
        log, ref = again.log("t", 0), reference.log("t", 0)
        for seg, ref_seg in zip(log.segments(), ref.segments(), strict=True):
            assert seg.offset_index.items() == ref_seg.offset_index.items()
            assert seg.time_index.items() == ref_seg.time_index.items()
        end = log.log_end_offset
        for offset in range(end):
            got = log.segments()[log._segment_index_for(log.segments(), offset)].translate_offset(
                offset
            )
            want = ref.segments()[ref._segment_index_for(ref.segments(), offset)].translate_offset(
                offset
            )
            assert got is not None and want is not None
            assert got.position == want.position, offset
        assert [r.offset for r in again.read("t", 0)] == list(range(end))
    finally:
        reference.close()


def test_leftover_temporaries_are_handled_as_kafkas_loader(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """.deleted removed; .cleaned removed; a .swap below every .cleaned completes its swap."""
    store = open_store()
    store.create_topic("t", 1, {"segment.bytes": 300})
    fill(store, 20, rng=random.Random(3))
    segs = store.segments("t", 0)
    assert len(segs) >= 4
    expected = values(store)
    store.close()
    d = seg_dir(tmp_path)
    first = Path(segs[0].path).name[:20]
    second = Path(segs[1].path).name[:20]
    # A finished replacement of segment 0 waiting as .swap (same bytes: same content).
    shutil.copy(d / f"{first}.log", d / f"{first}.log.swap")
    # A crash while writing a cleaned copy of segment 1.
    shutil.copy(d / f"{second}.log", d / f"{second}.log.cleaned")
    (d / f"{second}.index.cleaned").write_bytes(b"")
    (d / "00000000000000000000.timeindex.deleted").write_bytes(b"junk")
    again = open_store()
    names = os.listdir(d)
    assert not any(n.endswith((".swap", ".cleaned", ".deleted")) for n in names)
    assert values(again) == expected
    assert again.load_stats[("t", 0)].swaps_completed == 1


def test_swap_at_or_above_a_cleaned_file_is_discarded(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"segment.bytes": 300})
    fill(store, 20, rng=random.Random(4))
    segs = store.segments("t", 0)
    expected = values(store)
    store.close()
    d = seg_dir(tmp_path)
    first = Path(segs[0].path).name[:20]
    third = Path(segs[2].path).name[:20]
    (d / f"{first}.log.cleaned").write_bytes(b"")
    (d / f"{third}.log.swap").write_bytes(b"garbage that must never be swapped in")
    again = open_store()
    assert not any(n.endswith((".swap", ".cleaned")) for n in os.listdir(d))
    assert values(again) == expected


def test_data_below_the_checkpointed_log_start_offset_means_loss(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("t", 1)
    fill(store, 5)
    store.delete_records("t", 0, 3)
    store.close()
    again = open_store()
    assert again.log_start_offset("t", 0) == 3
    assert next(r.offset for r in again.read("t", 0, 3)) == 3


def test_garbage_checkpoint_after_an_unclean_stop_forces_full_recovery(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """Without the clean-shutdown marker (with it, nothing is recovered: test_catalog_safety)."""
    store = open_store()
    store.create_topic("t", 1, {"segment.bytes": 300})
    fill(store, 30)
    expected = values(store)
    store.close()
    (tmp_path / "data" / "recovery-point-offset-checkpoint").write_bytes(b"\xff\xfegarbage\n")
    (tmp_path / "data" / ".kafka_cleanshutdown").unlink()
    again = open_store()
    stats = again.load_stats[("t", 0)]
    assert stats.segments_recovered == len(again.segments("t", 0))
    assert values(again) == expected


def test_multi_batch_appends_keep_their_index_across_reopens(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """Kafka 4.4 indexes every batch of a multi-batch append on its own."""
    from compactlog.records import build_batch

    store = open_store()
    store.create_topic("t", 1, {"index.interval.bytes": 0})
    for i in range(5):
        two = build_batch([(b"a", b"%d" % i)], timestamps=1000 + i) + build_batch(
            [(b"b", b"%d" % i)], timestamps=1000 + i
        )
        store.append_batch("t", 0, two)
    entries = store.log("t", 0).active_segment.offset_index.items()
    assert entries[:3] == [(1, 70), (2, 140), (3, 210)]  # from the first append's second batch
    store.close()
    again = open_store()
    assert again.load_stats[("t", 0)].indexes_rebuilt == 0
    assert [r.offset for r in again.read("t", 0, 3)] == list(range(3, 10))
