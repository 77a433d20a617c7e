"""The store: topics, names, checkpoints, durability settings, the lock, the partitioner."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.errors import (
    InvalidArgumentError,
    InvalidPartitionsError,
    InvalidTopicError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from compactlog.records import build_batch
from compactlog.storage.partitioner import partition_for_key
from compactlog.storage.store import Store
from tests.conftest import ManualClock, open_files_under
from tests.managed import close_managed, manager_of, open_managed

StoreFactory = Callable[..., Store]


def tree_hash(root: Path) -> str:
    listing = []
    for dirpath, dirnames, filenames in os.walk(root):
        listing += [os.path.join(dirpath, n) for n in sorted(dirnames + filenames)]
    return hashlib.sha256("\n".join(sorted(listing)).encode()).hexdigest()


BAD_NAMES = [
    ".",
    "..",
    "../x",
    "a/b",
    "a\\b",
    "a\x00b",
    "",
    "x" * 250,
    "t\u0430",
    "ｔｏｐｉｃ",
    "a b",
    "/etc",
    "~",
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_r18_bad_topic_names_are_refused_and_touch_nothing(
    open_store: StoreFactory, tmp_path: Path, name: str
) -> None:
    store = open_store()
    before = tree_hash(tmp_path)
    with pytest.raises(InvalidTopicError) as info:
        store.create_topic(name, 1)
    assert info.value.error_code == 17
    assert tree_hash(tmp_path) == before
    assert store.topics() == []


def test_colliding_names_and_duplicates(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("a.b", 1)
    with pytest.raises(InvalidTopicError):
        store.create_topic("a_b", 1)
    with pytest.raises(TopicExistsError):
        store.create_topic("a.b", 1)
    with pytest.raises(InvalidPartitionsError):
        store.create_topic("c", 0)
    with pytest.raises(UnknownTopicOrPartitionError):
        store.append("nope", 0, [(b"k", b"v")])
    with pytest.raises(UnknownTopicOrPartitionError):
        store.append("a.b", 1, [(b"k", b"v")])


def test_a_data_dir_can_be_open_only_once(open_store: StoreFactory, tmp_path: Path) -> None:
    open_store()
    with pytest.raises(StorageError, match="in use"):
        open_managed(tmp_path / "data")


def test_foreign_files_and_dirs_never_crash_startup(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store()
    store.create_topic("t", 1)
    store.append("t", 0, [(b"k", b"v")])
    close_managed(store)
    data = tmp_path / "data"
    (data / "notes.txt").write_text("hello")
    (data / "not-a-partition").mkdir()
    (data / "t-x").mkdir()
    (data / "other-0").mkdir()
    (data / "t-0" / "README").write_text("foreign")
    (data / ".spark-staging").mkdir()
    with caplog.at_level(logging.WARNING, logger="compactlog"):
        again = open_store()
    assert again.topics() == ["t"]
    assert [r.value for r in again.read("t", 0)] == [b"v"]
    ignored = sorted(os.path.basename(r.args[0]) for r in caplog.records if r.args)
    # Foreign directories are named; hidden ones (tools' own, like the Spark sink's) are not.
    assert ignored == ["not-a-partition", "other-0", "t-x"]


def test_checkpoint_files_in_kafkas_format(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    store.create_topic("orders", 2)
    store.append("orders", 1, [(b"k", b"v")] * 3)
    store.delete_records("orders", 1, 2)
    close_managed(store)
    data = tmp_path / "data"
    recovery = (data / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert recovery[:2] == ["0", "2"]
    assert sorted(recovery[2:]) == ["orders 0 0", "orders 1 3"]
    start = (data / "log-start-offset-checkpoint").read_text().splitlines()
    assert sorted(start[2:]) == ["orders 0 0", "orders 1 2"]
    assert (data / ".kafka_cleanshutdown").exists()
    metadata = (data / "orders-0" / "partition.metadata").read_text().splitlines()
    assert metadata[0] == "version: 0" and metadata[1].startswith("topic_id: ")


def test_flush_messages_moves_the_recovery_point(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1, {"flush.messages": 3})
    log = store.log("t", 0)
    store.append("t", 0, [(b"k", b"v")])
    store.append("t", 0, [(b"k", b"v")])
    assert log.recovery_point == 0
    store.append("t", 0, [(b"k", b"v")])
    assert log.recovery_point == 3
    store.alter_config("t", set={"flush.messages": 1})
    store.append("t", 0, [(b"k", b"v")])
    assert log.recovery_point == 4


def test_flush_ms_is_applied_by_the_background_flusher(tmp_path: Path, clock: ManualClock) -> None:
    import time

    store = open_managed(
        tmp_path / "data",
        clock=clock,
        config={"log.flush.scheduler.interval.ms": 10, "log.initial.task.delay.ms": 0},
        background=True,
    )
    try:
        store.create_topic("t", 1, {"flush.ms": 1000})
        store.append("t", 0, [(b"k", b"v")])
        log = store.log("t", 0)
        time.sleep(0.1)
        assert log.recovery_point == 0
        clock.advance(1000)
        deadline = time.monotonic() + 10
        while log.recovery_point == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert log.recovery_point == 1
    finally:
        close_managed(store)


def test_rolled_segments_are_flushed_by_the_background_thread(
    tmp_path: Path, clock: ManualClock
) -> None:
    import time

    store = open_managed(tmp_path / "data", clock=clock, background=True)
    try:
        store.create_topic("t", 1)
        store.append("t", 0, [(b"k", b"v")] * 5)
        store.roll("t", 0)
        log = store.log("t", 0)
        deadline = time.monotonic() + 10
        while log.recovery_point < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert log.recovery_point == 5
    finally:
        close_managed(store)


def test_preallocated_segments_are_trimmed_and_recover(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"preallocate": True, "segment.bytes": 10_000})
    store.append("t", 0, [(b"k", b"v")])
    log_file = tmp_path / "data" / "t-0" / "00000000000000000000.log"
    assert log_file.stat().st_size == 10_000
    store.append("t", 0, [(b"k", b"v")])
    manager_of(store).abandon()  # crash: the pre-allocated zeros remain
    again = open_store()
    assert again.log_end_offset("t", 0) == 2
    assert [r.offset for r in again.read("t", 0)] == [0, 1]
    again.roll("t", 0)
    assert log_file.stat().st_size == 140


def test_offset_overflow_rolls_a_new_segment(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1)
    store.append("t", 0, [(b"k", b"v")] * 10)
    # A batch whose offsets span 2**31 - 1 (as a compacted follower copy could): sparse deltas.
    sparse = build_batch(
        [(b"a", b"1"), (b"b", b"2")],
        timestamps=0,
        offset_deltas=[0, 2**31 - 1],
        last_offset_delta=2**31 - 1,
    )
    store.append_batch("t", 0, sparse, from_client=False)
    assert [s.base_offset for s in store.segments("t", 0)] == [0, 10]
    assert store.log_end_offset("t", 0) == 10 + 2**31


def test_offsets_missing_inside_a_batch_read_as_the_next_one(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1)
    sparse = build_batch(
        [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")],
        timestamps=0,
        offset_deltas=[0, 2, 5],
        last_offset_delta=6,
    )
    store.append_batch("t", 0, sparse, from_client=False)
    assert store.log_end_offset("t", 0) == 7
    assert [r.offset for r in store.read("t", 0, 1)] == [2, 5]
    assert [r.offset for r in store.read("t", 0, 3)] == [5]
    assert list(store.read("t", 0, 6)) == []


def test_produce_uses_kafkas_partitioner(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 6)
    for i in range(50):
        key = b"customer-%d" % i
        partition, offset = store.produce("t", key, b"v")
        assert partition == partition_for_key(key, 6)
        assert next(r for r in store.read("t", partition, offset)).key == key
    spread = {store.produce("t", None, b"v")[0] for _ in range(6)}
    assert spread == set(range(6))  # keyless records go round-robin


def test_empty_append_is_refused(open_store: StoreFactory) -> None:
    from compactlog.errors import InvalidRecordError

    store = open_store()
    store.create_topic("t", 1)
    with pytest.raises(InvalidRecordError):
        store.append("t", 0, [])


def test_unknown_and_bad_configs_are_refused_with_their_name(open_store: StoreFactory) -> None:
    from compactlog.errors import ConfigError

    store = open_store()
    with pytest.raises(ConfigError, match="foo"):
        store.create_topic("t", 1, {"foo": "1"})
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        store.create_topic("t", 1, {"segment.bytes": "13"})
    store.create_topic("t", 1)
    with pytest.raises(ConfigError, match=r"min\.cleanable\.dirty\.ratio"):
        store.alter_config("t", set={"min.cleanable.dirty.ratio": "1.5"})
    assert store.describe_config("t")["min.cleanable.dirty.ratio"] == "0.5"
    with pytest.raises(ConfigError):
        open_managed(store.path + "-other", config={"log.cleaner.bogus": 1})


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("shutdown", ["close", "abandon"])
def test_no_file_stays_open_after_the_store_is_closed_or_abandoned(
    tmp_path: Path, clock: ManualClock, shutdown: str
) -> None:
    """Segments a cleaning replaced wait ``file.delete.delay.ms`` as ``.deleted`` files; closing
    or abandoning the store must release them too. (Leaked descriptors pile up in a process that
    opens stores again and again; past 1024, ``select()``-based servers such as py4j's callback
    server die, which once hung a Spark stream in the test suite.)"""
    data = tmp_path / "data"
    store = open_managed(data, clock=clock)
    store.create_topic(
        "t", 1, {"cleanup.policy": "compact", "segment.bytes": 1024, "file.delete.delay.ms": 60000}
    )
    for i in range(200):
        store.append("t", 0, [(b"k%d" % (i % 5), b"v" * 20)])
    store.roll("t", 0)
    assert manager_of(store).clean_log("t", 0).cleaned is not None
    assert any(n.endswith(".deleted") for n in os.listdir(data / "t-0"))
    assert open_files_under(data)
    if shutdown == "close":
        close_managed(store)
    else:
        manager_of(store).abandon()
    assert open_files_under(data) == []


def test_create_partitions_grows_keeps_records_and_survives_reopen(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    from compactlog.storage.topic_catalog import read_partition_copy

    store = open_store()
    store.create_topic("grow", 2, {"cleanup.policy": "compact"})
    store.append("grow", 0, [(b"k", b"v0")])
    store.append("grow", 1, [(b"k", b"v1")])
    topic_id = store.topic_info("grow").topic_id
    store.create_partitions("grow", 5)
    assert store.partitions("grow") == 5
    assert store.topic_info("grow").topic_id == topic_id
    assert store.topic_config("grow").overrides == {"cleanup.policy": "compact"}
    assert [r.value for r in store.read("grow", 0)] == [b"v0"]
    assert [r.value for r in store.read("grow", 1)] == [b"v1"]
    assert store.log_end_offset("grow", 4) == 0
    partition, _ = store.produce("grow", b"some key", b"x")
    assert partition == partition_for_key(b"some key", 5)
    for p in range(5):  # every partition's copy of the catalog entry has the new count
        copy = read_partition_copy(store.fs, os.path.join(store.path, f"grow-{p}"), "grow")
        assert copy is not None and copy.partitions == 5
    close_managed(store)
    reopened = open_store()
    assert reopened.partitions("grow") == 5
    assert next(r.value for r in reopened.read("grow", 1)) == b"v1"
    assert [r.value for r in reopened.read("grow", partition)][-1] == b"x"


def test_create_partitions_refuses_shrinking_and_keeping(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 3)
    with pytest.raises(InvalidPartitionsError, match=r"currently has 3 partition\(s\); 2 would"):
        store.create_partitions("t", 2)
    with pytest.raises(InvalidPartitionsError, match=r"already has 3 partition\(s\)"):
        store.create_partitions("t", 3)
    with pytest.raises(UnknownTopicOrPartitionError):
        store.create_partitions("missing", 3)
    with pytest.raises(InvalidArgumentError, match="must be an int"):
        store.create_partitions("t", "4")  # type: ignore[arg-type]
    assert store.partitions("t") == 3
