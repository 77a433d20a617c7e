"""R11 (reads concurrent with cleaning and retention) and the background cleaner threads.

R11: a reader thread reads the whole partition of a ``compact,delete`` topic again and again
with ``Store.read`` while the main thread appends, rolls, cleans (``LogManager.clean``: cleaning
swaps segments, and the cleaner's retention pass deletes the oldest ones under ``retention.bytes``,
raising the log start offset). Checked in every pass: offsets strictly increase (so no record is
served twice), every record is the one appended at its offset, and no read fails except with
``OffsetOutOfRangeError`` for a start offset that a concurrent retention run moved the log start
offset past. Between two passes: every record the second pass sees below the log end offset
captured before the first one started, and at or above the first one's start, was seen by the
first one too (a record that was there before and after the pass was there throughout, since
cleaning never brings a record back, so a pass must not skip it). The Python switch interval is
lowered so that the threads interleave inside swaps and deletions. The replaced and deleted
segments wait ``file.delete.delay.ms`` (60 s of the manual clock, which moves 5 ms per step)
before their files go, as in Kafka, so a pass never reads a segment whose files were removed.
The run goes on until 100 cleanings and 30 segment deletions have happened (about 3-4 s, at
most 15 s); a fifth of the passes start in the middle of the log and a tenth at the previous
pass's start, which retention may have passed meanwhile (the allowed out-of-range case).

Background cleaning: ``open_managed(..., background=True)`` with the real clock and
``log.cleaner.backoff.ms`` of 50 ms; appends continue while the cleaner thread cleans (its
checkpoint entry appears and then advances), nothing appended is lost, ``close()`` stops every
thread, and a store closed while a cleaning round is writing its ``.cleaned`` segment (slowed
down through the filesystem seam) reopens with no temporary file and every record intact.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compactlog.errors import OffsetOutOfRangeError
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import close_managed, manager_of, open_managed
from tests.support.faultfs import FaultInjectingFileSystem, MutatingCall

TOPIC = "t"
TP = (TOPIC, 0)
PART = f"{TOPIC}-0"
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
#: A 2 MiB offset map (the 128 MiB default is cleared, page by page, at every clean).
BROKER = {"log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024}
THREAD_NAMES = ("kafka-log-cleaner-thread-", "compactlog-scheduler")

Rec = tuple[int, bytes | None, bytes | None]


def records(store: Store) -> list[Rec]:
    return [(r.offset, r.key, r.value) for r in store.read(TOPIC, 0, store.log_start_offset(*TP))]


def service_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(THREAD_NAMES)]


def check_against_model(recs: list[Rec], appended: dict[int, tuple[bytes, bytes | None]]) -> None:
    """Offsets increase, each record is the one appended there, and each key's last write is
    there (tombstones too: the real clock never reaches their delete horizon here)."""
    offsets = [o for o, _, _ in recs]
    assert all(a < b for a, b in itertools.pairwise(offsets))
    for o, k, v in recs:
        assert appended[o] == (k, v), f"record {o} is not what was appended"
    latest: dict[bytes, int] = {}
    for o in sorted(appended):
        latest[appended[o][0]] = o
    present = {k: (o, v) for o, k, v in recs if k is not None}
    for key, o in latest.items():
        assert present.get(key) == (o, appended[o][1]), f"the last write of {key!r} is lost"


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Let threads switch every 50 us instead of 5 ms, so they interleave inside operations."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(5e-5)
    yield
    sys.setswitchinterval(old)


# --- R11 --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("fast_switching")
def test_r11_reads_concurrent_with_cleaning_and_retention(tmp_path: Path) -> None:
    seed = random.SystemRandom().randrange(2**31)
    rng = random.Random(seed)
    clock = ManualClock()
    store = open_managed(tmp_path / "data", clock=clock, config=BROKER)
    store.create_topic(
        TOPIC,
        1,
        {
            "cleanup.policy": "compact,delete",
            "segment.bytes": 1024,
            "retention.bytes": 1500,
            "retention.ms": -1,
            "min.cleanable.dirty.ratio": 0.01,
            "delete.retention.ms": 50,
            "segment.index.bytes": 4096,
            "index.interval.bytes": 128,
        },
    )
    appended: dict[int, tuple[bytes, bytes | None]] = {}
    lock = threading.Lock()  # guards ``appended`` (the reader checks records against it)
    stop = threading.Event()
    errors: list[str] = []
    stats = {"passes": 0, "records read": 0, "out of range": 0, "random starts": 0}
    reader_rng = random.Random(seed + 1)

    def one_pass(start: int) -> tuple[int, list[Rec]] | None:
        end = store.log_end_offset(*TP)
        seen: list[Rec] = []
        try:
            for r in store.read(TOPIC, 0, start):
                if seen and r.offset <= seen[-1][0]:
                    errors.append(f"offset {r.offset} after {seen[-1][0]} in one pass")
                    return None
                seen.append((r.offset, r.key, r.value))
        except OffsetOutOfRangeError as exc:
            if start >= store.log_start_offset(*TP):
                errors.append(f"out of range at {start}, above the log start offset: {exc}")
            stats["out of range"] += 1
            return None
        with lock:
            for o, k, v in seen:
                if appended.get(o) != (k, v):
                    errors.append(f"record {o} read as {(k, v)}, appended {appended.get(o)}")
        return end, seen

    def reader() -> None:
        previous: tuple[int, int, set[int]] | None = None  # start, end, offsets of last pass
        try:
            while not stop.is_set() and not errors:
                start = store.log_start_offset(*TP)
                if previous is not None and reader_rng.random() < 0.1:
                    start = previous[0]  # a stale start: retention may have passed it
                elif reader_rng.random() < 0.2:  # sometimes from the middle of the log
                    start = reader_rng.randint(start, store.log_end_offset(*TP))
                    stats["random starts"] += 1
                done = one_pass(start)
                if done is None:
                    previous = None
                    continue
                end, seen = done
                stats["passes"] += 1
                stats["records read"] += len(seen)
                if previous is not None:
                    p_start, p_end, p_offsets = previous
                    skipped = [o for o, _, _ in seen if p_start <= o < p_end and o not in p_offsets]
                    if skipped:
                        errors.append(f"a pass from {p_start} skipped live records {skipped[:5]}")
                previous = (start, end, {o for o, _, _ in seen})
                time.sleep(0.0002)  # leave the writer some of the interpreter
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=reader, name="r11-reader")
    thread.start()
    cleaned = deleted = 0
    try:
        # A guard against a hang, not a speed test: a fresh checkout compiles the numba
        # kernels (several seconds) during the first cleanings.
        deadline = time.monotonic() + 120.0
        step = 0
        while not errors and (cleaned < 100 or deleted < 30):
            assert time.monotonic() < deadline, f"too slow: {cleaned} cleanings, {deleted} deleted"
            batch = []
            for _ in range(rng.randint(1, 6)):
                key = b"k%02d" % rng.randint(1, 30)
                batch.append((key, None if rng.random() < 0.1 else b"%s:%d" % (key, step)))
            with lock:
                base = store.append(TOPIC, 0, batch, compression=rng.choice(CODECS))
                for i, (k, v) in enumerate(batch):
                    appended[base + i] = (k, v)
            if step % 4 == 3:
                store.roll(TOPIC, 0)
            if step % 3 == 2:
                result = manager_of(store).clean(clock.now)
                assert not result.uncleanable, result.uncleanable
                cleaned += result.cleaned is not None
                deleted += sum(result.segments_deleted.values())
            clock.advance(5)
            step += 1
    finally:
        stop.set()
        thread.join()
        close_managed(store)
    print(
        f"R11 seed {seed}: {step} steps, {cleaned} cleanings, {deleted} segments deleted by "
        f"retention, reader {stats}"
    )
    assert not errors, f"seed {seed}: {errors[:10]}"
    assert stats["passes"] > 100, f"seed {seed}: too few read passes"


# --- background cleaner threads ---------------------------------------------------------------


def wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.01)


def test_background_cleaner_cleans_while_appends_continue(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="compactlog")
    rng = random.Random(11)
    data = tmp_path / "data"
    store = open_managed(data, config={**BROKER, "log.cleaner.backoff.ms": 50}, background=True)
    assert any(n.startswith(THREAD_NAMES[0]) for n in service_threads())
    store.create_topic(
        TOPIC,
        1,
        {"cleanup.policy": "compact", "segment.bytes": 2048, "min.cleanable.dirty.ratio": 0.01},
    )
    appended: dict[int, tuple[bytes, bytes | None]] = {}
    step = 0

    def append_some(n: int) -> None:
        nonlocal step
        for _ in range(n):
            key = b"k%02d" % rng.randint(1, 30)
            value = None if rng.random() < 0.1 else b"%s:%d" % (key, step)
            appended[store.append(TOPIC, 0, [(key, value)])] = (key, value)
            step += 1

    def checkpoint() -> int | None:
        return store.cleaner_offset_checkpoint.read().get(TP)

    try:
        # Appends go on while the cleaner thread works: segments roll on size by themselves.
        deadline = time.monotonic() + 10
        while checkpoint() is None:
            assert time.monotonic() < deadline, "the cleaner thread never cleaned (10 s)"
            append_some(20)
        first = checkpoint()
        assert first is not None
        deadline = time.monotonic() + 10
        while (checkpoint() or 0) <= first:
            assert time.monotonic() < deadline, "the cleaner thread cleaned only once (10 s)"
            append_some(20)
        append_some(50)
        assert records(store)  # readable while the threads run
    finally:
        close_managed(store)
    assert service_threads() == [], "close() left threads running"
    assert not manager_of(store).cleaner.running()  # type: ignore[attr-defined]
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert problems == [], problems
    with open_managed(data, config=BROKER) as again:
        recs = records(again)
        check_against_model(recs, appended)
        assert len(recs) < len(appended), "nothing was compacted"


class SlowCleanedWrites(FaultInjectingFileSystem):
    """Writes to ``.cleaned`` files take 30 ms each: a cleaning round is caught in the act."""

    def _performed(self, call: MutatingCall, args: tuple[object, ...]) -> None:
        if call.op in ("write_at", "append") and call.path.endswith(".cleaned"):
            time.sleep(0.03)


def test_store_closed_mid_clean_reopens_consistent(tmp_path: Path) -> None:
    rng = random.Random(12)
    data = tmp_path / "data"
    config = {**BROKER, "log.cleaner.backoff.ms": 50, "log.cleaner.io.buffer.size": 4096}
    # Build the data first (no cleaner), so that one round has many chunks and groups.
    appended: dict[int, tuple[bytes, bytes | None]] = {}
    with open_managed(data, config=config) as store:
        store.create_topic(
            TOPIC,
            1,
            {"cleanup.policy": "compact", "segment.bytes": 4096, "min.cleanable.dirty.ratio": 0.01},
        )
        for step in range(600):
            key = b"k%03d" % rng.randint(1, 200)
            value = None if rng.random() < 0.1 else b"%s:%d:%s" % (key, step, b"x" * 40)
            appended[store.append(TOPIC, 0, [(key, value)])] = (key, value)
        store.roll(TOPIC, 0)
        before = records(store)

    store = open_managed(data, config=config, fs=SlowCleanedWrites(trace=False), background=True)
    directory = data / PART
    try:
        wait_for(
            lambda: any(n.endswith(".cleaned") for n in os.listdir(directory)),
            10,
            "the cleaner thread to start writing a .cleaned segment",
        )
        time.sleep(0.2)  # let it swap a few groups in: the round is half done at close()
    finally:
        started = time.monotonic()
        close_managed(store)
        closing = time.monotonic() - started
    assert service_threads() == [], "close() left threads running"
    assert closing < 5, f"close() took {closing:.1f} s to stop the cleaner"
    with open_managed(data, config=BROKER) as again:
        left = [n for n in os.listdir(directory) if n.endswith((".cleaned", ".swap", ".deleted"))]
        assert left == [], left
        recs = records(again)
        check_against_model(recs, appended)
        assert {o for o, _, _ in recs} <= {o for o, _, _ in before}
        # and the cleaning can be finished later
        manager_of(again).clean_log(TOPIC, 0)
        check_against_model(records(again), appended)


def test_on_demand_cleaning_alongside_background_threads(tmp_path: Path) -> None:
    """LogManager.clean() from application threads while the cleaner threads run: each cleaner (and
    its offset map) serves one thread at a time, so no round corrupts another."""
    store = open_managed(
        tmp_path / "data",
        config={"log.cleaner.backoff.ms": 1, "log.cleaner.threads": 2},
        background=True,
    )
    try:
        topics = [f"t{i}" for i in range(6)]
        for topic in topics:
            store.create_topic(
                topic,
                1,
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": 16384,
                    "min.cleanable.dirty.ratio": 0.01,
                },
            )
        latest: dict[tuple[str, bytes], bytes] = {}
        failures: list[str] = []
        stop = threading.Event()

        def on_demand() -> None:
            while not stop.is_set():
                try:
                    result = manager_of(store).clean()
                    if result.uncleanable:
                        failures.append(f"uncleanable: {result.uncleanable}")
                except Exception as exc:
                    failures.append(f"{type(exc).__name__}: {exc}")

        callers = [threading.Thread(target=on_demand) for _ in range(3)]
        for t in callers:
            t.start()
        rng = random.Random(7)
        for i in range(3000):
            topic = rng.choice(topics)
            batch = []
            for j in range(10):
                key = b"k%03d" % rng.randint(1, 300)
                value = b"%s:%d:%d" % (key, i, j)
                batch.append((key, value))
                latest[(topic, key)] = value
            store.append(topic, 0, batch)
            if i % 20 == 19:
                store.roll(topic, 0)
        stop.set()
        for t in callers:
            t.join()
        assert failures == []
        assert manager_of(store).cleaner.manager.uncleanable_partitions() == {}
        for topic in topics:
            read = {r.key: r.value for r in store.read(topic, 0)}
            for (t, key), value in latest.items():
                if t == topic:
                    assert read[key] == value, (topic, key)
    finally:
        close_managed(store)
