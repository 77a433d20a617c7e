"""R8: cleaner properties, as a Hypothesis state machine compared against a plain list model.

Rules: appends of 1 to 8 records (keys ``k01`` to ``k50``, unique values, about 10 % tombstones,
a random codec), rolls, cleaner runs (``LogManager.clean(now)``, or ``LogManager.clean_log``
whatever the dirty ratio), clock advances (some past ``delete.retention.ms``), resets of the cleaner
checkpoint to the log start offset (the whole log is dirty again: cleaning cleaned data must
change nothing but expired tombstones), clean and unclean reopens (the log must come back byte
for byte, the checkpoint too, and a clean shutdown must leave nothing to recover), and, on
topics that start with ``cleanup.policy=delete``, keyless records (about 5 %) until a rule
switches the topic to ``compact`` (spec 5.13: data written before the switch may lack keys).

Topic configs are drawn per example: ``segment.bytes`` (groups of one or several segments),
``index.interval.bytes`` (so that map building starts from real index entries),
``delete.retention.ms`` (0, 1 s, 60 s), ``min.compaction.lag.ms`` (0 or 3 s: some segments stay
uncleanable), ``min.cleanable.dirty.ratio`` (0.01 or 0.5: ``LogManager.clean`` then often declines)
and the offset map (Kafka's or compactlog's compact one).

After every cleaner run the log is compared with what spec 5.4 says it must be, computed
independently from the batches read just before the run, the first dirty offset (the
checkpoint) and the first uncleanable offset (active segment, ``min.compaction.lag.ms``, spec
4.3). From that follow, and are also asserted one by one with their own message:

(a) offsets strictly increase and are a subset of the offsets before;
(b) the order is preserved: every record left is the record that was at its offset;
(c) the map key -> (value, offset) is identical before and after, except for tombstones whose
    delete horizon had passed: a tombstone may go only if its batch carried a horizon (stamped
    by the first cleaning that kept it) and ``now >= horizon``; the model also checks the map
    against every record ever appended;
(d) every batch at or after the first uncleanable offset, and every segment file there, is
    byte-identical;
(e) the log start offset and the log end offset are unchanged;
(f) a second run with no new data (``LogManager.clean(now)`` and ``LogManager.clean_log``)
    changes no byte of any file of the partition (``.deleted`` files awaiting
    ``file.delete.delay.ms`` aside);
(g) not applicable: compactlog has no idempotent producers, so there is no producer state whose
    last batch must be kept (spec 5.6).

Budget (CI tier): the spec asks for 500 examples. At Hypothesis' default of 50 steps per
example that takes well over the 60 s this test may use on the 2-core CI machine, so it runs 500
examples of at most ``STEPS = 25`` steps: about 20 s here (a cleaner run with all its checks costs
a few ms, an example 30-40 ms on average including the store set-up). The stores live in
``/dev/shm`` when it exists, because fsync costs most of the time on a disk and R8 is not about
durability. Every example starts with up to ten batches of history so that short runs have dirt,
and rolling-then-cleaning is a rule of its own. The test prints what the runs did (``-s``):
typically ~2,000 cleaner runs of which ~550 rounds rewrote ~1,000 groups, ~200 tombstones
expired, ~50 keyless records dropped and ~40 rounds stopped early by min.compaction.lag.ms.
The soak tier (20,000 examples of at most 50 steps) is
``pytest -m soak tests/cleaner/test_cleaner_properties.py``; ``R8_EXAMPLES``/``R8_STEPS`` set
the CI tier's figures instead.
Hypothesis prints the falsifying steps and a ``@reproduce_failure`` blob on failure.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from compactlog.errors import PolicyViolationError
from compactlog.records import Record, RecordBatch
from compactlog.storage.log import Log
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import manager_of, open_managed

TOPIC = "t"
TP = (TOPIC, 0)
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
#: Far in the future, so that a segment without record timestamps (an empty cleaned segment,
#: whose largest timestamp is its file's real mtime, spec 4.3) never looks "young" to
#: min.compaction.lag.ms just because the manual clock lags the wall clock.
START_MS = 4_000_000_000_000
EXAMPLES = int(os.environ.get("R8_EXAMPLES", "500"))
STEPS = int(os.environ.get("R8_STEPS", "25"))
#: The soak tier's run (``pytest -m soak``): about 80 times the CI tier's work.
SOAK_EXAMPLES = 20_000
SOAK_STEPS = 50
#: One batch: (key 1..50, dice 0..99) per record; dice < 10 makes a tombstone, 10..14 a keyless
#: record while the topic is not compacted.
BATCH = st.lists(st.tuples(st.integers(1, 50), st.integers(0, 99)), min_size=1, max_size=8)
#: fsync costs most of the run time on a disk; R8 is not about durability, so use RAM if any.
RAM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
#: What the runs did (printed at the end, shown with ``pytest -s``).
STATS: collections.Counter[str] = collections.Counter()


# --- reading the log ------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    base: int
    last: int
    raw: bytes
    horizon: int | None
    records: tuple[Record, ...]

    @property
    def next_offset(self) -> int:
        return self.last + 1


@dataclass
class Snapshot:
    log_start: int
    log_end: int
    batches: list[Batch]
    segment_bases: list[int]
    files: dict[str, bytes] = field(default_factory=dict)

    def records(self) -> list[Record]:
        return [r for b in self.batches for r in b.records]


def read_batches(log: Log) -> list[Batch]:
    out = []
    for fb in log.iter_batches(log.log_start_offset):
        raw = bytes(fb.data)
        rb = RecordBatch(raw)
        out.append(Batch(rb.base_offset, rb.last_offset, raw, rb.delete_horizon_ms, tuple(rb)))
    return out


def partition_files(directory: str) -> dict[str, bytes]:
    """Every file of the partition but ``.deleted`` ones (they wait for file.delete.delay.ms)."""
    files = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".deleted"):
            files[name] = Path(directory, name).read_bytes()
    return files


def snapshot(store: Store, with_files: bool = True) -> Snapshot:
    log = store.log(*TP)
    return Snapshot(
        log.log_start_offset,
        log.log_end_offset,
        read_batches(log),
        [s.base_offset for s in log.segments()],
        partition_files(log.dir) if with_files else {},
    )


def key_map(records: list[Record]) -> dict[bytes, tuple[int, bytes | None]]:
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for r in records:
        if r.key is not None:
            latest[r.key] = (r.offset, r.value)
    return latest


def cleanable_range(store: Store, now: int, min_lag: int) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset) by spec 4.2/4.3, computed here from the
    checkpoint and the batches' own timestamps rather than by the cleaner's manager."""
    log = store.log(*TP)
    segments = log.segments()
    active = segments[-1]
    start, end = log.log_start_offset, log.log_end_offset
    checkpoint = store.cleaner_offset_checkpoint.read().get(TP)
    fdo = checkpoint if checkpoint is not None and start <= checkpoint <= end else start
    limit = min(end, active.base_offset)
    if min_lag > 0 and fdo <= active.base_offset:
        first = max(i for i, s in enumerate(segments) if s.base_offset <= fdo or i == 0)
        for s in segments[first:-1]:
            stamps = [b.header.max_timestamp for b in s.batches()]
            largest = max(stamps) if stamps and max(stamps) >= 0 else s.largest_timestamp()
            if largest > now - min_lag:
                limit = min(limit, s.base_offset)
                break
    fudo = max(fdo, limit)
    if fudo >= active.base_offset:
        return fdo, active.base_offset
    return fdo, max(s.base_offset for s in segments if s.base_offset <= fudo)


def expected_after_clean(
    before: Snapshot, fdo: int, fuo: int, now: int, delete_retention_ms: int
) -> list[tuple[int, int, int | None, tuple[Record, ...], bytes | None]]:
    """Spec 5.4 for a full round over [fdo, fuo) (the map holds every dirty key): per batch
    (base, last, horizon, kept records, exact bytes if copied verbatim)."""
    found: dict[bytes, int] = {}
    for r in before.records():
        if fdo <= r.offset < fuo and r.key is not None:
            found[r.key] = r.offset
    out: list[tuple[int, int, int | None, tuple[Record, ...], bytes | None]] = []
    for b in before.batches:
        if b.base >= fuo:
            out.append((b.base, b.last, b.horizon, b.records, b.raw))
            continue
        retain_tombstone = b.horizon is None or now < b.horizon
        kept = tuple(
            r
            for r in b.records
            if r.key is not None
            and r.offset >= found.get(r.key, -1)
            and (r.value is not None or retain_tombstone)
        )
        if kept:
            need_horizon = b.horizon is None and any(r.value is None for r in kept)
            horizon = now + delete_retention_ms if need_horizon else b.horizon
            verbatim = b.raw if len(kept) == len(b.records) and not need_horizon else None
            out.append((b.base, b.last, horizon, kept, verbatim))
        elif b.next_offset == before.log_end:
            # KAFKA-17076 as Kafka 4.4 has it: the batch ending at the high watermark (the log
            # end here) stays as an empty header.
            out.append((b.base, b.last, None, (), None))
    return out


# --- the machine ----------------------------------------------------------------------------


class CleanerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="r8-", dir=RAM_DIR)
        self.path = os.path.join(self.tmp, "data")
        self.clock = ManualClock(START_MS)
        self.store: Store | None = None
        self.broker: dict[str, Any] = {}
        self.compact = True
        self.delete_retention_ms = 0
        self.min_lag = 0
        self.next_value = 0
        # The model: every record ever appended, by offset, and the tombstones whose removal
        # was observed (and found legal) by a cleaner run.
        self.appended: dict[int, tuple[bytes | None, bytes | None]] = {}
        self.expired: set[int] = set()
        self.cleans = 0
        STATS["examples"] += 1

    @property
    def s(self) -> Store:
        assert self.store is not None
        return self.store

    def teardown(self) -> None:
        if self.store is not None:
            self.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- set-up ---------------------------------------------------------------------------
    @initialize(
        compact_from_start=st.sampled_from([True, True, True, False]),
        segment_bytes=st.sampled_from([450, 700, 1200, 3000]),
        index_interval=st.sampled_from([64, 4096]),
        delete_retention_ms=st.sampled_from([0, 1000, 60_000]),
        min_lag=st.sampled_from([0, 0, 3000]),
        ratio=st.sampled_from([0.01, 0.5]),
        offset_map=st.sampled_from(["kafka", "compact"]),
        initial=st.lists(st.tuples(BATCH, st.sampled_from(CODECS), st.booleans()), max_size=10),
    )
    def setup(
        self,
        compact_from_start: bool,
        segment_bytes: int,
        index_interval: int,
        delete_retention_ms: int,
        min_lag: int,
        ratio: float,
        offset_map: str,
        initial: list[tuple[list[tuple[int, int]], str, bool]],
    ) -> None:
        self.broker = {
            "log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024,
            "compactlog.cleaner.offset.map": offset_map,
        }
        self.store = open_managed(self.path, clock=self.clock, config=self.broker)
        self.compact = compact_from_start
        self.delete_retention_ms = delete_retention_ms
        self.min_lag = min_lag
        self.s.create_topic(
            TOPIC,
            1,
            {
                "cleanup.policy": "compact" if compact_from_start else "delete",
                "retention.ms": -1,
                "segment.bytes": segment_bytes,
                "segment.index.bytes": 4096,
                "index.interval.bytes": index_interval,
                "delete.retention.ms": delete_retention_ms,
                "min.compaction.lag.ms": min_lag,
                "min.cleanable.dirty.ratio": ratio,
            },
        )
        for records, codec, roll in initial:  # some history, so that short runs have dirt
            self.append(records, codec, 1)
            if roll:
                self.roll()

    # --- data -----------------------------------------------------------------------------
    @rule(
        records=st.lists(st.tuples(st.integers(1, 50), st.integers(0, 99)), min_size=1, max_size=8),
        codec=st.sampled_from(CODECS),
        times=st.integers(1, 4),
        gap=st.sampled_from([1, 1, 1, 2000]),
    )
    def append(self, records: list[tuple[int, int]], codec: str, times: int, gap: int = 1) -> None:
        for _ in range(times):
            batch: list[tuple[bytes | None, bytes | None]] = []
            for key, dice in records:
                value = b"v%d" % self.next_value
                self.next_value += 1
                if dice < 10:
                    batch.append((b"k%02d" % key, None))  # a tombstone
                elif dice < 15 and not self.compact:
                    batch.append((None, value))  # keyless, only before the topic compacts
                else:
                    batch.append((b"k%02d" % key, value))
            base = self.s.append(TOPIC, 0, batch, compression=codec)
            for i, (k, v) in enumerate(batch):
                self.appended[base + i] = (k, v)
            self.clock.advance(gap)

    @rule()
    def roll(self) -> None:
        self.s.roll(TOPIC, 0)

    @rule(ms=st.one_of(st.integers(1, 4000), st.integers(50_000, 120_000)))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    @precondition(lambda self: not self.compact)
    @rule()
    def switch_to_compact(self) -> None:
        self.s.alter_config(TOPIC, {"cleanup.policy": "compact"})
        self.compact = True

    @precondition(lambda self: self.compact)
    @rule()
    def reset_checkpoint(self) -> None:
        """Make the whole log dirty again (as a truncation does, spec 4.7)."""
        STATS["checkpoint resets"] += 1
        manager_of(self.s).cleaner.manager.update_checkpoint(TP, self.s.log_start_offset(*TP))  # type: ignore[attr-defined]

    @rule(clean_shutdown=st.booleans())
    def reopen(self, clean_shutdown: bool) -> None:
        before = snapshot(self.s, with_files=False)
        checkpoint = self.s.cleaner_offset_checkpoint.read()
        if clean_shutdown:
            self.s.close()
        else:
            self.s.abandon()
        self.store = open_managed(self.path, clock=self.clock, config=self.broker)
        if clean_shutdown:  # R6: nothing to recover or rebuild after a clean shutdown
            stats = self.s.load_stats[TP]
            assert (stats.segments_recovered, stats.indexes_rebuilt) == (0, 0), stats.messages
        after = snapshot(self.s, with_files=False)
        assert [b.raw for b in after.batches] == [b.raw for b in before.batches]
        assert (after.log_start, after.log_end) == (before.log_start, before.log_end)
        assert self.s.cleaner_offset_checkpoint.read() == checkpoint

    # --- the cleaner ----------------------------------------------------------------------
    @rule(on_demand=st.booleans(), wait=st.sampled_from([0, 1, 2000, 70_000]))
    def roll_and_clean(self, on_demand: bool, wait: int) -> None:
        """The common case, as its own rule so that short runs clean too."""
        self.s.roll(TOPIC, 0)
        self.clock.advance(wait)
        self.clean(on_demand)

    @rule(on_demand=st.booleans())
    def clean(self, on_demand: bool) -> None:
        store = self.s
        now = self.clock.now
        before = snapshot(store)
        expired_before = len(self.expired)
        fdo, fuo = cleanable_range(store, now, self.min_lag)
        on_demand = on_demand and self.compact
        result = (
            manager_of(store).clean_log(TOPIC, 0, now)
            if on_demand
            else manager_of(store).clean(now)
        )
        after = snapshot(store)
        assert result.uncleanable == {}, result.uncleanable
        context = (
            f"clean #{self.cleans} at {now} ({'clean_log' if on_demand else 'LogManager.clean'}): "
            f"expected range [{fdo}, {fuo}), cleaned={result.cleaned} "
            f"range=[{result.first_dirty_offset}, {result.end_offset})"
        )
        self.cleans += 1

        if result.cleaned is None:
            if on_demand:
                assert fuo <= fdo, f"clean_log declined a dirty log ({context})"
            assert after.files == before.files, f"no round ran but files changed ({context})"
        else:
            assert self.compact, f"a non-compacted topic was cleaned ({context})"
            assert result.cleaned == TP
            assert (result.first_dirty_offset, result.end_offset) == (fdo, fuo), context
            assert store.cleaner_offset_checkpoint.read()[TP] == fuo, context
        self.check_properties(before, after, fdo, fuo, now, result.cleaned is not None, context)
        STATS["cleaner runs"] += 1
        STATS["keyless records dropped"] += sum(r.key is None for r in before.records()) - sum(
            r.key is None for r in after.records()
        )
        if result.cleaned is not None:
            STATS["rounds that cleaned"] += 1
            STATS["groups rewritten"] += result.stats.groups
            STATS["records removed"] += len(before.records()) - len(after.records())
            STATS["tombstones expired"] += len(self.expired) - expired_before
        if self.min_lag > 0 and fdo < fuo < after.segment_bases[-1]:
            STATS["rounds stopped early by min.compaction.lag.ms"] += 1

        # (f) a second run with no new data changes nothing, byte for byte.
        again = manager_of(store).clean(now)
        assert again.cleaned is None, f"second LogManager.clean cleaned again ({context})"
        if result.cleaned is not None:
            again = manager_of(store).clean_log(TOPIC, 0, now)
            assert again.stats is None, f"second clean_log rewrote the log ({context})"
        assert partition_files(store.log(*TP).dir) == after.files, f"(f) {context}"

    def check_properties(
        self,
        before: Snapshot,
        after: Snapshot,
        fdo: int,
        fuo: int,
        now: int,
        cleaned: bool,
        context: str,
    ) -> None:
        old, new = before.records(), after.records()
        old_offsets = [r.offset for r in old]
        new_offsets = [r.offset for r in new]
        # (a) strictly increasing, a subset of the offsets before.
        assert all(a < b for a, b in itertools.pairwise(new_offsets)), context
        assert set(new_offsets) <= set(old_offsets), f"(a) new offsets ({context})"
        assert all(a.last < b.base for a, b in itertools.pairwise(after.batches))
        # (b) the order and content of what is left is that of before.
        by_offset = {r.offset: r for r in old}
        assert all(by_offset[r.offset] == r for r in new), f"(b) a record changed ({context})"
        # (c) the key map, tombstones past their horizon aside.
        horizon_of = {r.offset: b.horizon for b in before.batches for r in b.records}
        old_map, new_map = key_map(old), key_map(new)
        assert set(new_map) <= set(old_map), context
        for key, (offset, value) in old_map.items():
            if new_map.get(key) == (offset, value):
                continue
            horizon = horizon_of[offset]
            assert value is None and key not in new_map, f"(c) {key!r} changed ({context})"
            assert horizon is not None and now >= horizon, (
                f"(c) tombstone {key!r}@{offset} removed before its horizon {horizon} ({context})"
            )
            self.expired.add(offset)
        # (d) at and after the first uncleanable offset: byte-identical batches and files.
        assert [b.raw for b in after.batches if b.base >= fuo] == [
            b.raw for b in before.batches if b.base >= fuo
        ], f"(d) batches at or after {fuo} changed ({context})"
        for name, data in before.files.items():
            if name[:20].isdigit() and int(name[:20]) >= fuo:
                assert after.files.get(name) == data, f"(d) {name} changed ({context})"
        # (e) log start and end offsets.
        assert (after.log_start, after.log_end) == (before.log_start, before.log_end), context
        # Spec 5.4 exactly: which batches stay, with which records, horizons and bytes.
        if cleaned:
            expected = expected_after_clean(before, fdo, fuo, now, self.delete_retention_ms)
            actual = [(b.base, b.last, b.horizon, b.records) for b in after.batches]
            assert actual == [e[:4] for e in expected], f"spec 5.4 ({context})"
            for b, (_, _, _, _, verbatim) in zip(after.batches, expected, strict=True):
                assert verbatim is None or b.raw == verbatim, f"not verbatim: {b.base} ({context})"
        self.check_model(after, context)

    def check_model(self, state: Snapshot, context: str) -> None:
        """Against every record ever appended: each record left is the one appended at its
        offset, and each key's latest record is there unless it is a tombstone seen expire."""
        for r in state.records():
            assert self.appended[r.offset] == (r.key, r.value), f"foreign record {r} ({context})"
        latest: dict[bytes, int] = {}
        for offset, (key, _) in sorted(self.appended.items()):
            if key is not None:
                latest[key] = offset
        present = key_map(state.records())
        for key, offset in latest.items():
            value = self.appended[offset][1]
            if value is None and offset in self.expired:
                assert key not in present, f"{key!r} resurrected after its tombstone ({context})"
            else:
                assert present.get(key) == (offset, value), f"latest {key!r} lost ({context})"


def run_r8(examples: int, steps: int) -> None:
    run_state_machine_as_test(
        CleanerMachine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    print(f"R8: {dict(STATS)}")


@pytest.mark.slow
def test_r8_cleaner_properties() -> None:
    run_r8(EXAMPLES, STEPS)


@pytest.mark.soak
@pytest.mark.timeout(4 * 3600)
def test_r8_cleaner_properties_soak() -> None:
    """The soak tier: 40 times the CI tier's examples, each up to twice as long."""
    run_r8(SOAK_EXAMPLES, SOAK_STEPS)


def test_clean_log_leaves_non_compacted_topics_alone(tmp_path: Path) -> None:
    """Spec 4.1: only logs whose cleanup.policy contains ``compact`` are cleaned; cleaning on
    demand may refuse a ``delete`` topic, but must not compact it."""
    clock = ManualClock(START_MS)
    with open_managed(tmp_path / "data", clock=clock) as store:
        store.create_topic("d", 1, {"cleanup.policy": "delete", "segment.bytes": 600})
        for i in range(10):
            store.append("d", 0, [(None, b"keyless-%d" % i), (b"k", b"v%d" % i)])
        store.roll("d", 0)
        before = [(r.offset, r.key, r.value) for r in store.read("d", 0)]
        manager_of(store).clean(clock.now)
        assert [(r.offset, r.key, r.value) for r in store.read("d", 0)] == before
        with contextlib.suppress(PolicyViolationError):
            manager_of(store).clean_log("d", 0, clock.now)
        after = [(r.offset, r.key, r.value) for r in store.read("d", 0)]
        assert after == before, f"clean_log compacted a delete-policy topic: {len(after)} left"


def test_cleaned_segment_indexes_load_without_rebuild(tmp_path: Path) -> None:
    """R6/R8: after cleaning and a clean shutdown, loading rebuilds no index. The last batch
    loses its last record (a keyless one) so that the cleaned chunk's largest kept offset is
    below the batch's last offset."""
    clock = ManualClock(START_MS)
    with open_managed(tmp_path / "data", clock=clock) as store:
        store.create_topic("t", 1, {"cleanup.policy": "delete", "index.interval.bytes": 64})
        store.append("t", 0, [(b"a", b"x" * 100)])
        store.roll("t", 0)
        store.append("t", 0, [(b"b", b"1"), (None, b"keyless")])
        store.roll("t", 0)
        store.alter_config("t", {"cleanup.policy": "compact"})
        assert manager_of(store).clean_log("t", 0, clock.now).end_offset == 3
    with open_managed(tmp_path / "data", clock=clock) as store:
        stats = store.load_stats[("t", 0)]
        assert (stats.segments_recovered, stats.indexes_rebuilt) == (0, 0), stats.messages
        assert [(r.offset, r.key) for r in store.read("t", 0)] == [(0, b"a"), (1, b"b")]
