"""Compaction on Spark: per-partition mode writes exactly what the in-process cleaner writes;
one-pass mode cleans in one job what Kafka's buffer cleans in several rounds, with the same
records kept; the job and a store never hold the directory at once."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import compactlog
from compactlog.cleaner.stats import MB
from compactlog.errors import PolicyViolationError, StorageError
from compactlog.spark.compact import CompactionResult, compact
from tests.conftest import ManualClock
from tests.managed import manager_of, open_managed

NOW = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
#: The smallest map the broker accepts (> 1 MiB): about 39,000 keys per round.
SMALL_BUFFER = {"log.cleaner.dedupe.buffer.size": str((1 << 20) + 1)}
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": str(256 * 1024),
    "min.cleanable.dirty.ratio": "0.01",
}


def _fill(data: Path, keys_per_partition: int, partitions: int = 2) -> None:
    """Updates, tombstones and every codec; the later half of the keys is written last, so a
    round limited by the map leaves work for the next one."""
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("entities", partitions, TOPIC_CONFIG)
        for p in range(partitions):
            batch = 0
            for version in range(2):
                for lo in range(0, keys_per_partition, 1000):
                    rows: list[Any] = []
                    for k in range(lo, min(lo + 1000, keys_per_partition)):
                        deleted = version == 1 and k % 7 == 0
                        value = None if deleted else b"v%d-%d" % (version, k) * (1 + k % 3)
                        rows.append((b"key-%d-%08d" % (p, k), value))
                    store.append(
                        "entities",
                        p,
                        rows,
                        timestamp=NOW + batch,
                        compression=CODECS[batch % 5],
                    )
                    batch += 1
            store.roll("entities", p)


def _partition_files(data: Path) -> dict[str, bytes]:
    files = {}
    for root, _, names in os.walk(data):
        rel = os.path.relpath(root, data)
        if not rel.startswith("entities-"):
            continue
        for name in names:
            if name.endswith((".log", ".index", ".timeindex")):
                files[f"{rel}/{name}"] = Path(root, name).read_bytes()
    return files


def _records(data: Path) -> list[tuple[int, int, bytes | None, bytes | None]]:
    with open_managed(data, ManualClock(NOW)) as store:
        return [
            (p, r.offset, r.key, r.value)
            for p in range(store.partitions("entities"))
            for r in store.read("entities", p, 0)
        ]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("source")
    _fill(data, 60_000)
    return data


def _copy(source: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(source, target)
    return target


def test_per_partition_mode_is_byte_identical_to_the_in_process_cleaner(
    spark: Any, source: Path, tmp_path: Path
) -> None:
    in_process = _copy(source, tmp_path, "in-process")
    on_spark = _copy(source, tmp_path, "on-spark")
    with open_managed(in_process, ManualClock(NOW), SMALL_BUFFER) as store:
        expected = [manager_of(store).clean_log("entities", p, now=NOW) for p in range(2)]
    lines: list[str] = []
    result = compact(
        spark,
        on_spark,
        "entities",
        mode="per-partition",
        now=NOW,
        broker_config=SMALL_BUFFER,
        progress=lines.append,
    )
    assert not result.failed
    # The map holds ~39,000 keys: both stopped part-way, at the same offset.
    assert [o.end_offset for o in result.outcomes] == [r.end_offset for r in expected]
    assert all(o.end_offset < 120_000 for o in result.outcomes)
    assert [o.summary for o in result.outcomes] != ["", ""]
    assert any("Log cleaner thread 0 cleaned log entities-0" in line for line in lines)
    assert _partition_files(on_spark) == _partition_files(in_process)
    assert (on_spark / "cleaner-offset-checkpoint").read_text() == (
        in_process / "cleaner-offset-checkpoint"
    ).read_text()


def test_one_pass_mode_cleans_in_one_job_what_kafka_cleans_in_several_rounds(
    spark: Any, source: Path, tmp_path: Path
) -> None:
    rounds = _copy(source, tmp_path, "rounds")
    one_pass = _copy(source, tmp_path, "one-pass")
    before = _records(source)
    with open_managed(rounds, ManualClock(NOW), SMALL_BUFFER) as store:
        passes = 0
        while True:
            ends = [
                manager_of(store).clean_log("entities", p, now=NOW).end_offset for p in range(2)
            ]
            passes += 1
            if ends == [120_000, 120_000]:
                break
    assert passes >= 2
    lines: list[str] = []
    result = compact(
        spark,
        one_pass,
        "entities",
        mode="one-pass",
        now=NOW,
        broker_config=SMALL_BUFFER,
        progress=lines.append,
    )
    assert not result.failed
    _check_one_pass_output(result, "\n".join(lines))
    assert [o.end_offset for o in result.outcomes] == [120_000, 120_000]
    assert result.survivors == 120_000  # every key's latest record (tombstones included)
    after = _records(one_pass)
    assert after == _records(rounds)
    # Offsets never change and the latest record of every key is kept, gaps and all.
    latest: dict[tuple[int, bytes | None], tuple[int, int, bytes | None, bytes | None]] = {}
    for record in before:
        latest[(record[0], record[2])] = record
    assert after == sorted(latest.values())
    with open_managed(one_pass, ManualClock(NOW)) as store:
        assert manager_of(store).cleaner.manager.checkpoints() == {
            ("entities", 0): 120_000,
            ("entities", 1): 120_000,
        }


def _check_one_pass_output(result: CompactionResult, output: str) -> None:
    """The printed figures are the job's own: no offset map figures (there is no map), each
    partition's rewrite time is its task's, the job line's phases are the measured ones."""
    for untrue in ("Indexed", "Buffer utilization", "NaN", "Infinity", "Log cleaner thread"):
        assert untrue not in output
    for outcome in result.outcomes:
        figures = result.one_pass[outcome.partition]
        assert 0 < figures.task_secs <= result.phases["rewrite"]
        mb = outcome.stats["bytes_read"] / MB
        assert f"Spark one-pass compaction cleaned log {outcome.name} " in outcome.summary
        assert f"Survivors: {figures.survivors:,} keys' latest records" in outcome.summary
        assert f"Rewritten {mb:,.1f} MB in {figures.task_secs:.1f} seconds" in outcome.summary
        assert outcome.summary in output
    assert sum(f.survivors for f in result.one_pass.values()) == result.survivors
    phases = result.phases
    job = output[output.index("entities: one-pass job") :]
    assert job.startswith(f"entities: one-pass job in {result.elapsed_secs:.1f} s, ")
    assert f"survivors: {phases['survivors']:.1f} s, one Spark job over all 2 partition(s)" in job
    assert f"rewrite: {phases['rewrite']:.1f} s, 2 task(s)" in job
    assert f"checkpoint: {phases['record']:.1f} s" in job
    # The phases are parts of the job's wall time.
    assert sum(phases.values()) <= result.elapsed_secs


def test_tombstones_go_at_the_second_cleaning_after_their_horizon(
    spark: Any, tmp_path: Path
) -> None:
    data = tmp_path / "tombstones"
    _fill(data, 2_000, partitions=1)
    compact(spark, data, "entities", mode="one-pass", now=NOW)
    tombstones = sum(1 for r in _records(data) if r[3] is None)
    assert tombstones == 2_000 // 7 + 1
    later = NOW + 86_400_000 + 1  # delete.retention.ms after the first cleaning stamped them
    with open_managed(data, ManualClock(NOW)) as store:
        store.append("entities", 0, [(b"new", b"x")], timestamp=later)
        store.roll("entities", 0)
    compact(spark, data, "entities", mode="one-pass", now=later)
    assert sum(1 for r in _records(data) if r[3] is None) == 0


def test_the_job_and_a_store_never_hold_the_directory_at_once(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "locked"
    _fill(data, 100, partitions=1)
    with open_managed(data, ManualClock(NOW)) as store:
        with pytest.raises(StorageError, match="in use by another process"):
            compact(spark, data, "entities", now=NOW)
        store.create_topic("plain", 1, {"cleanup.policy": "delete"})
    with pytest.raises(PolicyViolationError, match="not compacted"):
        compact(spark, data, "plain", now=NOW)
    with pytest.raises(StorageError, match="does not exist"):
        compact(spark, tmp_path / "nowhere", "entities", now=NOW)
    with pytest.raises(compactlog.CompactlogError, match="unknown compaction mode"):
        compact(spark, data, "entities", mode="fast")
