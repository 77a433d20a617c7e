"""R2: power loss at every fsync point of append and roll, under P-sync (``flush.messages=1``).

A store on a :class:`~tests.support.faultfs.PowerLossFileSystem` appends batches of records
whose values are their own offsets (so a hole, a duplicate or a foreign record shows), rolls a
segment every few appends (and ``segment.bytes`` rolls more), and writes the recovery-point
checkpoint every few appends. For every k, a fresh copy of the data directory runs the workload
until the power fails just before its k-th fsync (of a file or a directory: that fsync never
returns); the power cut then leaves, per file, none, a prefix, a torn prefix, or a page-wise
random subset of the unsynced writes, and per directory none, a prefix or all of the unsynced
creates, renames and removes (the model is in ``PowerLossFileSystem``'s docstring); every
choice comes from a seed printed with any failure. A normal store then reopens the directory.
Checked for every cut:

* recovery does not raise;
* 0 acknowledged records lost: an append is acknowledged when it returned, i.e. after its
  flush's fsyncs returned;
* the prefix property, as salvage leaves it: every offset below the log end is read with its own
  value or lies in a quarantined range (damaged unsynced bytes are kept and reported, the valid
  batches after them kept); no duplicate and no corrupt read; nothing beyond what was
  appended; under P-sync no acknowledged offset is missing;
* the recovery point in the checkpoint on disk is never beyond the last fsynced offset (the
  end offset of the last acknowledged append), and after the load never beyond the log end;
* every offset-index entry of every segment points at a batch boundary of its ``.log`` whose
  last offset is >= the entry's offset.

Judged on each run's own trace: the store's calls are the same from run to run here (no helper
thread), but the check never relies on another run's numbering. CI tier: every fsync point of
the workload, each with ``SEEDS`` cuts (several hundred cut points, see the printed count);
``pytest -m soak`` runs a longer workload with more seeds (thousands).
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from compactlog.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, parse_checkpoint
from compactlog.storage.fs import OsFileSystem
from compactlog.storage.quarantine import list_quarantined
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.support.faultfs import MUTATING_OPS, PowerLossFileSystem, SimulatedCrash

TOPIC = "t"
SEGMENTS = {"segment.bytes": 700, "segment.index.bytes": 4096, "index.interval.bytes": 60}
POLICIES = {
    "P-sync": {"flush.messages": 1, **SEGMENTS},  # an append returns after its fsyncs
    "P-kafka": SEGMENTS,  # Kafka's defaults: no forced fsync, a roll flushes what it rolled past
}
#: Where the power fails: before every fsync under P-sync; under P-kafka, whose appends do not
#: fsync, before every mutating call.
CUT_OPS = {
    "P-sync": ("sync", "sync_dir"),
    "P-kafka": MUTATING_OPS,
    "P-sync, topic created in the run": ("sync", "sync_dir"),
}
#: Power loss is simulated by the journal, not by the disk, so RAM serves as well as a disk.
RAM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


@pytest.fixture
def work_dir(tmp_path: Path) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="r2-", dir=RAM_DIR or tmp_path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class Progress:
    acked_end: int = 0  # end offset of the last acknowledged append
    appended_end: int = 0  # end offset of the last append attempted (acknowledged or not)


def workload(store: Store, clock: ManualClock, appends: int, progress: Progress) -> None:
    rng = random.Random(2)  # the same workload in every run
    for i in range(appends):
        clock.advance(1)
        count = rng.randint(1, 3)
        start = progress.acked_end
        progress.appended_end = start + count
        records = [(b"k%d" % rng.randint(0, 4), b"%d" % (start + j)) for j in range(count)]
        base = store.append(TOPIC, 0, records)
        assert base == start
        progress.acked_end = start + count
        if i % 6 == 5:
            store.roll(TOPIC, 0)
        if i % 4 == 3:
            store.write_recovery_point_checkpoint()
        # What the store's background thread does after a roll (Kafka flushes the segment it
        # rolled past asynchronously), here at once so that every run makes the same calls.
        store.log(TOPIC, 0).flush_pending()


def make_pristine(path: Path, policy: str) -> None:
    with Store.open(path, clock=ManualClock()) as store:
        if policy != "P-sync, topic created in the run":
            store.create_topic(TOPIC, 1, POLICIES[policy])


def create_in_run(store: Store, policy: str) -> None:
    if policy == "P-sync, topic created in the run":
        store.create_topic(TOPIC, 1, POLICIES["P-sync"])


def count_points(
    pristine: Path, work: Path, policy: str, appends: int, ops: tuple[str, ...]
) -> int:
    data = work / "count"
    shutil.copytree(pristine, data)
    fs = PowerLossFileSystem()
    clock = ManualClock()
    store = Store.open(data, clock=clock, fs=fs)
    opened = fs.calls
    create_in_run(store, policy)
    workload(store, clock, appends, Progress())
    trace = fs.trace
    assert trace is not None
    n = sum(1 for c in trace[opened:] if c.op in ops)
    store.close()
    shutil.rmtree(data)
    return n


def batch_boundaries(log: bytes) -> dict[int, int]:
    """Position -> last offset of every complete batch of a ``.log`` file's bytes."""
    out: dict[int, int] = {}
    position = 0
    while position + 27 <= len(log):
        base, length = struct.unpack_from(">qi", log, position)
        if length <= 0 or position + 12 + length > len(log):
            break
        (delta,) = struct.unpack_from(">i", log, position + 23)
        out[position] = base + delta
        position += 12 + length
    return out


def recovery_point_on_disk(data: Path) -> int | None:
    path = data / RECOVERY_POINT_CHECKPOINT
    if not path.exists():
        return None
    try:
        points = parse_checkpoint(path.read_bytes(), RECOVERY_POINT_CHECKPOINT)
    except Exception:  # a garbled checkpoint is the store's to handle, not a durability bug here
        return None
    for tp, offset in points.items():
        if tuple(tp) == (TOPIC, 0):
            return offset
    return None


def _check_records(
    data: Path, got: list[tuple[int, bytes | None]], end: int, progress: Progress, policy: str
) -> list[str]:
    """No corrupt read; the salvage-aware prefix property (every offset below the log end is
    read, or lies in a quarantined range: recovery keeps valid batches after damaged ones,
    leaving a reported gap); under P-sync no acknowledged offset missing."""
    problems = []
    offsets = [o for o, _ in got]
    if offsets != sorted(set(offsets)):
        problems.append(f"offsets do not strictly increase: {offsets}")
    wrong = [(o, v) for o, v in got if v != b"%d" % o]
    if wrong:
        problems.append(f"not a prefix: record {wrong[0][0]} is {wrong[0]}")
    if offsets and (end != offsets[-1] + 1 or end > progress.appended_end):
        problems.append(
            f"log end offset {end}, last record {offsets[-1]}, "
            f"{progress.appended_end} ever appended"
        )
    quarantined = list_quarantined(OsFileSystem(), str(data / f"{TOPIC}-0"))
    for missing in sorted(set(range(end)) - set(offsets)):
        if policy != "P-kafka" and missing < progress.acked_end:
            problems.append(f"acknowledged record {missing} lost ({progress.acked_end} acked)")
            break
        if not any(
            q.first_offset <= missing
            and (q.next_valid_offset is None or missing < q.next_valid_offset)
            for q in quarantined
        ):
            problems.append(f"a hole at offset {missing} that no quarantined range reports")
            break
    if policy != "P-kafka" and len(offsets) < min(progress.acked_end, end):
        problems.append(f"acknowledged records lost: {len(got)} readable, {progress.acked_end}")
    return problems


def check_restart(data: Path, progress: Progress, policy: str) -> list[str]:
    problems: list[str] = []
    rp = recovery_point_on_disk(data)
    if policy != "P-kafka" and rp is not None and rp > progress.acked_end:
        problems.append(
            f"checkpointed recovery point {rp} is beyond the last fsynced offset "
            f"{progress.acked_end}"
        )
    try:
        store = Store.open(data, clock=ManualClock(2_000_000_000_000))
    except Exception as exc:
        return [*problems, f"recovery raised {type(exc).__name__}: {exc}"]
    try:
        if TOPIC not in store.topics():  # its creation did not survive
            if progress.acked_end > 0:
                problems.append(f"the topic is gone with {progress.acked_end} acked records")
            return problems
        end = store.log_end_offset(TOPIC, 0)
        try:
            got = [(r.offset, r.value) for r in store.read(TOPIC, 0, 0)]
        except Exception as exc:
            return [*problems, f"corrupt read: {type(exc).__name__}: {exc}"]
        problems += _check_records(data, got, end, progress, policy)
        if rp is not None and rp > end:
            problems.append(f"checkpointed recovery point {rp} is beyond the log end {end}")
        log = store.log(TOPIC, 0)
        if log.recovery_point > end:
            problems.append(f"recovery point {log.recovery_point} beyond the log end {end}")
        for segment in log.segments():
            boundaries = batch_boundaries(Path(segment.log_path).read_bytes())
            for offset, position in segment.offset_index.items():
                last = boundaries.get(position)
                if last is None or last < offset:
                    problems.append(
                        f"index entry ({offset}, {position}) of segment {segment.base_offset} "
                        f"points at {'no batch boundary' if last is None else f'last {last}'}"
                    )
    finally:
        store.close()
    return problems


def run_cuts(
    work: Path, policy: str, appends: int, seeds: int, base_seed: int
) -> tuple[int, float]:
    pristine = work / "pristine"
    make_pristine(pristine, policy)
    ops = CUT_OPS[policy]
    n = count_points(pristine, work, policy, appends, ops)
    assert n >= appends, f"expected a cut point per append at least, got {n}"
    survived = {"acked only": 0, "unacked tail too": 0, "less than acked": 0}
    failures: list[str] = []
    cuts = 0
    started = time.monotonic()
    for k in range(1, n + 1):
        for s in range(seeds):
            seed = base_seed + k * 1000 + s
            data = work / f"cut-{k}-{s}"
            shutil.copytree(pristine, data)
            fs = PowerLossFileSystem()
            clock = ManualClock()
            store = Store.open(data, clock=clock, fs=fs)
            fs.crash_at_op(k, ops)
            progress = Progress()
            with pytest.raises(SimulatedCrash):
                create_in_run(store, policy)
                workload(store, clock, appends, progress)
            store._release()  # the data directory lock (plain os calls), as the kernel would
            crash = fs.crashed
            assert crash is not None
            cut = fs.power_cut(random.Random(seed))
            cuts += 1
            where = (
                f"{policy} seed {seed}: power cut before call {k}/{n} of {ops} ({crash.call.op} "
                f"{os.path.basename(crash.call.path)}), acked {progress.acked_end}, "
                f"left {cut.describe()}"
            )
            failures += [f"{where}: {p}" for p in check_restart(data, progress, policy)]
            with Store.open(data, clock=ManualClock(2_000_000_000_000)) as again:
                end = again.log_end_offset(TOPIC, 0) if TOPIC in again.topics() else 0
            kind = (
                "less than acked"
                if end < progress.acked_end
                else "acked only"
                if end == progress.acked_end
                else "unacked tail too"
            )
            survived[kind] += 1
            shutil.rmtree(data)
    elapsed = time.monotonic() - started
    print(
        f"R2 append {policy}: {n} cut points x {seeds} seeds = {cuts} power cuts in "
        f"{elapsed:.1f} s; the log came back with {survived}"
    )
    assert not failures, f"{len(failures)} broken invariants:\n" + "\n".join(failures[:30])
    return cuts, elapsed


@pytest.mark.slow
def test_r2_power_loss_at_every_fsync_of_append_and_roll(work_dir: Path) -> None:
    cuts, _ = run_cuts(work_dir, "P-sync", appends=30, seeds=3, base_seed=20_000)
    assert cuts >= 300


@pytest.mark.slow
def test_r2_power_loss_with_the_topic_created_in_the_run(work_dir: Path) -> None:
    """The partition directory itself is new: its creation must be durable before an append
    to it is acknowledged."""
    cuts, _ = run_cuts(
        work_dir, "P-sync, topic created in the run", appends=12, seeds=3, base_seed=40_000
    )
    assert cuts >= 100


@pytest.mark.slow
def test_r2_power_loss_at_every_call_under_kafka_defaults(work_dir: Path) -> None:
    cuts, _ = run_cuts(work_dir, "P-kafka", appends=30, seeds=1, base_seed=30_000)
    assert cuts >= 200


@pytest.mark.soak
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_r2_power_loss_soak(work_dir: Path, policy: str) -> None:
    seed = random.SystemRandom().randrange(2**31)
    seeds = 20 if policy == "P-sync" else 10
    cuts, _ = run_cuts(work_dir, policy, appends=80, seeds=seeds, base_seed=seed)
    assert cuts >= 5000


def test_roll_makes_the_rolled_segment_durable_first(work_dir: Path) -> None:
    """Under Kafka's defaults (no forced fsync) a roll fsyncs the rolled segment's records, and
    the directory, before it creates the next segment: a power cut that keeps the new segment
    (its directory entry) and drops every unsynced write leaves no hole below it. Without that,
    the log came back with offsets 0..2 gone and the next append at 3."""
    data = work_dir / "data"
    make_pristine(data, "P-kafka")
    fs = PowerLossFileSystem()
    store = Store.open(data, clock=ManualClock(), fs=fs)
    store.append(TOPIC, 0, [(b"k", b"0"), (b"k", b"1"), (b"k", b"2")])
    store.roll(TOPIC, 0)
    store.append(TOPIC, 0, [(b"k", b"3")])
    store._release()
    cut = fs.power_cut(random.Random(1), files="drop", dirs="keep")
    assert "00000000000000000003.log" in cut.describe()  # the new segment was created
    with Store.open(data, clock=ManualClock(2_000_000_000_000)) as again:
        got = [(r.offset, r.value) for r in again.read(TOPIC, 0, 0)]
        assert got == [(0, b"0"), (1, b"1"), (2, b"2")], cut.describe()
        assert again.log_end_offset(TOPIC, 0) == 3
