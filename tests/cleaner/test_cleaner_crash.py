"""R9: crashes during cleaning.

(1) Enumerated crash points. A compacted log of several segments, with tombstones whose delete
horizon has passed and enough dirt that one ``LogManager.clean`` rewrites three groups (two of them
of two segments), is cleaned once with a :class:`FaultInjectingFileSystem` to number its mutating
calls. Then, for every call k of that clean (and again with a torn write at every k that is a
write), a fresh copy of the data directory is opened with a filesystem that crashes at k, the clean
runs until the crash, the store object is dropped without closing (the crash closed its files), and
a normal store reopens the directory. Checked after every restart:

* the log loads, and no ``.cleaned``, ``.swap`` or ``.deleted`` file is left once it has;
* each segment group holds exactly its records from before the clean or exactly those from
  after an uninterrupted clean (computed on another copy), never a mixture; and which of the two
  it is follows spec 5.9: a group is new exactly when the crash came after the last of its
  ``.cleaned`` -> ``.swap`` renames (so groups already swapped stay swapped);
* the records at and after the first uncleanable offset, the log start and end offsets, are
  those from before; offsets strictly increase (0 duplicates); every key's latest value is there
  (0 lost latest values) and a deleted key can only be absent if the uninterrupted clean removed
  its tombstone too;
* the next ``LogManager.clean`` ends with exactly the records of the uninterrupted clean, and a
  further ``LogManager.clean`` changes no byte of any file (the fixpoint).

The named points of R9 are found in the trace and reported (all are among the enumerated k):
a partial ``.cleaned`` (torn write), a complete ``.cleaned``, k of n files renamed to ``.swap``,
all renamed to ``.swap``, k of m old segments renamed ``.deleted``, before the final rename,
before the directory fsync, before the cleaner checkpoint (and after it, before the last fsync).

(2) Random SIGKILLs during continuous cleaning with concurrent appends: a forked child appends
(keys 1..40, unique values, tombstones) while the store's background cleaner thread cleans
(``log.cleaner.backoff.ms`` 5, a dirty ratio of 0.01, small segments, a clock running 100 times
faster than real time so that tombstone horizons pass), and reports every acknowledged append
through a pipe. The parent kills it at a uniformly random time, reopens the store and checks the
invariants that hold without knowing when the kill came: the log loads with no temporary file
left, offsets strictly increase, every record is one that was written at that offset, every
key's last acknowledged value (or a later write) is there, a deleted key is absent only if its
tombstone was its last write, and two further cleans reach a fixpoint. CI tier: the spec's 200
kill points (about a minute on the 2-core machine; ``R9_KILLS`` changes it); the soak tier
(``pytest -m soak``) has 2,000. The test reports how many kills landed while a clean was
mid-swap. Power loss is not covered: :class:`FaultInjectingFileSystem` does not simulate it.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import signal
import struct
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import close_managed, manager_of, open_managed
from tests.support.faultfs import FaultInjectingFileSystem, MutatingCall, SimulatedCrash

TOPIC = "t"
TP = (TOPIC, 0)
PART = f"{TOPIC}-0"
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TEMPORARY = (".cleaned", ".swap", ".deleted")
DELETE_RETENTION_MS = 1000
#: A 2 MiB offset map (the 128 MiB default is cleared, page by page, at every clean).
BROKER = {"log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024}
KILLS = int(os.environ.get("R9_KILLS", "200"))
#: The soak tier's kills (``pytest -m soak``).
SOAK_KILLS = 2000
#: The enumerated crashes copy, fsync and delete many small directories; R9(1) simulates process
#: crashes (no power loss), so RAM serves as well as a disk and costs a fraction of the time.
RAM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


@pytest.fixture
def work_dir(tmp_path: Path) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="r9-", dir=RAM_DIR or tmp_path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class MixedGroupError(AssertionError):
    """Every broken invariant is a group that is neither pre- nor post-clean."""


# --- helpers ---------------------------------------------------------------------------------


def records(store: Store) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in store.read(TOPIC, 0, store.log_start_offset(*TP))]


def key_map(
    recs: list[tuple[int, bytes | None, bytes | None]],
) -> dict[bytes, tuple[int, bytes | None]]:
    return {k: (o, v) for o, k, v in recs if k is not None}


def latest_values_then_fixpoint(
    store: Store,
    data: Path,
    written: dict[int, tuple[bytes, bytes | None]],
    recs: list[tuple[int, bytes | None, bytes | None]],
    context: str,
) -> bool:
    """Every key's latest written record is the one read (a tombstone may be gone), and the
    next cleaner run reaches a fixpoint; returns whether that run cleaned anything."""
    present = key_map(recs)
    latest: dict[bytes, int] = {}
    for o in sorted(written):
        latest[written[o][0]] = o
    for key, o in latest.items():
        got = present.get(key)
        if got is None:
            assert written[o][1] is None, f"latest value of {key!r} lost ({context})"
        else:
            assert got == (o, written[o][1]), f"{key!r}: {got}, wrote {o} ({context})"
    first = manager_of(store).clean_log(TOPIC, 0)
    assert not first.uncleanable, f"{first.uncleanable} ({context})"
    files = partition_files(data)
    second = manager_of(store).clean_log(TOPIC, 0)
    assert second.stats is None and partition_files(data) == files, context
    return first.cleaned is not None


def partition_files(data: Path) -> dict[str, bytes]:
    directory = data / PART
    return {
        name: (directory / name).read_bytes()
        for name in sorted(os.listdir(directory))
        if not name.endswith(".deleted")
    }


def leftovers(data: Path) -> list[str]:
    return sorted(n for n in os.listdir(data / PART) if n.endswith(TEMPORARY))


def drop_crashed(store: Store) -> None:
    """Forget a store whose filesystem crashed: its files were closed by the crash; only the
    data directory's lock (taken with plain ``os`` calls, outside the filesystem seam) is left
    to release, as the kernel would for a killed process. ``abandon()`` cannot be used: it
    closes the segments through the dead filesystem, which raises again."""
    store._release()


# --- (1) enumerated crash points --------------------------------------------------------------


def build(data: Path, clock: ManualClock, superseded_tail: bool) -> None:
    """The log to crash-clean, closed cleanly.

    Four segments of random dirt are cleaned once (stamping delete horizons on the tombstones
    kept), the clock moves past the horizons, and four more segments of dirt follow. Every
    segment ends with a record of its own key ("sentinel"), so a cleaned group always ends with
    its last source segment's last batch.

    With ``superseded_tail`` the log is instead three segments without sentinels: S0 (``a0``,
    ``a1``, ``y``), S1 (``x0``..``x2``) and S2 (new ``x0``..``x2``, new ``y``), small enough
    that S0 and S1 form one group and S2 another: the clean drops ``y`` from S0 and all of S1,
    so the group's cleaned segment ends below S1's base offset.
    """
    rng = random.Random(9)
    store = open_managed(data, clock=clock, config=BROKER)
    store.create_topic(
        TOPIC,
        1,
        {
            "cleanup.policy": "compact",
            "segment.bytes": 500 if superseded_tail else 1500,
            "delete.retention.ms": DELETE_RETENTION_MS,
            "min.cleanable.dirty.ratio": 0.01,
            "segment.index.bytes": 4096,
            "index.interval.bytes": 128,
        },
    )
    n = 0

    def segment(batches: int, sentinel: int) -> None:
        nonlocal n
        for _ in range(batches):
            batch: list[tuple[bytes | None, bytes | None]] = []
            for _ in range(rng.randint(1, 4)):
                value = None if rng.random() < 0.15 else b"v%d" % n
                batch.append((b"k%02d" % rng.randint(1, 15), value))
                n += 1
            store.append(TOPIC, 0, batch, compression=rng.choice(CODECS))
            clock.advance(1)
        store.append(TOPIC, 0, [(b"sentinel-%03d" % sentinel, b"s")])
        store.roll(TOPIC, 0)

    if superseded_tail:
        for key, value in [(b"a0", b"1"), (b"a1", b"1"), (b"y", b"old")]:
            store.append(TOPIC, 0, [(key, value)])
        store.roll(TOPIC, 0)
        for i in range(3):
            store.append(TOPIC, 0, [(b"x%d" % i, b"old")])
        store.roll(TOPIC, 0)
        for key in [b"x0", b"x1", b"x2", b"y"]:
            store.append(TOPIC, 0, [(key, b"new")])
        store.roll(TOPIC, 0)
    else:
        for i in range(4):
            segment(6, i)
        manager_of(store).clean(clock.now)
        clock.advance(2 * DELETE_RETENTION_MS)
        for i in range(4, 8):
            segment(6, i)
    close_managed(store)


@dataclass
class Reference:
    """What an uninterrupted clean of ``pre`` does."""

    pre: list[tuple[int, bytes | None, bytes | None]]
    post: list[tuple[int, bytes | None, bytes | None]]
    log_start: int
    log_end: int
    #: [start, end) of each rewritten group, in order; the last end is the first uncleanable
    #: offset.
    groups: list[tuple[int, int]]
    #: Per group, the old segment bases it replaced.
    old_bases: list[list[int]]
    trace: list[MutatingCall]  # of the clean only, numbered from 1
    #: Per group, the (relative) number of its last ``.cleaned`` -> ``.swap`` rename.
    last_swap_rename: list[int]


def reference(pristine: Path, work: Path, clock: ManualClock) -> Reference:
    shutil.copytree(pristine, work / "pre")
    with open_managed(work / "pre", clock=clock, config=BROKER) as store:
        pre = records(store)
        log_start, log_end = store.log_start_offset(*TP), store.log_end_offset(*TP)
        pre_bases = [s.base_offset for s in store.segments(TOPIC, 0)]
    shutil.copytree(pristine, work / "post")
    fs = FaultInjectingFileSystem()
    store = open_managed(work / "post", clock=clock, config=BROKER, fs=fs)
    k0 = fs.calls
    result = manager_of(store).clean(clock.now)
    k1 = fs.calls
    assert result.cleaned == TP and not result.uncleanable, result
    post = records(store)
    post_bases = [s.base_offset for s in store.segments(TOPIC, 0)]
    close_managed(store)
    assert fs.trace is not None
    trace = [MutatingCall(c.number - k0, c.op, c.path) for c in fs.trace[k0:k1]]
    end = result.end_offset
    starts = [b for b in post_bases if b < end]
    groups = list(zip(starts, [*starts[1:], end], strict=True))
    old_bases = [[b for b in pre_bases if lo <= b < hi] for lo, hi in groups]
    last_swap_rename = []
    for lo, _ in groups:
        prefix = f"{lo:020d}."
        renames = [
            c.number
            for c in trace
            if c.op == "rename"
            and os.path.basename(c.path).startswith(prefix)
            and c.path.endswith(".cleaned")
        ]
        last_swap_rename.append(max(renames))
    return Reference(pre, post, log_start, log_end, groups, old_bases, trace, last_swap_rename)


def named_points(ref: Reference) -> dict[str, tuple[int, bool]]:
    """R9's named crash points: name -> (relative call number, torn write)."""
    trace = ref.trace
    name = os.path.basename

    def first(pred: Callable[[MutatingCall], bool], after: int = 0) -> int:
        return next(c.number for c in trace if c.number > after and pred(c))

    points: dict[str, tuple[int, bool]] = {}
    points["partial .cleaned (torn write)"] = (
        first(lambda c: c.op in ("write_at", "append") and c.path.endswith(".log.cleaned")),
        True,
    )
    complete = first(lambda c: c.op == "rename" and c.path.endswith(".log.cleaned"))
    points["complete .cleaned, none renamed"] = (complete, False)
    points["k of n renamed to .swap"] = (complete + 1, False)
    # (trace[i] is call i + 1: the call after the .log rename renames the .index)
    assert trace[complete].op == "rename" and trace[complete].path.endswith(".cleaned")
    all_swapped = ref.last_swap_rename[0] + 1
    assert trace[all_swapped - 1].op == "sync_dir"
    points["all renamed to .swap"] = (all_swapped, False)
    multi = next(i for i, bases in enumerate(ref.old_bases) if len(bases) >= 2)
    second_old = f"{ref.old_bases[multi][1]:020d}.log"
    points["k of m old segments renamed .deleted"] = (
        first(lambda c: c.op == "rename" and name(c.path) == second_old),
        False,
    )
    final = first(lambda c: c.op == "rename" and c.path.endswith(".log.swap"))
    points["before the final rename"] = (final, False)
    points["before the directory fsync"] = (first(lambda c: c.op == "sync_dir", after=final), False)
    checkpoint = first(lambda c: "cleaner-offset-checkpoint" in c.path)
    points["before the cleaner checkpoint"] = (checkpoint, False)
    points["after the checkpoint rename, before the fsync"] = (len(trace), False)
    return points


def swapped_groups(ref: Reference, done: list[MutatingCall]) -> list[bool]:
    """Per group, whether ``done`` (the calls completed before a crash) holds every one of its
    ``.cleaned`` -> ``.swap`` renames: spec 5.9's test for a group that must come back new.

    Judged on the crashed run's own calls, not on the reference's numbering: the round's helper
    thread (fsyncs, removals of stale files) runs beside the main thread, so the k-th call of
    one run need not be the k-th of another."""
    swapped = []
    for lo, _ in ref.groups:
        prefix = f"{lo:020d}."

        def renames(calls: list[MutatingCall], prefix: str = prefix) -> int:
            return sum(
                1
                for c in calls
                if c.op == "rename"
                and os.path.basename(c.path).startswith(prefix)
                and c.path.endswith(".cleaned")
            )

        swapped.append(renames(done) == renames(ref.trace))
    return swapped


def check_restart(data: Path, clock: ManualClock, ref: Reference, swapped: list[bool]) -> list[str]:
    """Reopen after a crash; ``swapped`` says which groups had all their renames done before
    it. The list of broken invariants (empty when all hold)."""
    problems: list[str] = []
    try:
        store = open_managed(data, clock=clock, config=BROKER)
    except Exception as exc:
        return [f"the log does not load: {type(exc).__name__}: {exc}"]
    try:
        left = leftovers(data)
        if left:
            problems.append(f"temporary files left after startup: {left}")
        recs = records(store)
        offsets = [o for o, _, _ in recs]
        if any(a >= b for a, b in itertools.pairwise(offsets)):
            problems.append("offsets do not strictly increase (duplicates?)")
        if (store.log_start_offset(*TP), store.log_end_offset(*TP)) != (ref.log_start, ref.log_end):
            problems.append("log start or end offset changed")
        for i, (lo, hi) in enumerate(ref.groups):
            mine = [r for r in recs if lo <= r[0] < hi]
            old = [r for r in ref.pre if lo <= r[0] < hi]
            new = [r for r in ref.post if lo <= r[0] < hi]
            want_new = swapped[i]
            state = "new" if mine == new else "old" if mine == old else "a mixture"
            if mine not in (old, new):
                problems.append(
                    f"group [{lo}, {hi}) is neither pre- nor post-clean: offsets "
                    f"{[r[0] for r in mine]}, pre {[r[0] for r in old]}, post {[r[0] for r in new]}"
                )
            elif mine != (new if want_new else old) and old != new:
                problems.append(
                    f"group [{lo}, {hi}) is {state}, spec 5.9 says {'new' if want_new else 'old'}"
                )
        fuo = ref.groups[-1][1]
        if [r for r in recs if r[0] >= fuo] != [r for r in ref.pre if r[0] >= fuo]:
            problems.append(f"records at or after the first uncleanable offset {fuo} changed")
        mine_map, pre_map, post_map = key_map(recs), key_map(ref.pre), key_map(ref.post)
        for key, (offset, value) in pre_map.items():
            got = mine_map.get(key)
            if got == (offset, value):
                continue
            if value is None and got is None and key not in post_map:
                continue  # the tombstone expired, as in the uninterrupted clean
            problems.append(f"latest record of {key!r} is {got}, expected {(offset, value)}")
        # The next clean reaches the uninterrupted result, and the one after changes nothing.
        result = manager_of(store).clean(clock.now)
        if result.uncleanable:
            problems.append(f"the next clean failed: {result.uncleanable}")
        if records(store) != ref.post:
            problems.append("the next clean did not reach the post-clean records")
        files = partition_files(data)
        again = manager_of(store).clean(clock.now)
        if again.cleaned is not None or partition_files(data) != files:
            problems.append("a further clean changed the log (no fixpoint)")
    finally:
        close_managed(store)
    return problems


@pytest.mark.slow
@pytest.mark.parametrize(
    "superseded_tail",
    [
        pytest.param(False, id="every-group-ends-with-its-last-segment"),
        pytest.param(True, id="group-tail-segment-compacted-away"),
    ],
)
def test_r9_crash_at_every_mutating_call_of_a_clean(work_dir: Path, superseded_tail: bool) -> None:
    clock = ManualClock()
    pristine = work_dir / "pristine"
    build(pristine, clock, superseded_tail)
    ref = reference(pristine, work_dir / "reference", clock)
    n = len(ref.trace)
    assert len(ref.groups) >= 2, "the clean must rewrite several groups"
    if not superseded_tail:
        assert any(len(b) >= 2 for b in ref.old_bases), "a group must merge segments"
        assert sum(v is None for _, _, v in ref.pre) > sum(v is None for _, _, v in ref.post), (
            "some tombstones must expire in the clean"
        )
    points = named_points(ref) if not superseded_tail else {}
    runs = [(k, False) for k in range(1, n + 1)]
    runs += [(c.number, True) for c in ref.trace if c.op in ("write_at", "append")]
    failures: list[str] = []
    for i, (k, torn) in enumerate(runs):
        data = work_dir / f"crash-{i}"
        shutil.copytree(pristine, data)
        fs = FaultInjectingFileSystem()
        store = open_managed(data, clock=clock, config=BROKER, fs=fs)
        opened = fs.calls
        fs.crash_at(opened + k, partial_write=random.Random(k) if torn else False)
        with pytest.raises(SimulatedCrash):
            manager_of(store).clean(clock.now)
        drop_crashed(store)
        trace = fs.trace
        assert trace is not None
        call = trace[opened + k - 1]  # this run's k-th call (the reference's may differ)
        torn_text = ", torn" if torn else ""
        where = f"crash at call {k}/{n} ({call.op} {os.path.basename(call.path)}{torn_text})"
        swapped = swapped_groups(ref, trace[opened : opened + k - 1])
        failures += [f"{where}: {p}" for p in check_restart(data, clock, ref, swapped)]
        shutil.rmtree(data)
    print(
        f"R9(1) superseded_tail={superseded_tail}: {n} mutating calls, {len(runs)} crash runs "
        f"({len(runs) - n} torn writes), groups {ref.groups} replacing segments {ref.old_bases}"
    )
    for name, (k, torn) in points.items():
        call = ref.trace[k - 1]
        print(f"  named point {name!r}: call {k} ({call.op} {os.path.basename(call.path)})")
        assert (k, torn) in runs or (k, False) in runs
    if failures:
        mixed = all("neither pre- nor post-clean" in f for f in failures)
        error = MixedGroupError if mixed else AssertionError
        raise error(f"{len(failures)} broken invariants:\n" + "\n".join(failures[:40]))


# --- (2) random SIGKILLs during continuous cleaning with appends ------------------------------


def warp_clock() -> int:
    """Epoch ms, 100 times faster than real time: delete.retention.ms of 1 s is 10 real ms."""
    return time.time_ns() // 10_000


ACK = struct.Struct(">qhqb")  # offset, key number, value number (unique), tombstone flag


def _child(data: Path, seed: int, ack_fd: int) -> None:
    rng = random.Random(seed)
    store = open_managed(
        data,
        clock=warp_clock,
        config={**BROKER, "log.cleaner.backoff.ms": 5},
        background=True,
    )
    value = seed * 1_000_000
    while True:
        batch = []
        for _ in range(rng.randint(1, 5)):
            key = rng.randint(1, 40)
            tombstone = rng.random() < 0.1
            batch.append((key, value, tombstone))
            value += 1
        base = store.append(
            TOPIC,
            0,
            [(b"k%02d" % k, None if t else b"k%02d:%d" % (k, v)) for k, v, t in batch],
            compression=rng.choice(CODECS),
        )
        os.write(ack_fd, b"".join(ACK.pack(base + i, k, v, t) for i, (k, v, t) in enumerate(batch)))


def _drain(read_fd: int) -> list[tuple[int, int, int, int]]:
    chunks = []
    while chunk := os.read(read_fd, 1 << 16):
        chunks.append(chunk)
    data = b"".join(chunks)
    data = data[: len(data) - len(data) % ACK.size]
    return [ACK.unpack_from(data, i) for i in range(0, len(data), ACK.size)]


@pytest.mark.slow
def test_r9_sigkill_during_continuous_cleaning(tmp_path: Path) -> None:
    sigkill_during_continuous_cleaning(tmp_path, KILLS)


@pytest.mark.soak
@pytest.mark.timeout(4 * 3600)
def test_r9_sigkill_during_continuous_cleaning_soak(tmp_path: Path) -> None:
    """The soak tier: ten times the CI tier's kills."""
    sigkill_during_continuous_cleaning(tmp_path, SOAK_KILLS)


def sigkill_during_continuous_cleaning(tmp_path: Path, kills: int) -> None:
    seed = random.SystemRandom().randrange(2**31)
    rng = random.Random(seed)
    data = tmp_path / "data"
    with open_managed(data, clock=warp_clock, config=BROKER) as store:
        store.create_topic(
            TOPIC,
            1,
            {
                "cleanup.policy": "compact",
                "segment.bytes": 2048,
                "min.cleanable.dirty.ratio": 0.01,
                "delete.retention.ms": DELETE_RETENTION_MS,
                "file.delete.delay.ms": 1000,
                "segment.index.bytes": 4096,
            },
        )
    # offset -> (key, value): every acknowledged record; and every record known to be written
    # (acknowledged, or found in the log after a kill that came before its acknowledgement).
    acked: dict[int, tuple[bytes, bytes | None]] = {}
    written: dict[int, tuple[bytes, bytes | None]] = {}
    mid_swap = 0
    cleaned_runs = 0
    for kill in range(kills):
        read_fd, write_fd = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            pid = os.fork()
        if pid == 0:  # the child: append and clean until killed
            os.close(read_fd)
            try:
                _child(data, seed * 1000 + kill + 1, write_fd)
            except BaseException:
                traceback.print_exc()  # shown with the failure: the child died by itself
            finally:
                os._exit(1)
        os.close(write_fd)
        time.sleep(rng.uniform(0.02, 0.3))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status), f"the child died by itself ({status}, seed {seed})"
        for offset, key, value, tombstone in _drain(read_fd):
            record = (b"k%02d" % key, None if tombstone else b"k%02d:%d" % (key, value))
            assert written.get(offset, record) == record, f"offset {offset} acked twice"
            acked[offset] = written[offset] = record
        os.close(read_fd)
        context = f"seed {seed}, kill {kill}"
        if any(n.endswith((".cleaned", ".swap")) for n in os.listdir(data / PART)):
            mid_swap += 1
        store = open_managed(
            data, clock=warp_clock, config=BROKER
        )  # restart must succeed every time
        try:
            assert leftovers(data) == [], f"temporary files after startup ({context})"
            recs = records(store)
            offsets = [o for o, _, _ in recs]
            assert all(a < b for a, b in itertools.pairwise(offsets)), context
            known = max(written, default=-1)
            assert store.log_end_offset(*TP) > max(acked, default=-1), f"acked lost ({context})"
            for o, k, v in recs:
                if o in written:
                    assert written[o] == (k, v), f"record {o} is not what was written ({context})"
                else:
                    # Written, but the kill came before its acknowledgement: from now on it is
                    # part of the history like an acknowledged record.
                    assert o > known and k is not None, f"foreign record {o} ({context})"
                    assert v is None or v.startswith(k + b":"), f"foreign record {o} ({context})"
                    written[o] = (k, v)
            cleaned_runs += latest_values_then_fixpoint(store, data, written, recs, context)
        finally:
            manager_of(store).abandon()
    print(
        f"R9(2) seed {seed}: {kills} kills, {mid_swap} landed mid-swap (.cleaned/.swap on disk), "
        f"{len(acked)} acked records, {cleaned_runs} restarts found dirt to clean"
    )
    assert mid_swap > 0 or kills < 20, f"no kill landed during a swap (seed {seed})"
