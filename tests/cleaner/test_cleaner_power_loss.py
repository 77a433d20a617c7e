"""R9 (power loss): the power fails at every fsync point of a clean and its swap.

The log of R9(1) (``tests/cleaner/test_cleaner_crash.py``: several segments, tombstones whose
delete horizon has passed, a clean that rewrites three groups, two of them merging segments) is
cleaned on a :class:`~tests.support.faultfs.PowerLossFileSystem` that dies just before the k-th
fsync of the clean (of a file or a directory; that fsync never returns), for every k, each with a
few seeds. The power cut then keeps, per file, none, a prefix, a torn prefix or a page-wise
random subset of the unsynced writes, and per directory none, a prefix or all of the unsynced
creates, renames and removes (so a ``.cleaned`` -> ``.swap`` rename, a ``.deleted`` rename, the
removal of a ``.deleted`` file and a checkpoint's write-then-rename can each be undone). A normal
store reopens the directory. Checked after every cut:

* the log loads and no ``.cleaned``, ``.swap`` or ``.deleted`` file is left;
* offsets strictly increase; the log start and end offsets are those from before;
* each segment group holds exactly its records from before the clean or exactly those from after
  an uninterrupted clean, never a mixture; it is the new state whenever the directory fsync after
  its last ``.cleaned`` -> ``.swap`` rename had returned before the cut (spec 5.9, for power
  loss: a rename is only durable once its directory is fsynced);
* the records from the first uncleanable offset on are unchanged, and every key maps to its
  latest value from before or from after the clean (0 lost latest values);
* the next clean ends with exactly the records of the uninterrupted clean.

Judged on each run's own trace, as R9(1) does: the round's helper thread runs beside the main
thread, so the k-th fsync need not be the same call in every run. CI tier: every fsync point x
``SEEDS`` seeds; ``pytest -m soak`` multiplies the seeds.

R9(2), the power-loss half: continuous cleaning with concurrent appends, as R9(2)'s SIGKILL
test does (a forked child appends under P-sync while the store's background cleaner cleans, with
a clock 100 times faster than real time so tombstone horizons pass), but the child's filesystem
is a ``PowerLossFileSystem`` that dies before its k-th fsync, k drawn at random, whichever thread
makes it; the child then cuts the power (random models, seeded) and exits, and the parent
reopens the directory and checks: the log loads with no temporary file left, offsets strictly
increase, every record is one written at that offset, 0 acknowledged records lost (every key's
last acknowledged value, or a later write, is there; a key is absent only if its last write was
a tombstone), and two further cleans reach a fixpoint. CI tier ``R9_POWER_CUTS`` (200), soak
2,000. It reports how many cuts left a swap in progress on disk.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import struct
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path

import pytest

from tests.cleaner.test_cleaner_crash import (
    BROKER,
    CODECS,
    DELETE_RETENTION_MS,
    PART,
    TOPIC,
    TP,
    Reference,
    build,
    drop_crashed,
    key_map,
    latest_values_then_fixpoint,
    leftovers,
    records,
    reference,
    warp_clock,
    work_dir,
)
from tests.conftest import ManualClock
from tests.managed import close_managed, manager_of, open_managed
from tests.support.faultfs import MutatingCall, PowerLossFileSystem, SimulatedCrash

__all__ = ["work_dir"]  # the fixture, shared with R9(1)

SEEDS = 8
SOAK_SEEDS = 100
POWER_CUTS = int(os.environ.get("R9_POWER_CUTS", "200"))
SOAK_POWER_CUTS = 2000
#: The child's cut comes before its k-th fsync, k uniform in 1..MAX_FSYNC (about 2 per append).
MAX_FSYNC = 400
FSYNCS = ("sync", "sync_dir")


def durable_swaps(ref: Reference, done: list[MutatingCall], part_dir: str) -> list[bool]:
    """Per group: whether every ``.cleaned`` -> ``.swap`` rename of it is in ``done`` and a
    directory fsync of the partition came after the last of them (so the swap is durable)."""
    out = []
    for lo, _ in ref.groups:
        prefix = f"{lo:020d}."
        wanted = sum(
            1
            for c in ref.trace
            if c.op == "rename"
            and os.path.basename(c.path).startswith(prefix)
            and c.path.endswith(".cleaned")
        )
        renames = [
            i
            for i, c in enumerate(done)
            if c.op == "rename"
            and os.path.basename(c.path).startswith(prefix)
            and c.path.endswith(".cleaned")
        ]
        durable = len(renames) == wanted and any(
            c.op == "sync_dir" and os.path.abspath(c.path) == part_dir
            for c in done[renames[-1] + 1 :]
        )
        out.append(durable)
    return out


def check_restart(
    data: Path, clock: ManualClock, ref: Reference, durable: list[bool], states: Counter[str]
) -> list[str]:
    """The broken invariants after a cut (empty when all hold); counts each group's state."""
    problems: list[str] = []
    try:
        store = open_managed(data, clock=clock, config=BROKER)
    except Exception as exc:
        return [f"the log does not load: {type(exc).__name__}: {exc}"]
    try:
        left = leftovers(data)
        if left:
            problems.append(f"temporary files left after startup: {left}")
        try:
            recs = records(store)
        except Exception as exc:
            return [*problems, f"corrupt read: {type(exc).__name__}: {exc}"]
        offsets = [o for o, _, _ in recs]
        if any(a >= b for a, b in itertools.pairwise(offsets)):
            problems.append("offsets do not strictly increase (duplicates?)")
        if (store.log_start_offset(*TP), store.log_end_offset(*TP)) != (ref.log_start, ref.log_end):
            problems.append(
                f"log start/end {store.log_start_offset(*TP)}/{store.log_end_offset(*TP)}, "
                f"expected {ref.log_start}/{ref.log_end}"
            )
        for i, (lo, hi) in enumerate(ref.groups):
            mine = [r for r in recs if lo <= r[0] < hi]
            old = [r for r in ref.pre if lo <= r[0] < hi]
            new = [r for r in ref.post if lo <= r[0] < hi]
            if mine in (old, new):
                states["same pre/post" if old == new else "post" if mine == new else "pre"] += 1
            if mine not in (old, new):
                problems.append(
                    f"group [{lo}, {hi}) is neither pre- nor post-clean: offsets "
                    f"{[r[0] for r in mine]}, pre {[r[0] for r in old]}, post {[r[0] for r in new]}"
                )
            elif durable[i] and new not in (mine, old):
                problems.append(f"group [{lo}, {hi}) is old although its swap was fsynced")
        fuo = ref.groups[-1][1]
        if [r for r in recs if r[0] >= fuo] != [r for r in ref.pre if r[0] >= fuo]:
            problems.append(f"records at or after the first uncleanable offset {fuo} changed")
        mine_map, pre_map, post_map = key_map(recs), key_map(ref.pre), key_map(ref.post)
        for key in pre_map.keys() | mine_map.keys():
            got = mine_map.get(key)
            if got not in (pre_map.get(key), post_map.get(key)):
                problems.append(
                    f"latest record of {key!r} is {got}, expected {pre_map.get(key)} (pre) or "
                    f"{post_map.get(key)} (post)"
                )
        result = manager_of(store).clean(clock.now)
        if result.uncleanable:
            problems.append(f"the next clean failed: {result.uncleanable}")
        if records(store) != ref.post:
            problems.append("the next clean did not reach the post-clean records")
    finally:
        close_managed(store)
    return problems


def run_cuts(work: Path, seeds: int, base_seed: int) -> tuple[int, float]:
    clock = ManualClock()
    pristine = work / "pristine"
    build(pristine, clock, superseded_tail=False)
    ref = reference(pristine, work / "reference", clock)
    n = sum(1 for c in ref.trace if c.op in FSYNCS)
    assert n >= 10, f"a clean of several groups has many fsyncs, got {n}"
    failures: list[str] = []
    cuts = 0
    states: Counter[str] = Counter()
    started = time.monotonic()
    for k in range(1, n + 1):
        for s in range(seeds):
            seed = base_seed + 1000 * k + s
            data = work / f"cut-{k}-{s}"
            shutil.copytree(pristine, data)
            fs = PowerLossFileSystem()
            store = open_managed(data, clock=clock, config=BROKER, fs=fs)
            opened = fs.calls
            fs.crash_at_op(k)
            with pytest.raises(SimulatedCrash):
                manager_of(store).clean(clock.now)
            drop_crashed(store)
            crash = fs.crashed
            assert crash is not None and fs.trace is not None
            cut = fs.power_cut(random.Random(seed))
            cuts += 1
            done = fs.trace[opened : crash.call.number - 1]
            durable = durable_swaps(ref, done, os.path.abspath(data / PART))
            where = (
                f"seed {seed}: power cut before fsync {k}/{n} ({crash.call.op} "
                f"{os.path.basename(crash.call.path)}), left {cut.describe()}"
            )
            failures += [f"{where}: {p}" for p in check_restart(data, clock, ref, durable, states)]
            shutil.rmtree(data)
    elapsed = time.monotonic() - started
    print(
        f"R9 power loss: {n} fsync points of the clean x {seeds} seeds = {cuts} power cuts "
        f"in {elapsed:.1f} s (groups {ref.groups}, replacing {ref.old_bases}); group states "
        f"after the cuts: {dict(states)}"
    )
    assert not failures, f"{len(failures)} broken invariants:\n" + "\n".join(failures[:30])
    return cuts, elapsed


@pytest.mark.slow
def test_r9_power_loss_at_every_fsync_of_a_clean_and_its_swap(work_dir: Path) -> None:
    run_cuts(work_dir, SEEDS, base_seed=90_000)


@pytest.mark.soak
def test_r9_power_loss_soak(work_dir: Path) -> None:
    run_cuts(work_dir, SOAK_SEEDS, base_seed=random.SystemRandom().randrange(2**31))


# --- R9(2), power-loss half: random cuts during continuous cleaning with appends ---------------

ACK = struct.Struct(">qhqb")  # offset, key number, value number (unique), tombstone flag


CLEANER_FILES = (".cleaned", ".swap", ".swaprange", "cleaner-offset-checkpoint", ".deleted")


def _child(data: Path, seed: int, ack_fd: int) -> bool:
    """Append (P-sync) while the background cleaner cleans, until the filesystem dies before
    its k-th fsync; then cut the power. Returns whether that fsync was of a cleaner's file."""
    rng = random.Random(seed)
    fs = PowerLossFileSystem(trace=False)
    store = open_managed(
        data,
        clock=warp_clock,
        config={**BROKER, "log.cleaner.backoff.ms": 5},
        background=True,
        fs=fs,
    )
    fs.crash_at_op(rng.randint(1, MAX_FSYNC))
    value = seed * 1_000_000
    try:
        for _ in range(100_000):  # far more fsyncs than MAX_FSYNC
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
            acks = [ACK.pack(base + i, k, v, t) for i, (k, v, t) in enumerate(batch)]
            os.write(ack_fd, b"".join(acks))
    except SimulatedCrash:
        pass
    except Exception:
        # A read racing with the crash in another thread finds its descriptor closed; once the
        # power is gone nothing the process does matters any more.
        if fs.crashed is None:
            raise
    fs.power_cut(rng)
    crash = fs.crashed
    assert crash is not None
    return os.path.basename(crash.call.path).endswith(CLEANER_FILES)


def _drain(read_fd: int) -> list[tuple[int, int, int, int]]:
    chunks = []
    while chunk := os.read(read_fd, 1 << 16):
        chunks.append(chunk)
    data = b"".join(chunks)
    data = data[: len(data) - len(data) % ACK.size]
    return [ACK.unpack_from(data, i) for i in range(0, len(data), ACK.size)]


def power_cuts_during_continuous_cleaning(tmp_path: Path, cuts: int) -> None:
    seed = random.SystemRandom().randrange(2**31)
    data = tmp_path / "data"
    with open_managed(data, clock=warp_clock, config=BROKER) as store:
        store.create_topic(
            TOPIC,
            1,
            {
                "cleanup.policy": "compact",
                "flush.messages": 1,  # P-sync: an acknowledged append was fsynced
                "segment.bytes": 2048,
                "min.cleanable.dirty.ratio": 0.01,
                "delete.retention.ms": DELETE_RETENTION_MS,
                "file.delete.delay.ms": 1000,
                "segment.index.bytes": 4096,
            },
        )
    acked: dict[int, tuple[bytes, bytes | None]] = {}
    written: dict[int, tuple[bytes, bytes | None]] = {}
    mid_swap = deleting = at_cleaner_file = cleaned_runs = 0
    started = time.monotonic()
    for cut in range(cuts):
        child_seed = seed * 1000 + cut + 1
        context = f"seed {seed}, cut {cut} (child seed {child_seed})"
        read_fd, write_fd = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            pid = os.fork()
        if pid == 0:  # the child: append and clean until the power fails
            os.close(read_fd)
            code = 1
            try:
                code = 11 if _child(data, child_seed, write_fd) else 10
            except BaseException:
                traceback.print_exc()  # shown with the failure
            finally:
                os._exit(code)
        os.close(write_fd)
        for offset, key, value, tombstone in _drain(read_fd):
            record = (b"k%02d" % key, None if tombstone else b"k%02d:%d" % (key, value))
            assert written.get(offset, record) == record, f"offset {offset} acked twice ({context})"
            acked[offset] = written[offset] = record
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) in (10, 11), (
            f"the child failed before the power cut ({status}, {context})"
        )
        at_cleaner_file += os.WEXITSTATUS(status) == 11
        names = os.listdir(data / PART)
        mid_swap += any(n.endswith((".cleaned", ".swap")) for n in names)
        deleting += any(n.endswith(".deleted") for n in names)
        try:
            store = open_managed(data, clock=warp_clock, config=BROKER)
        except Exception as exc:
            raise AssertionError(f"the log does not load ({context}): {exc}") from exc
        try:
            assert leftovers(data) == [], f"temporary files after startup ({context})"
            recs = records(store)
            offsets = [o for o, _, _ in recs]
            assert all(a < b for a, b in itertools.pairwise(offsets)), context
            known = max(written, default=-1)
            end = store.log_end_offset(*TP)
            assert end > max(acked, default=-1), f"acked lost: log end {end} ({context})"
            for o, k, v in recs:
                if o in written:
                    assert written[o] == (k, v), f"record {o} is not what was written ({context})"
                else:  # written, but the cut came before its acknowledgement
                    assert o > known and k is not None, f"foreign record {o} ({context})"
                    assert v is None or v.startswith(k + b":"), f"foreign record {o} ({context})"
                    written[o] = (k, v)
            # Records past the log end that were written but not acknowledged are gone for good:
            # the next appends reuse their offsets.
            for o in [o for o in written if o >= end]:
                assert o not in acked, f"acked record {o} beyond the log end {end} ({context})"
                del written[o]
            cleaned_runs += latest_values_then_fixpoint(store, data, written, recs, context)
        finally:
            close_managed(store)  # a clean close: the next child starts from a durable state
    elapsed = time.monotonic() - started
    print(
        f"R9(2) power loss, seed {seed}: {cuts} power cuts in {elapsed:.1f} s; {at_cleaner_file} "
        f"before an fsync of a cleaner's file; {mid_swap} left .cleaned/.swap files and "
        f"{deleting} .deleted files on disk; {len(acked)} acked records; {cleaned_runs} "
        f"restarts found dirt to clean"
    )
    assert mid_swap > 0 or cuts < 20, f"no cut landed during a swap (seed {seed})"


@pytest.mark.slow
def test_r9_power_loss_during_continuous_cleaning(work_dir: Path) -> None:
    power_cuts_during_continuous_cleaning(work_dir, POWER_CUTS)


@pytest.mark.soak
@pytest.mark.timeout(4 * 3600)
def test_r9_power_loss_during_continuous_cleaning_soak(work_dir: Path) -> None:
    power_cuts_during_continuous_cleaning(work_dir, SOAK_POWER_CUTS)
