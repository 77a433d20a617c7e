"""Disk full (ENOSPC) at every mutating call of a cleaning.

A compacted log of several segments (a clean section, tombstones, enough dirt that one
``LogManager.clean`` rewrites several groups) is cleaned once on a
:class:`FaultInjectingFileSystem` to list the mutating calls the iteration makes: writes of the
``.cleaned`` files and their indexes, fsyncs, the swap renames, the directory fsyncs, the
cleaner checkpoint. Then, for every one of those calls, a fresh copy of the log is cleaned with
that call failing with ENOSPC, in two ways: once (the call alone fails), and "disk full" (from
that call on, every create and write fails until space returns). The round's helper threads make
the global call numbers differ between runs, so a call is named by its operation, its file and
its occurrence on that file, which do not. Checked after each failing iteration:

* ``LogManager.clean`` raised nothing; the result reports the I/O error (with the errno),
  counted as an I/O error and not as an attempt towards ``compactlog.cleaner.max.attempts``;
  the metric ``compactlog-cleaner-io-errors`` counts it;
* in the running process the log is readable: offsets strictly increase, the log end offset is
  unchanged, and the key -> latest (offset, value) map is the one from before the cleaning
  (tombstones included: ``delete.retention.ms`` is long);
* after space returns and the back-off passes, the next iteration cleans the partition
  without an error (its checkpoint reaches the uninterrupted cleaning's end offset) and leaves
  no ``.cleaned`` or ``.swap`` file, with the same key map; a restart (a plain filesystem)
  loads it with no temporary file left and the same key map.

Before this test, an ENOSPC inside the swap left ``.cleaned``/``.swap`` files that a later round
never removed (its groups start elsewhere), and one after the segment map switched left old
segments under their final names beside the new one (offsets out of order in the running
process); :meth:`compactlog.storage.local_log.LocalLog.replace_segments` now undoes the first and
finishes the second.
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import close_managed, manager_of, open_managed
from tests.support.faultfs import FaultInjectingFileSystem, SimulatedCrash

TOPIC = "t"
TP = (TOPIC, 0)
PART = f"{TOPIC}-0"
BACKOFF_MS = 1000
BROKER = {
    "log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024,
    "log.cleaner.backoff.ms": BACKOFF_MS,
}
#: Calls that need space: they fail while the disk is full.
NEEDS_SPACE = ("create", "write_at", "append", "truncate", "makedirs")
RAM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

Call = tuple[str, str, int]  # (op, path relative to the data directory, occurrence)


@pytest.fixture(scope="module")
def pristine() -> Iterator[Path]:
    """The log to clean, closed cleanly: a cleaned section, then more dirt."""
    root = Path(tempfile.mkdtemp(prefix="diskfull-", dir=RAM_DIR))
    data = root / "pristine"
    clock = ManualClock()
    store = open_managed(data, clock=clock, config=BROKER)
    store.create_topic(
        TOPIC,
        1,
        {
            "cleanup.policy": "compact",
            "segment.bytes": 900,
            "delete.retention.ms": 10 * 24 * 3600 * 1000,
            "min.cleanable.dirty.ratio": 0.01,
            "segment.index.bytes": 4096,
            "index.interval.bytes": 128,
        },
    )
    n = 0
    for rounds in (3, 4):
        for _ in range(rounds):
            for _ in range(10):
                key = b"k%02d" % (n * 7 % 13)
                value = None if n % 9 == 4 else b"value-%04d" % n
                store.append(TOPIC, 0, [(key, value)], compression="gzip" if n % 5 else "none")
                n += 1
            store.roll(TOPIC, 0)
        if rounds == 3:
            manager_of(store).clean(clock.now)
    store.append(TOPIC, 0, [(b"active", b"a")])
    close_managed(store)
    yield data
    shutil.rmtree(root, ignore_errors=True)


def key_map(store: Store) -> dict[bytes, tuple[int, bytes | None]]:
    records = list(store.read(TOPIC, 0, store.log_start_offset(*TP)))
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    return {r.key: (r.offset, r.value) for r in records if r.key is not None}


def temporary_files(data: Path) -> list[str]:
    return sorted(n for n in os.listdir(data / PART) if n.endswith((".cleaned", ".swap")))


class CallCounter:
    """Names each mutating call by (op, relative path, occurrence of that op on that path)."""

    def __init__(self, data: Path) -> None:
        self._root = str(data)
        self._seen: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def name(self, op: str, path: str) -> Call:
        relative = os.path.relpath(path, self._root)
        with self._lock:
            k = self._seen.get((op, relative), 0) + 1
            self._seen[op, relative] = k
        return op, relative, k


def reference_calls(pristine: Path, work: Path) -> tuple[list[Call], dict[bytes, object], int]:
    data = work / "reference"
    shutil.copytree(pristine, data)
    fs = FaultInjectingFileSystem()
    clock = ManualClock()
    store = open_managed(data, clock=clock, config=BROKER, fs=fs)
    before = key_map(store)
    counter = CallCounter(data)
    calls: list[Call] = []

    cleaning = threading.Event()

    def record(number: int, op: str, path: str) -> bool:
        if cleaning.is_set():
            calls.append(counter.name(op, path))
        return False

    fs.fail_when(record)
    cleaning.set()
    result = manager_of(store).clean(clock.now)
    cleaning.clear()
    assert result.cleaned == TP and not result.uncleanable, result
    assert result.stats is not None and result.stats.groups >= 3, result.stats
    assert key_map(store) == before
    close_managed(store)
    return calls, dict(before), result.end_offset


@pytest.mark.parametrize("mode", ["once", "disk-full"])
def test_enospc_at_every_mutating_call_of_a_cleaning(pristine: Path, mode: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="diskfull-", dir=RAM_DIR))
    try:
        calls, before, end_offset = reference_calls(pristine, work)
        kinds = {op for op, _, _ in calls}
        assert {"create", "write_at", "sync", "rename", "sync_dir"} <= kinds, kinds
        problems: list[str] = []
        for target in calls:
            try:
                problem = run_failing_at(pristine, work / "run", target, mode, before, end_offset)
            except Exception as exc:  # every call is reported, not only the first
                problem = f"{type(exc).__name__}: {exc}".splitlines()[0]
            if problem:
                problems.append(f"{target}: {problem}")
            shutil.rmtree(work / "run")
        print(f"ENOSPC ({mode}) at each of {len(calls)} mutating calls of a cleaning")
        assert not problems, "\n".join(problems)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_failing_at(
    pristine: Path,
    data: Path,
    target: Call,
    mode: str,
    before: dict[bytes, object],
    end_offset: int,
) -> str | None:
    shutil.copytree(pristine, data)
    fs = FaultInjectingFileSystem(trace=False)
    clock = ManualClock()
    store = open_managed(data, clock=clock, config=BROKER, fs=fs)
    counter = CallCounter(data)
    full = threading.Event()

    def fails(number: int, op: str, path: str) -> bool:
        if counter.name(op, path) == target:
            full.set()
            return True
        return mode == "disk-full" and full.is_set() and op in NEEDS_SPACE

    fs.fail_when(fails, errno.ENOSPC)
    manager = manager_of(store)
    try:
        result = manager.clean(clock.now)
        if not full.is_set():
            return "the call was never made"
        failure = result.failures.get(TP)
        if failure is None or failure.attempts != 0 or failure.io_errors != 1:
            return f"not reported as one I/O error: {result}"
        if "No space left" not in result.uncleanable.get(TP, ""):
            return f"no ENOSPC in the result: {result.uncleanable}"
        if manager.cleaner.gauges()["compactlog-cleaner-io-errors"] != 1:
            return "compactlog-cleaner-io-errors is not 1"
        if key_map(store) != before:
            return "the key map changed in the running process"

        fs.clear_faults()  # space returns
        clock.advance(BACKOFF_MS)
        again = manager.clean(clock.now)
        if again.failures or again.uncleanable:
            return f"the next iteration failed: {again}"
        # It cleans, unless the failed call came after the cleaner checkpoint was in place.
        if manager.cleaner.manager.checkpoints().get(TP) != end_offset:
            return f"the next iteration did not clean to {end_offset}: {again}"
        if temporary_files(data):
            return f"left after the next iteration: {temporary_files(data)}"
        if key_map(store) != before:
            return "the key map changed after the next iteration"
    finally:
        fs.clear_faults()
        close_managed(store)
    with_restart = open_managed(data, clock=ManualClock(clock.now), config=BROKER)
    try:
        if temporary_files(data):
            return f"left after a restart: {temporary_files(data)}"
        if key_map(with_restart) != before:
            return "the key map changed after a restart"
    finally:
        close_managed(with_restart)
    return None


@pytest.mark.parametrize("crash_after", [1, 2, 3, 4, 5])
def test_a_crash_while_undoing_a_failed_swap_restarts_to_a_whole_group(
    pristine: Path, crash_after: int
) -> None:
    """ENOSPC at the directory fsync that makes a group's ``.swap`` files durable (before the
    segment map switches), then a crash at each call of the undo (removing the group's index
    files, its log, the range file): the restart loads the log with no temporary file and the
    key map from before, and every offset-index entry points at the batch of its offset. (The
    undo removes the group's log last, so that no index ``.swap`` is left without its log: the
    loader would rename it over the old segment's index. The loader's index checks catch that
    too, so this test passes with either order; it holds the restart, not the order.)"""
    work = Path(tempfile.mkdtemp(prefix="diskfull-", dir=RAM_DIR))
    try:
        calls, before, _ = reference_calls(pristine, work)
        renamed = next(
            i
            for i, (op, path, _) in enumerate(calls)
            if op == "rename" and path.endswith(".log.cleaned")
        )
        target = next(c for c in calls[renamed:] if c[0] == "sync_dir" and c[1] == PART)
        data = work / "run"
        shutil.copytree(pristine, data)
        fs = FaultInjectingFileSystem()
        store = open_managed(data, clock=ManualClock(), config=BROKER, fs=fs)
        counter = CallCounter(data)

        def fails(number: int, op: str, path: str) -> bool:
            if counter.name(op, path) == target:
                fs.crash_at(number + crash_after)
                return True
            return False

        fs.fail_when(fails, errno.ENOSPC)
        with pytest.raises(SimulatedCrash):
            manager_of(store).clean()
        store._release()  # the crash closed its files; only the directory lock is left
        with open_managed(data, clock=ManualClock(), config=BROKER) as restarted:
            assert temporary_files(data) == []
            assert key_map(restarted) == before
            # Each segment keeps its own index: every entry points at the batch of its offset.
            for segment in restarted.log(*TP).segments():
                raw = Path(segment.log_path).read_bytes()
                for offset, position in segment.offset_index.items():
                    (base,) = struct.unpack_from(">q", raw, position)
                    (delta,) = struct.unpack_from(">i", raw, position + 23)
                    assert base <= offset <= base + delta, (segment.log_path, offset, position)
    finally:
        shutil.rmtree(work, ignore_errors=True)
