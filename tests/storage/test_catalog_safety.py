"""The catalog and the checkpoints are no single point of loss (issue 17, findings 4 and 5).

* Finding 4: a garbled ``recovery-point-offset-checkpoint`` after a clean close recovers
  nothing (Kafka's ``LogManager.loadLogs`` reads it as empty, recovery point 0, and with the
  clean-shutdown marker present its loader skips recovery); the log-start-offset and cleaner
  checkpoints read as empty too, with Kafka's consequences.
* Finding 5: every partition directory keeps a copy of its topic's catalog entry, so a missing
  topics file or a missing entry restores the topic's configs; a directory with neither is
  adopted with retention disabled, never with default ``delete`` retention; a create renames an
  unknown directory aside (``-stray``) instead of deleting it; the topics file's partition
  counts are bounded.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.errors import (
    InvalidArgumentError,
    InvalidPartitionsError,
    StorageError,
    TopicExistsError,
)
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import CLEAN_SHUTDOWN_FILE
from compactlog.storage.kraft_metadata import render_uuid
from compactlog.storage.readonly import read_topics
from compactlog.storage.store import Store
from compactlog.storage.topic_catalog import (
    MAX_PARTITIONS_PER_TOPIC,
    PARTITION_CATALOG_FILE,
    RETENTION_DISABLED,
    TOPICS_FILE,
)
from compactlog.storage.topic_names import parse_special_dir_name
from compactlog.storage.verify import verify_data_dir
from tests.broker.helpers.any_client import produce as produce_with_client
from tests.broker.helpers.clients import needs_kafka_python
from tests.broker.helpers.server import Brokers
from tests.conftest import ManualClock
from tests.managed import manager_of
from tests.storage.kraft_helpers import (
    TOPIC,
    MetadataLog,
    config_record,
    new_id,
    partition_dirs,
    partition_record,
    topic_record,
    tree_hashes,
)

StoreFactory = Callable[..., Store]

#: 2023-04-01, far more than retention.ms (7 days) before the test clock (2023-11-14).
DATED_2023 = 1_680_307_200_000
WARN = logging.WARNING


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def produce(
    store: Store, topic: str, count: int, *, partition: int = 0, roll_every: int = 0
) -> None:
    """``count`` one-record batches of equal size (key k<i>, value v<i>), dated 2023."""
    for i in range(count):
        if roll_every and i and i % roll_every == 0:
            store.roll(topic, partition)
        store.append(topic, partition, [(b"k%03d" % i, b"v%03d" % i)], timestamp=DATED_2023 + i)


def values(store: Store, topic: str, partition: int = 0, offset: int = 0) -> list[bytes | None]:
    return [r.value for r in store.read(topic, partition, offset)]


def dir_listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# --------------------------------------------------------------------------------------------
# Finding 4: the checkpoints


def test_finding_4_garbled_recovery_checkpoint_after_a_clean_close_recovers_nothing(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The reproduction: 40 records in 5 segments, an old damaged batch in the first, a clean
    close, a garbled recovery-point checkpoint. Before: a full recovery cut the first segment
    at the damaged batch and deleted the four later ones (40 -> 3 records). Now no segment is
    touched (as Kafka: a warning, and the marker skips recovery)."""
    data = tmp_path / "data"
    store = open_store()
    store.create_topic("t", 1, {"cleanup.policy": "compact"})
    produce(store, "t", 40, roll_every=8)
    segments = store.segments("t", 0)
    assert len(segments) == 5
    store.close()
    first = Path(segments[0].path)
    batch = first.stat().st_size // 8
    raw = bytearray(first.read_bytes())
    raw[3 * batch + batch - 1] ^= 0xFF  # the last byte of batch 3's value: its CRC fails
    first.write_bytes(bytes(raw))
    logs_before = {p.name: p.read_bytes() for p in (data / "t-0").glob("*.log")}
    (data / "recovery-point-offset-checkpoint").write_bytes(b"0\n1\nt 0 zz\x00garbled\n")
    assert (data / CLEAN_SHUTDOWN_FILE).exists()

    with caplog.at_level(WARN, "compactlog"):
        again = open_store()
    stats = again.load_stats[("t", 0)]
    assert (stats.segments_recovered, stats.bytes_truncated, stats.segments_deleted) == (0, 0, 0)
    assert {p.name: p.read_bytes() for p in (data / "t-0").glob("*.log")} == logs_before
    assert again.log_end_offset("t", 0) == 40
    assert values(again, "t", 0, 8) == [b"v%03d" % i for i in range(8, 40)]
    warning = [m for m in messages(caplog) if "recovery-point-offset-checkpoint" in m]
    assert len(warning) == 1
    assert str(data / "recovery-point-offset-checkpoint") in warning[0]
    assert "clean-shutdown marker was present, so no log is recovered" in warning[0]
    again.close()
    # The checkpoint is whole again after the close.
    text = (data / "recovery-point-offset-checkpoint").read_text()
    assert text == "0\n1\nt 0 40\n"


def test_a_garbled_recovery_checkpoint_without_the_marker_recovers_every_log(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    store = open_store()
    store.create_topic("t", 1)
    produce(store, "t", 20, roll_every=5)
    store.close()
    (data / "recovery-point-offset-checkpoint").write_bytes(b"\xff\xfe")
    (data / CLEAN_SHUTDOWN_FILE).unlink()
    with caplog.at_level(WARN, "compactlog"):
        again = open_store()
    assert again.load_stats[("t", 0)].segments_recovered == 4
    assert values(again, "t") == [b"v%03d" % i for i in range(20)]
    assert any("no clean-shutdown marker, so every log is recovered" in m for m in messages(caplog))


def test_a_missing_recovery_checkpoint_after_a_clean_close_recovers_nothing(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("t", 1)
    produce(store, "t", 20, roll_every=5)
    store.close()
    (tmp_path / "data" / "recovery-point-offset-checkpoint").unlink()
    again = open_store()
    assert again.load_stats[("t", 0)].segments_recovered == 0
    assert again.log_end_offset("t", 0) == 20


def test_a_garbled_log_start_checkpoint_starts_logs_at_their_first_segment(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka: "resetting to the base offset of the first segment"; nothing is recovered."""
    data = tmp_path / "data"
    store = open_store()
    store.create_topic("t", 1)
    produce(store, "t", 20, roll_every=5)
    store.delete_records("t", 0, 12)
    first_base = store.segments("t", 0)[0].base_offset
    assert first_base <= 12
    store.close()
    (data / "log-start-offset-checkpoint").write_text("0\n3\nt 0 12\n")  # a count that lies
    with caplog.at_level(WARN, "compactlog"):
        again = open_store()
    assert again.log_start_offset("t", 0) == first_base
    assert again.log_end_offset("t", 0) == 20
    assert again.load_stats[("t", 0)].segments_recovered == 0
    warning = [m for m in messages(caplog) if "log-start-offset-checkpoint" in m]
    assert len(warning) == 1 and "base offset of its first segment" in warning[0]


def test_a_garbled_cleaner_checkpoint_reads_as_empty_and_loses_nothing(
    open_store: StoreFactory, tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's LogCleanerManager logs an unreadable cleaner-offset-checkpoint and reads it as
    empty: the log is cleaned again from its start, which only costs work."""
    data = tmp_path / "data"
    store = open_store()
    store.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": 1024})
    for round_ in range(3):
        for i in range(20):
            store.append("t", 0, [(b"k%02d" % i, b"r%d-%02d" % (round_, i))])
    store.roll("t", 0)
    manager_of(store).clean_log("t", 0)
    store.close()
    (data / "cleaner-offset-checkpoint").write_bytes(b"0\n1\nt 0\n")
    with caplog.at_level(WARN, "compactlog"):
        again = open_store()
        manager = manager_of(again)
        assert manager.cleaner.manager.checkpoints() == {}
        for i in range(20):
            again.append("t", 0, [(b"k%02d" % i, b"r3-%02d" % i)])
        again.roll("t", 0)
        manager.clean_log("t", 0)
    latest = {r.key: r.value for r in again.read("t", 0)}
    assert latest == {b"k%02d" % i: b"r3-%02d" % i for i in range(20)}
    assert any("cleaner-offset-checkpoint" in m and "cannot read" in m for m in messages(caplog))
    assert manager.cleaner.manager.checkpoints()[("t", 0)] > 0  # written whole again


# --------------------------------------------------------------------------------------------
# Finding 5: the catalog


def _copy(data: Path, topic: str, partition: int) -> dict[str, object]:
    doc: dict[str, object] = json.loads(
        (data / f"{topic}-{partition}" / PARTITION_CATALOG_FILE).read_text()
    )
    return doc


def test_each_partition_keeps_a_copy_of_its_topics_entry(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    store = open_store()
    store.create_topic("t", 2, {"cleanup.policy": "compact"})
    info = store.topic_info("t")
    for p in (0, 1):
        assert _copy(data, "t", p) == {
            "version": 1,
            "topic": "t",
            "partitions": 2,
            "topic_id": info.topic_id,
            "config": {"cleanup.policy": "compact"},
        }
    store.alter_config("t", {"min.cleanable.dirty.ratio": "0.2"})
    assert _copy(data, "t", 1)["config"] == {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.2",
    }
    store.close()
    # A directory of an older compactlog, or a lost copy: written again at open.
    (data / "t-0" / PARTITION_CATALOG_FILE).unlink()
    open_store().close()
    assert _copy(data, "t", 0)["config"] == {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.2",
    }
    assert not list(data.rglob("*.tmp"))


def test_finding_5_missing_topics_file_keeps_compacted_topics_compacted(
    open_store: StoreFactory, tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The reproduction: a compacted topic with records dated 2023; the topics file is lost.
    Before: adopted as ``delete`` with 7-day retention, and the next retention run deleted
    every segment. Now its configs and id come back from its partition directories."""
    data = tmp_path / "data"
    store = open_store()
    store.create_topic("t", 2, {"cleanup.policy": "compact", "min.compaction.lag.ms": 5})
    produce(store, "t", 40, roll_every=8)
    produce(store, "t", 3, partition=1)
    topic_id = store.topic_info("t").topic_id
    store.close()
    (data / TOPICS_FILE).unlink()

    with caplog.at_level(WARN, "compactlog"):
        again = open_store()
    info = again.topic_info("t")
    assert (info.partitions, info.topic_id) == (2, topic_id)
    assert info.overrides == {"cleanup.policy": "compact", "min.compaction.lag.ms": "5"}
    assert again.topic_config("t").compact
    assert again.run_retention(clock.now) == 0
    assert values(again, "t") == [b"v%03d" % i for i in range(40)]
    restored = [m for m in messages(caplog) if m.startswith("restoring topic t ")]
    assert len(restored) == 1 and f"{TOPICS_FILE} is missing" in restored[0]
    assert json.loads((data / TOPICS_FILE).read_text())["topics"]["t"]["config"] == (info.overrides)


def test_without_file_and_copies_a_topic_is_adopted_with_retention_disabled(
    open_store: StoreFactory, tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A directory from elsewhere (or an older compactlog's, before the copies): its configs are
    unknown, so nothing of it is deleted until an operator sets them."""
    data = tmp_path / "data"
    store = open_store()
    store.create_topic("t", 1, {"cleanup.policy": "compact"})
    produce(store, "t", 40, roll_every=8)
    topic_id = store.topic_info("t").topic_id
    store.close()
    (data / TOPICS_FILE).unlink()
    (data / "t-0" / PARTITION_CATALOG_FILE).unlink()

    with caplog.at_level(WARN, "compactlog"):
        again = open_store()
    info = again.topic_info("t")
    assert info.overrides == RETENTION_DISABLED
    assert info.topic_id == topic_id  # from its partition.metadata
    config = again.topic_config("t")
    assert (config.retention_ms, config.retention_bytes, config.compact) == (-1, -1, False)
    assert again.run_retention(clock.advance(10 * 365 * 86_400_000)) == 0
    assert manager_of(again).clean().cleaned is None  # not compacted either
    assert values(again, "t") == [b"v%03d" % i for i in range(40)]
    adopted = [m for m in messages(caplog) if m.startswith("adopting t ")]
    assert len(adopted) == 1
    assert "retention disabled" in adopted[0]
    assert "compactlog configs alter t --set cleanup.policy=compact" in adopted[0]
    # The operator confirms: the topic is compacted again and its copy written.
    again.alter_config("t", {"cleanup.policy": "compact"}, ["retention.ms", "retention.bytes"])
    assert _copy(data, "t", 0)["config"] == {"cleanup.policy": "compact"}


def test_finding_5_topic_missing_from_the_file_is_restored_from_its_copy(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The reproduction's first half: the topics file lacks a topic whose directory exists.
    Before: the directory was ignored (and a create then deleted it). Now it is restored."""
    data = tmp_path / "data"
    store = open_store()
    store.create_topic("other", 1)
    store.create_topic("t", 1, {"cleanup.policy": "compact"})
    produce(store, "t", 40)
    store.close()
    doc = json.loads((data / TOPICS_FILE).read_text())
    del doc["topics"]["t"]
    (data / TOPICS_FILE).write_text(json.dumps(doc))

    with caplog.at_level(WARN, "compactlog"):
        again = open_store()
    assert again.topics() == ["other", "t"]
    assert again.topic_config("t").compact
    assert values(again, "t") == [b"v%03d" % i for i in range(40)]
    with pytest.raises(TopicExistsError):
        again.create_topic("t", 1)
    assert any(
        m.startswith("restoring topic t ") and f"no entry in {TOPICS_FILE}" in m
        for m in messages(caplog)
    )
    assert "t" in json.loads((data / TOPICS_FILE).read_text())["topics"]
    # The read-only loader (reports, the Spark source) sees the same topics as the store.
    again.close()
    (data / TOPICS_FILE).write_text(json.dumps(doc))
    seen = read_topics(str(data), BrokerConfig.from_dict({}))
    assert sorted(seen) == ["other", "t"] and seen["t"].config.compact


def test_finding_5_create_renames_an_unknown_directory_aside_as_stray(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The reproduction's second half, with no copy to restore from (an older compactlog's
    directory, or a deletion interrupted after the catalog was saved): a create of that topic
    (the broker's auto-create does the same) renames the directory aside, Kafka's ``-stray``
    name, and keeps its 40 records; before, it was deleted."""
    data = tmp_path / "data"
    store = open_store()
    store.create_topic("other", 1)
    store.create_topic("t", 1, {"cleanup.policy": "compact"})
    produce(store, "t", 40)
    store.close()
    doc = json.loads((data / TOPICS_FILE).read_text())
    del doc["topics"]["t"]
    (data / TOPICS_FILE).write_text(json.dumps(doc))
    (data / "t-0" / PARTITION_CATALOG_FILE).unlink()
    kept = tree_hashes(data / "t-0")

    with caplog.at_level(WARN, "compactlog"):
        again = open_store()
        assert again.topics() == ["other"]
        again.create_topic("t", 1)
    strays = [p for p in data.iterdir() if p.name.endswith("-stray")]
    assert len(strays) == 1
    assert parse_special_dir_name(strays[0].name) == ("t", 0, "stray")
    assert re.fullmatch(r"t-0\.[0-9a-f]{32}-stray", strays[0].name)
    assert tree_hashes(strays[0]) == kept  # every byte kept
    assert again.log_end_offset("t", 0) == 0  # the new topic has a fresh directory
    log = messages(caplog)
    assert any("has no compactlog-topic.json to restore it from" in m and "t-0" in m for m in log)
    assert any(str(data / "t-0") in m and strays[0].name in m for m in log)
    assert not any("removing" in m for m in log)
    again.close()
    caplog.clear()
    with caplog.at_level(WARN, "compactlog"):
        open_store().close()
    assert any(m.startswith(f"keeping {strays[0]}") for m in messages(caplog))
    assert strays[0].exists()


def test_delete_topic_removes_the_copies_first(open_store: StoreFactory, tmp_path: Path) -> None:
    """A deletion interrupted after the catalog was saved leaves directories that must not come
    back as a topic: their copies go first."""
    data = tmp_path / "data"
    store = open_store()
    store.create_topic("t", 2)
    produce(store, "t", 5)
    calls: list[str] = []
    real_save = store._save_topics

    def save_then_check() -> None:
        calls.append("save")
        assert not (data / "t-0" / PARTITION_CATALOG_FILE).exists()
        assert not (data / "t-1" / PARTITION_CATALOG_FILE).exists()
        real_save()

    store._save_topics = save_then_check  # type: ignore[method-assign]
    store.delete_topic("t")
    assert calls == ["save"]
    assert not (data / "t-0").exists()


def test_copies_that_disagree_or_are_damaged_are_reported(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    store = open_store()
    store.create_topic("t", 3, {"cleanup.policy": "compact"})
    store.close()
    (data / TOPICS_FILE).unlink()
    (data / "t-0" / PARTITION_CATALOG_FILE).write_text("{not json")
    doc = _copy(data, "t", 2)
    doc["config"] = {"cleanup.policy": "delete"}
    (data / "t-2" / PARTITION_CATALOG_FILE).write_text(json.dumps(doc))
    with caplog.at_level(WARN, "compactlog"):
        again = open_store()
    assert again.topic_config("t").compact  # partition 1's copy, the lowest readable one
    log = messages(caplog)
    assert any(str(data / "t-0" / PARTITION_CATALOG_FILE) in m and "damaged" in m for m in log)
    assert any("copies of its entry in partitions [2] differ" in m for m in log)
    again.close()
    assert _copy(data, "t", 0) == _copy(data, "t", 2) == _copy(data, "t", 1)  # in step again


def test_a_kafka_topic_keeps_compactlogs_alterations_through_its_copy(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A Kafka directory with its metadata log: the copy (same topic id) keeps a ``configs
    alter`` made through compactlog when the topics file is lost; Kafka's configs still
    merge in as on a later open."""
    data = tmp_path / "data"
    topic_id = new_id()
    log = MetadataLog(data)
    log.append(
        [
            topic_record("prices", topic_id),
            config_record(TOPIC, "prices", "cleanup.policy", "compact"),
            partition_record(0, topic_id),
        ]
    )
    partition_dirs(data, "prices", 1, topic_id)
    with Store.open(data, clock=clock) as store:
        store.alter_config("prices", {"min.cleanable.dirty.ratio": "0.2"})
    (data / TOPICS_FILE).unlink()
    with Store.open(data, clock=clock) as store:
        info = store.topic_info("prices")
        assert info.topic_id == render_uuid(topic_id)
        assert info.overrides == {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2"}
        assert info.kraft_config == {"cleanup.policy": "compact"}


# --------------------------------------------------------------------------------------------
# Bounded numbers


def test_a_huge_partition_count_in_the_topics_file_is_refused_creating_nothing(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    doc = {
        "version": 1,
        "topics": {
            "big": {"partitions": 10**9, "topic_id": "q7IBI0VSQZ6j7TvYNj0RyA", "config": {}}
        },
    }
    (data / TOPICS_FILE).write_text(json.dumps(doc))
    before = dir_listing(data)
    report = verify_data_dir(str(data))  # a report refuses it at once
    assert any(str(MAX_PARTITIONS_PER_TOPIC) in str(p) for p in report.problems)
    # The store treats the file as damaged: it is kept aside, and the catalog is rebuilt from
    # the partition directories (there are none): nothing is created.
    store = Store.open(data, clock=clock)
    store.close()
    text = caplog.text
    assert str(data / TOPICS_FILE) in text
    assert "'big'" in text and "1000000000" in text and str(MAX_PARTITIONS_PER_TOPIC) in text
    assert json.loads((data / f"{TOPICS_FILE}.corrupt-1").read_text()) == doc
    assert before == [TOPICS_FILE]
    assert not [p for p in data.iterdir() if p.is_dir()]  # no partition directory


@pytest.mark.parametrize("partitions", [MAX_PARTITIONS_PER_TOPIC + 1, True, "3", 2.0])
def test_partition_counts_of_the_topics_file_are_checked(
    tmp_path: Path, clock: ManualClock, partitions: object, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    doc = {"version": 1, "topics": {"t": {"partitions": partitions, "topic_id": "x", "config": {}}}}
    (data / TOPICS_FILE).write_text(json.dumps(doc))
    Store.open(data, clock=clock).close()
    assert "'t'" in caplog.text and "is damaged" in caplog.text
    assert (data / f"{TOPICS_FILE}.corrupt-1").exists()
    assert not (data / "t-0").exists()


def test_a_directory_with_a_huge_partition_number_is_not_adopted(
    tmp_path: Path, clock: ManualClock
) -> None:
    data = tmp_path / "data"
    (data / "t-2147483647").mkdir(parents=True)
    with pytest.raises(StorageError, match=r"t-2147483647.*limit of 10000"):
        Store.open(data, clock=clock)
    assert sorted(p.name for p in data.iterdir() if p.name != ".lock") == ["t-2147483647"]


def test_create_topic_refuses_more_partitions_than_the_limit(open_store: StoreFactory) -> None:
    store = open_store()
    with pytest.raises(InvalidPartitionsError, match="at most 9999 in one creation"):
        store.create_topic("t", MAX_PARTITIONS_PER_TOPIC + 1)
    with pytest.raises(InvalidArgumentError):
        store.create_topic("t", True)  # type: ignore[arg-type]
    assert store.topics() == []


def test_a_failed_open_removes_the_directories_it_created(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``open`` creating directories until EMFILE left them all behind; now a failed open
    leaves the data directory as it found it (directories that held data stay)."""
    data = tmp_path / "data"
    with Store.open(data, clock=clock) as store:
        store.create_topic("t", 1)
        produce(store, "t", 3)
    doc = json.loads((data / TOPICS_FILE).read_text())
    doc["topics"]["t"]["partitions"] = 50
    (data / TOPICS_FILE).write_text(json.dumps(doc))
    before = [n for n in dir_listing(data) if n != CLEAN_SHUTDOWN_FILE]

    import compactlog.storage.store as store_module

    real = store_module.load_log
    calls = 0

    def failing(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 20:
            raise OSError(24, "Too many open files")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module, "load_log", failing)
    with pytest.raises(OSError):
        Store.open(data, clock=clock)
    assert dir_listing(data) == before
    assert os.listdir(data / "t-0")  # the partition with data is untouched


# --------------------------------------------------------------------------------------------
# Through the broker


@pytest.mark.broker
@pytest.mark.timeout(120)
@needs_kafka_python
def test_finding_5_a_producers_auto_create_sets_the_unknown_directory_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The reproduction through the broker: a producer writes to a topic the catalog lacks
    while its directory (40 records, no copy) exists; the Metadata request auto-creates the
    topic. Before: "removing stale directory" and the 40 records were gone."""
    data = tmp_path / "data"
    with Store.open(data) as store:
        store.create_topic("other", 1)
        store.create_topic("t", 1, {"cleanup.policy": "compact"})
        produce(store, "t", 40)
    doc = json.loads((data / TOPICS_FILE).read_text())
    del doc["topics"]["t"]
    (data / TOPICS_FILE).write_text(json.dumps(doc))
    (data / "t-0" / PARTITION_CATALOG_FILE).unlink()
    kept = tree_hashes(data / "t-0")

    brokers = Brokers(data)
    try:
        broker = brokers.start()
        with caplog.at_level(WARN, "compactlog"):
            acked = produce_with_client("kafka-python", broker.bootstrap, "t", [(b"new", b"1")])
        assert acked == [(0, 0)]
    finally:
        brokers.stop_all()
    (stray,) = [p for p in data.iterdir() if p.name.endswith("-stray")]
    assert parse_special_dir_name(stray.name) == ("t", 0, "stray")
    assert tree_hashes(stray) == kept
    with Store.open(data) as store:
        assert values(store, "t") == [b"1"]
    assert any(stray.name in m and "renamed" in m for m in messages(caplog))
