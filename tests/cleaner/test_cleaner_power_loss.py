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
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import time
from pathlib import Path

import pytest

from tests.cleaner.test_cleaner_crash import (
    BROKER,
    PART,
    TOPIC,
    TP,
    Reference,
    build,
    drop_crashed,
    key_map,
    leftovers,
    records,
    reference,
    work_dir,
)
from tests.conftest import ManualClock
from tests.managed import close_managed, manager_of, open_managed
from tests.support.faultfs import MutatingCall, PowerLossFileSystem, SimulatedCrash

__all__ = ["work_dir"]  # the fixture, shared with R9(1)

SEEDS = 8
SOAK_SEEDS = 100
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


def check_restart(data: Path, clock: ManualClock, ref: Reference, durable: list[bool]) -> list[str]:
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
            failures += [f"{where}: {p}" for p in check_restart(data, clock, ref, durable)]
            shutil.rmtree(data)
    elapsed = time.monotonic() - started
    print(
        f"R9 power loss: {n} fsync points of the clean x {seeds} seeds = {cuts} power cuts "
        f"in {elapsed:.1f} s (groups {ref.groups}, replacing {ref.old_bases}, topic {TOPIC})"
    )
    assert not failures, f"{len(failures)} broken invariants:\n" + "\n".join(failures[:30])
    return cuts, elapsed


@pytest.mark.slow
def test_r9_power_loss_at_every_fsync_of_a_clean_and_its_swap(work_dir: Path) -> None:
    run_cuts(work_dir, SEEDS, base_seed=90_000)


@pytest.mark.soak
def test_r9_power_loss_soak(work_dir: Path) -> None:
    run_cuts(work_dir, SOAK_SEEDS, base_seed=random.SystemRandom().randrange(2**31))
