"""Reading Kafka's KRaft metadata log (storage/kraft_metadata.py), written here record by record
in Kafka's encoding (tests/storage/kraft_helpers.py): snapshots, transactions, removals, damage.

What the store does with it is tests/storage/test_store_kafka_dir.py; the real thing (a Kafka 4.4
broker's log directory) is tests/kafka/test_compactlog_reads_kafka.py.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest

from compactlog.errors import CorruptRecordError, StorageError
from compactlog.records.varint import encode_unsigned_varint
from compactlog.storage.kraft_metadata import (
    METADATA_DIR,
    random_uuid,
    read_kraft_metadata,
    render_uuid,
)
from tests.storage.kraft_helpers import (
    ABORT,
    BEGIN,
    BROKER,
    CLUSTER_DEFAULT,
    END,
    TOPIC,
    MetadataLog,
    config_record,
    feature_level_record,
    new_id,
    partition_record,
    remove_topic_record,
    topic_record,
)

# --------------------------------------------------------------------------------------------
# Reading the metadata log


def test_topics_ids_partitions_and_configs(tmp_path: Path) -> None:
    log = MetadataLog(tmp_path)
    orders, prices = new_id(), new_id()
    log.append([feature_level_record("metadata.version", 33)])
    log.control()
    log.append(
        [
            topic_record("orders", orders),
            partition_record(0, orders),
            partition_record(1, orders),
            partition_record(2, orders),
            topic_record("prices", prices),
            config_record(TOPIC, "prices", "cleanup.policy", "compact"),
            config_record(TOPIC, "prices", "segment.ms", "100"),
            partition_record(0, prices),
            config_record(BROKER, CLUSTER_DEFAULT, "min.insync.replicas", "1"),
            config_record(BROKER, "1", "log.retention.ms", "1000"),
            config_record(BROKER, "2", "log.retention.ms", "2000"),
        ]
    )
    log.append([config_record(TOPIC, "prices", "segment.ms", None)])  # null deletes
    metadata = read_kraft_metadata(str(tmp_path))
    assert metadata is not None
    assert metadata.node_id == 1 and metadata.snapshot is None and metadata.end_offset == 14
    assert {n: (t.topic_id, t.partitions, dict(t.configs)) for n, t in metadata.topics.items()} == {
        "orders": (render_uuid(orders), 3, {}),
        "prices": (render_uuid(prices), 1, {"cleanup.policy": "compact"}),
    }
    assert metadata.dynamic_broker_configs() == {
        "min.insync.replicas": "1",
        "log.retention.ms": "1000",
    }
    assert render_uuid(orders) == base64.urlsafe_b64encode(orders).decode().rstrip("=")


def test_the_latest_snapshot_then_the_log_after_it(tmp_path: Path) -> None:
    log = MetadataLog(tmp_path)
    old, new = new_id(), new_id()
    log.append([topic_record("old", old), partition_record(0, old)])
    log.append([remove_topic_record(old), topic_record("new", new), partition_record(0, new)])
    end = log.append([config_record(TOPIC, "new", "cleanup.policy", "compact")])
    # An older snapshot (still naming "old") and the latest one, at offset 5: the log's records
    # below 5 are in it and must not be replayed again.
    log.snapshot(2, [topic_record("old", old), partition_record(0, old)])
    log.snapshot(5, [topic_record("new", new), partition_record(0, new)])
    (log.dir / f"{9:020d}-{1:010d}.checkpoint.part").write_bytes(b"garbage")
    later = new_id()
    log.append([topic_record("later", later), partition_record(0, later)])
    metadata = read_kraft_metadata(str(tmp_path))
    assert metadata is not None and end == 6
    assert metadata.snapshot == (5, 1)
    assert sorted(metadata.topics) == ["later", "new"]
    # The config record at offset 5 is after the snapshot: replayed.
    assert dict(metadata.topics["new"].configs) == {"cleanup.policy": "compact"}


def test_a_removed_topic_takes_its_configs_and_a_recreated_one_starts_afresh(
    tmp_path: Path,
) -> None:
    log = MetadataLog(tmp_path)
    first, second = new_id(), new_id()
    log.append(
        [
            topic_record("t", first),
            config_record(TOPIC, "t", "cleanup.policy", "compact"),
            partition_record(0, first),
            partition_record(1, first),
        ]
    )
    log.append([remove_topic_record(first)])
    log.append([topic_record("t", second), partition_record(0, second)])
    metadata = read_kraft_metadata(str(tmp_path))
    assert metadata is not None
    t = metadata.topics["t"]
    assert (t.topic_id, t.partitions, dict(t.configs)) == (render_uuid(second), 1, {})


def test_metadata_transactions_apply_whole_or_not_at_all(tmp_path: Path) -> None:
    log = MetadataLog(tmp_path)
    a, b, c = new_id(), new_id(), new_id()
    log.append([BEGIN, topic_record("a", a)])
    log.append([partition_record(0, a), END])
    log.append([BEGIN, topic_record("b", b), partition_record(0, b), ABORT])
    log.append([BEGIN, topic_record("c", c), partition_record(0, c)])  # still open at the end
    metadata = read_kraft_metadata(str(tmp_path))
    assert metadata is not None
    assert sorted(metadata.topics) == ["a"]


def test_a_torn_or_corrupt_tail_ends_the_log(tmp_path: Path) -> None:
    log = MetadataLog(tmp_path)
    a, b = new_id(), new_id()
    log.append([topic_record("a", a), partition_record(0, a)])
    segment = log.dir / f"{0:020d}.log"
    good = segment.stat().st_size
    log.append([topic_record("b", b), partition_record(0, b)])
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF  # the CRC of the second batch fails
    segment.write_bytes(bytes(data) + b"\x00\x00\x00")
    metadata = read_kraft_metadata(str(tmp_path))
    assert metadata is not None and sorted(metadata.topics) == ["a"]
    assert good < len(data)


def test_no_metadata_log_and_an_empty_one(tmp_path: Path) -> None:
    assert read_kraft_metadata(str(tmp_path)) is None
    (tmp_path / METADATA_DIR).mkdir()
    assert read_kraft_metadata(str(tmp_path)) is None


def test_a_log_that_starts_after_every_snapshot_is_refused(tmp_path: Path) -> None:
    log = MetadataLog(tmp_path)
    log.append([topic_record("a", new_id())], segment=0)
    (log.dir / f"{0:020d}.log").rename(log.dir / f"{7:020d}.log")
    with pytest.raises(StorageError, match="no snapshot reaches it"):
        read_kraft_metadata(str(tmp_path))


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (b"\x00\x02\x00", "frame version 0"),
        (bytes([1, 2, 0]) + encode_unsigned_varint(40) + b"abc", "past the end"),
        (bytes([1, 3, 0, 0, 0]), "truncated partition id"),
        (bytes([1, 4, 0, 2]) + encode_unsigned_varint(0), "null resource name"),
    ],
)
def test_undecodable_records_are_corrupt(tmp_path: Path, value: bytes, match: str) -> None:
    MetadataLog(tmp_path).append([value])
    with pytest.raises(CorruptRecordError, match=match):
        read_kraft_metadata(str(tmp_path))


def test_random_uuid_redraws_ids_a_command_line_would_read_as_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka's ``Uuid.randomUuid`` never hands out an id with a ``-`` in it (``kafka-storage
    format -t -Xk...`` fails: the id reads as an option) nor a reserved one (zero, one)."""
    dash_first = uuid.UUID(bytes=b"\xfb" + bytes(15))
    assert render_uuid(dash_first.bytes).startswith("-")
    dash_inside = uuid.UUID(bytes=bytes(3) + b"\xfb" + bytes(12))
    assert "-" in render_uuid(dash_inside.bytes)
    reserved = [uuid.UUID(int=0), uuid.UUID(int=1)]
    good = uuid.UUID(bytes=bytes(range(1, 17)))
    draws = iter([dash_first, dash_inside, *reserved, good])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))
    assert random_uuid() == render_uuid(good.bytes)
