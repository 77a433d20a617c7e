"""The workload generator: every phase writes what its spec says, where Kafka would put it, the
same way every time; a skewed workload is skewed; a bad spec is refused before any job runs."""

from __future__ import annotations

import collections
import functools
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's own idiom

import compactlog
from compactlog.errors import ConfigError
from compactlog.records import Record
from compactlog.spark.workload import (
    PHASES,
    STATUSES,
    PhaseProgress,
    WorkloadSpec,
    expected_latest,
    expected_state,
    generate,
    phase_frames,
    tombstoned_key_ids,
)
from compactlog.storage.partitioner import partition_for_key
from tests.conftest import ManualClock

SPEC = WorkloadSpec(
    topic="tickets",
    keys=2000,
    value_bytes=300,
    distribution="skewed",
    skew=1.1,
    updates=6000,
    tombstone_fraction=0.1,
    republish=True,
    partitions=3,
    seed=7,
    # Small segments, so there is something to compact (the sink cuts batches to fit them).
    topic_config={"cleanup.policy": "compact", "segment.bytes": "65536"},
)


@dataclass
class Run:
    """One generated data directory, read back: per phase, per partition, its records."""

    result: Any
    events: list[PhaseProgress]
    phases: dict[str, dict[int, list[Record]]]

    def records(self, phase: str) -> list[tuple[int, Record]]:
        return [(p, r) for p, records in sorted(self.phases[phase].items()) for r in records]


def _run(spark: Any, data: Path, spec: WorkloadSpec, **kwargs: Any) -> Run:
    events: list[PhaseProgress] = []
    ends: list[dict[int, int]] = []

    def progress(event: PhaseProgress) -> None:
        events.append(event)
        if event.done:  # the phase is committed and the store closed: look at the log ends
            with compactlog.Store.open(data, ManualClock()) as store:
                ends.append({p: store.log_end_offset(spec.topic, p) for p in range(3)})

    result = generate(spark, str(data), spec, progress=progress, **kwargs)
    with compactlog.Store.open(data, ManualClock()) as store:
        logs = {p: list(store.read(spec.topic, p, 0)) for p in range(spec.partitions)}
    phases: dict[str, dict[int, list[Record]]] = {}
    starts = dict.fromkeys(logs, 0)
    for phase, end in zip(PHASES, ends, strict=True):
        phases[phase] = {p: [r for r in logs[p] if starts[p] <= r.offset < end[p]] for p in logs}
        starts = end
    return Run(result, events, phases)


@pytest.fixture(scope="module")
def run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run(spark, tmp_path_factory.mktemp("workload") / "data", SPEC)


def _doc(record: Record) -> dict[str, Any]:
    assert record.value is not None
    doc: dict[str, Any] = json.loads(record.value)
    return doc


def test_each_phase_writes_its_count_and_progress_reports_it(run: Run) -> None:
    expected = expected_state(SPEC)
    counts = {phase: len(run.records(phase)) for phase in PHASES}
    assert counts == dict(expected.records) == run.result.records_by_phase()
    assert counts == {"initial": 2000, "updates": 6000, "tombstones": 200, "republish": 1800}
    assert (run.result.live_keys, run.result.tombstones) == (1800, 200)
    assert run.result.payload_bytes == sum(expected.payload_bytes.values())
    assert [(e.phase, e.records, e.done) for e in run.events] == [
        (phase, counts[phase], done) for phase in PHASES for done in (False, True)
    ]


def test_keys_land_in_kafkas_partition_and_values_have_the_asked_size(run: Run) -> None:
    for phase in PHASES:
        for partition, record in run.records(phase):
            assert record.key is not None
            assert partition == partition_for_key(record.key, SPEC.partitions)
            if phase != "tombstones":
                assert record.value is not None and len(record.value) == SPEC.value_bytes
                doc = _doc(record)
                assert doc["id"].encode() == record.key
    initial = run.records("initial")
    assert sorted(r.key or b"" for _, r in initial) == [SPEC.key(i) for i in range(SPEC.keys)]
    assert all(_doc(r)["status"] == "new" for _, r in initial)
    # Within a partition every phase keeps its generation order: versions only grow.
    for phase in ("initial", "updates"):
        for records in run.phases[phase].values():
            versions = [_doc(r)["version"] for r in records]
            assert versions == sorted(versions)


def test_tombstones_are_null_values_for_existing_keys(run: Run) -> None:
    tombstones = [r for _, r in run.records("tombstones")]
    assert all(r.value is None for r in tombstones)
    keys = [r.key for r in tombstones]
    assert len(set(keys)) == len(keys) == 200
    assert set(keys) == {SPEC.key(int(i)) for i in tombstoned_key_ids(SPEC)}
    assert set(keys) <= {r.key for _, r in run.records("initial")}


def test_republication_covers_every_live_key_once_with_its_latest_value(run: Run) -> None:
    latest: dict[bytes | None, bytes | None] = {}
    for phase in ("initial", "updates", "tombstones"):
        for records in run.phases[phase].values():
            latest.update((r.key, r.value) for r in records)
    republished = [r for _, r in run.records("republish")]
    live = {key for key, value in latest.items() if value is not None}
    assert len(republished) == len(live) == 1800
    assert {r.key for r in republished} == live
    assert all(r.value == latest[r.key] for r in republished)


def test_expected_latest_is_the_last_record_of_every_key(spark: Any, run: Run) -> None:
    last: dict[bytes | None, bytes | None] = {}
    for phase in PHASES:
        for records in run.phases[phase].values():
            last.update((r.key, r.value) for r in records)
    rows = expected_latest(spark, SPEC).collect()
    assert {bytes(row.key): row.value for row in rows} == last
    assert sum(row.value is not None for row in rows) == expected_state(SPEC).live_keys


def test_skewed_updates_have_hot_keys(run: Run) -> None:
    counts = collections.Counter(r.key for _, r in run.records("updates"))
    per_key = [counts.get(SPEC.key(i), 0) for i in range(SPEC.keys)]
    assert max(per_key) >= 20 * max(statistics.median(per_key), 1)
    assert max(per_key) >= 0.05 * SPEC.updates  # the hottest key alone: ~12 % for s = 1.1


def test_uniform_updates_are_not_skewed(spark: Any) -> None:
    spec = WorkloadSpec(topic="t", keys=1000, updates=50_000, value_bytes=8, seed=3)
    rows = phase_frames(spark, spec)["updates"].groupBy("key_id").count().collect()
    per_key = [row["count"] for row in rows]
    assert len(per_key) == spec.keys
    assert max(per_key) <= 2 * statistics.median(per_key)  # Poisson(50): max ~75


def test_every_value_has_the_asked_size_and_is_json_when_it_fits(spark: Any) -> None:
    sizes = (1, 20, 70, 100, 3000)
    frames = []
    for size in sizes:
        spec = WorkloadSpec(topic="t", keys=30, updates=30, value_bytes=size, seed=size)
        phases = phase_frames(spark, spec)
        frame = phases["initial"].unionByName(phases["updates"])
        frames.append(frame.select(F.lit(size).alias("size"), "value"))
    rows = functools.reduce(DataFrame.unionByName, frames).collect()
    assert len(rows) == 60 * len(sizes)
    assert all(len(row.value) == row.size for row in rows)
    values = {row.size: row.value for row in rows}  # the last (an update) of each size
    assert values[1] == b"{"
    assert values[20] == b'{"id":"ticket-0000"}'  # the JSON, cut and closed
    for size in (100, 3000):
        doc = json.loads(values[size])  # the last update: version 30 + 30
        assert (doc["id"], doc["version"]) == (f"ticket-{doc['id'][-9:]}", 60)
        assert doc["status"] in STATUSES and set(doc["body"]) <= set("0123456789abcdef")


def test_the_same_spec_gives_the_same_records_whatever_the_task_count(
    spark: Any, run: Run, tmp_path: Path
) -> None:
    again = _run(spark, tmp_path / "again", SPEC, tasks=3)

    def rows(r: Run) -> list[tuple[Any, ...]]:
        return [
            (phase, p, rec.offset, rec.key, rec.value)
            for phase in PHASES
            for p, rec in r.records(phase)
        ]

    assert rows(again) == rows(run)


def test_an_existing_topic_is_appended_to_only_if_it_fits(tmp_path: Path, spark: Any) -> None:
    data = tmp_path / "data"
    with compactlog.Store.open(data, ManualClock()) as store:
        store.create_topic("tickets", 2)
        store.create_topic("small", 3, {"max.message.bytes": "1000"})
    with pytest.raises(ConfigError, match=r"partitions is 3.*with 2"):
        generate(spark, str(data), SPEC)
    small = WorkloadSpec(topic="small", keys=10, value_bytes=1000, partitions=3)
    with pytest.raises(ConfigError, match=r"value_bytes=1000.*max.message.bytes=1000"):
        generate(spark, str(data), small)
    tiny_segments = WorkloadSpec(
        topic="new",
        keys=10,
        value_bytes=20_000,
        topic_config={"cleanup.policy": "compact", "segment.bytes": "16384"},
    )
    with pytest.raises(ConfigError, match=r"more than topic 'new'.s segment.bytes=16384"):
        generate(spark, str(data), tiny_segments)
    with compactlog.Store.open(data, ManualClock()) as store:
        assert store.topics() == ["small", "tickets"]  # "new" was refused before its creation
        assert store.log_end_offset("tickets", 0) == store.log_end_offset("small", 0) == 0


def test_a_task_count_below_one_is_refused(spark: Any) -> None:
    with pytest.raises(ConfigError, match="tasks"):
        phase_frames(spark, SPEC, tasks=0)


def test_expected_state_counts_without_spark() -> None:
    spec = WorkloadSpec(topic="t", keys=1000, updates=10, tombstone_fraction=0.25, republish=True)
    state = expected_state(spec)
    assert list(state.records.values()) == [1000, 10, 250, 750]
    assert (state.live_keys, state.tombstones, state.total_records) == (750, 250, 2010)
    ids = tombstoned_key_ids(spec)
    assert len(set(ids.tolist())) == 250 and ids.min() >= 0 and ids.max() < 1000
    everything = WorkloadSpec(topic="t", keys=7, tombstone_fraction=1.0, republish=True)
    assert expected_state(everything).records["republish"] == 0
    assert sorted(tombstoned_key_ids(everything).tolist()) == list(range(7))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("topic", "bad topic"),
        ("topic", ""),
        ("keys", 0),
        ("keys", 10**9 + 1),
        ("keys", 2.5),
        ("keys", True),
        ("value_bytes", 0),
        ("distribution", "zipf"),
        ("skew", 0),
        ("skew", float("inf")),
        ("updates", -1),
        ("tombstone_fraction", 1.5),
        ("tombstone_fraction", float("nan")),
        ("republish", "yes"),
        ("partitions", 0),
        ("seed", -1),
        ("seed", 1 << 63),
        ("entity", "ti cket"),
        ("entity", 'a"b'),
        ("compression", "brotli"),
        ("topic_config", {"cleanup.policy": "shred"}),
        ("topic_config", {"no.such.config": "1"}),
    ],
)
def test_a_bad_spec_names_the_field(field: str, value: Any) -> None:
    kwargs: dict[str, Any] = {"topic": "t", "keys": 10, field: value}
    with pytest.raises(ConfigError, match=rf"WorkloadSpec\.{field}"):
        WorkloadSpec(**kwargs)
