"""The store over a Kafka log directory: Kafka's KRaft metadata log as the topic catalog
(storage/topic_catalog.py), the files the store leaves alone, the clean-shutdown marker in
Kafka's form, and verify on such a directory.

Metadata logs are written record by record (tests/storage/kraft_helpers.py); the real thing is
tests/kafka/test_compactlog_reads_kafka.py.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from compactlog.errors import StorageError
from compactlog.records import build_batch
from compactlog.storage.kraft_metadata import METADATA_DIR, render_uuid
from compactlog.storage.store import Store
from compactlog.storage.topic_catalog import RETENTION_DISABLED
from compactlog.storage.verify import verify_data_dir
from tests.conftest import ManualClock
from tests.storage.kraft_helpers import (
    BROKER,
    CLUSTER_DEFAULT,
    TOPIC,
    MetadataLog,
    config_record,
    feature_level_record,
    new_id,
    partition_dirs,
    partition_record,
    topic_record,
    tree_hashes,
)


@pytest.fixture
def kafka_dir(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A log directory as a stopped Kafka leaves it: metadata log, meta.properties, partition
    directories with Kafka's topic ids, one directory of a topic the metadata does not know."""
    data = tmp_path / "data"
    log = MetadataLog(data)
    ids = {"orders": new_id(), "prices": new_id(), "remote": new_id()}
    log.append(
        [
            topic_record("orders", ids["orders"]),
            partition_record(0, ids["orders"]),
            partition_record(1, ids["orders"]),
            topic_record("prices", ids["prices"]),
            config_record(TOPIC, "prices", "cleanup.policy", "compact"),
            config_record(TOPIC, "prices", "min.cleanable.dirty.ratio", "0.01"),
            config_record(TOPIC, "prices", "some.future.config", "x"),
            partition_record(0, ids["prices"]),
            topic_record("remote", ids["remote"]),  # hosted by another broker: no directory
            partition_record(0, ids["remote"]),
        ]
    )
    partition_dirs(data, "orders", 2, ids["orders"])
    partition_dirs(data, "prices", 1, ids["prices"])
    partition_dirs(data, "stray", 1, None)
    (data / "replication-offset-checkpoint").write_text("0\n1\norders 0 0\n")
    (data / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":11}')
    return data, ids


def kafka_owned(data: Path) -> dict[str, str]:
    """Hashes of every file the store must leave as it is."""
    return {
        name: digest
        for name, digest in tree_hashes(data).items()
        if name.startswith(METADATA_DIR)
        or os.path.basename(name)
        in ("meta.properties", "replication-offset-checkpoint", "leader-epoch-checkpoint")
        or name.endswith("partition.metadata")
    }


def test_the_store_adopts_kafkas_topics_with_their_configs_and_ids(
    kafka_dir: tuple[Path, dict[str, bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    data, ids = kafka_dir
    before = kafka_owned(data)
    with caplog.at_level(logging.WARNING, "compactlog"), Store.open(data) as store:
        assert store.topics() == ["orders", "prices", "stray"]
        orders, prices = store.topic_info("orders"), store.topic_info("prices")
        assert (orders.partitions, orders.topic_id, orders.overrides) == (
            2,
            render_uuid(ids["orders"]),
            {},
        )
        assert prices.topic_id == render_uuid(ids["prices"])
        assert prices.overrides == {
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.01",
        }
        assert store.topic_config("prices").compact
        # Not in the metadata and no copy of its entry: its configs are unknown.
        assert store.topic_info("stray").overrides == RETENTION_DISABLED
    adoption = [r.getMessage() for r in caplog.records if "Kafka's metadata log" in r.getMessage()]
    assert len(adoption) == 1 and "adopting 2 topic(s) (1 compacted)" in adoption[0]
    assert any("some.future.config" in r.getMessage() for r in caplog.records)
    assert not (data / "remote-0").exists()  # a topic with no directory here is not adopted
    after = kafka_owned(data)  # the metadata log and Kafka's files are untouched
    assert {name: after.get(name) for name in before} == before
    assert set(after) - set(before) == {"stray-0/partition.metadata"}  # it had none
    doc = json.loads((data / "compactlog-topics.json").read_text())
    assert doc["topics"]["prices"]["kraft_config"] == prices.overrides
    assert "kraft_config" not in doc["topics"]["stray"]
    report = verify_data_dir(str(data))
    assert report.ok, report.problems
    assert [str(n) for n in report.notes if METADATA_DIR in str(n)] == [
        f"{data / METADATA_DIR}: Kafka's KRaft metadata log: not a topic; read for the topic "
        "catalog, neither loaded nor checked"
    ]
    assert not any("meta.properties" in str(n) for n in report.notes)


def test_a_cluster_wide_compaction_default_keeps_topics_compacted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log = MetadataLog(data, node_id=3)
    t = new_id()
    log.append(
        [
            config_record(BROKER, CLUSTER_DEFAULT, "log.cleanup.policy", "compact"),
            config_record(BROKER, CLUSTER_DEFAULT, "log.retention.hours", "1"),
            config_record(BROKER, "3", "log.retention.minutes", "5"),  # this node's own
            config_record(BROKER, "4", "log.retention.minutes", "9"),  # another node's
            config_record(BROKER, CLUSTER_DEFAULT, "min.insync.replicas", "1"),  # the default
            config_record(BROKER, CLUSTER_DEFAULT, "num.io.threads", "8"),  # not a topic's
            topic_record("t", t),
            partition_record(0, t),
        ]
    )
    partition_dirs(data, "t", 1, t)
    with Store.open(data) as store:
        assert store.topic_info("t").overrides == {
            "cleanup.policy": "compact",
            "retention.ms": "300000",
        }


def test_later_opens_merge_kafkas_changes_and_keep_compactlogs(
    kafka_dir: tuple[Path, dict[str, bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    data, ids = kafka_dir
    with Store.open(data) as store:
        store.alter_config("orders", set={"retention.ms": "-1"})  # compactlog's own change
    log = MetadataLog(data)
    log.next_offset = 10
    new = new_id()
    log.append(
        [
            config_record(TOPIC, "prices", "min.cleanable.dirty.ratio", "0.2"),  # Kafka's change
            partition_record(2, ids["orders"]),  # Kafka added a partition
            topic_record("created-later", new),
            partition_record(0, new),
        ]
    )
    partition_dirs(data, "orders", 3, ids["orders"])
    partition_dirs(data, "created-later", 1, new)
    with caplog.at_level(logging.WARNING, "compactlog"), Store.open(data) as store:
        assert store.topic_info("orders").overrides == {"retention.ms": "-1"}
        assert store.partitions("orders") == 3
        assert store.topic_info("prices").overrides == {
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.2",
        }
        assert store.topic_info("created-later").topic_id == render_uuid(new)
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "taking the configs Kafka changed since the last open: min.cleanable" in messages
    assert "adopting created-later from Kafka's metadata log" in messages
    # Nothing changed on either side since: the next open leaves the catalog as it is.
    before = (data / "compactlog-topics.json").read_bytes()
    Store.open(data).close()
    assert (data / "compactlog-topics.json").read_bytes() == before


def test_a_catalog_an_older_compactlog_adopted_with_defaults_is_repaired(
    kafka_dir: tuple[Path, dict[str, bytes]],
) -> None:
    data, ids = kafka_dir
    stale = {
        "version": 1,
        "topics": {
            name: {"partitions": n, "topic_id": "Z7gv8ktSQy6sEJyUDvMBEQ", "config": {}}
            for name, n in (("orders", 2), ("prices", 1), ("stray", 1))
        },
    }
    (data / "compactlog-topics.json").write_text(json.dumps(stale))
    with Store.open(data) as store:
        assert store.topic_config("prices").compact
        assert store.topic_info("prices").topic_id == render_uuid(ids["prices"])
        assert store.topic_info("stray").topic_id == "Z7gv8ktSQy6sEJyUDvMBEQ"


def test_an_unreadable_metadata_log_refuses_a_first_open_only(
    kafka_dir: tuple[Path, dict[str, bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    data, _ = kafka_dir
    segment = data / METADATA_DIR / f"{0:020d}.log"
    good = segment.read_bytes()
    segment.write_bytes(build_batch([(None, b"\x05\x02\x00")], base_offset=0, timestamps=1))
    with pytest.raises(StorageError, match="refusing to adopt its topics with default configs"):
        Store.open(data)
    assert not (data / "compactlog-topics.json").exists()
    assert not verify_data_dir(str(data)).ok
    segment.write_bytes(good)
    Store.open(data).close()
    segment.write_bytes(build_batch([(None, b"\x05\x02\x00")], base_offset=0, timestamps=1))
    with caplog.at_level(logging.WARNING, "compactlog"), Store.open(data) as store:
        assert store.topic_config("prices").compact
    assert any("cannot read Kafka's metadata log" in r.getMessage() for r in caplog.records)


def test_the_metadata_log_is_never_a_topic(tmp_path: Path) -> None:
    data = tmp_path / "data"
    MetadataLog(data).append([feature_level_record("metadata.version", 33)])
    # Kafka keeps its metadata log's indexes pre-allocated even after a clean stop.
    (data / METADATA_DIR / f"{0:020d}.index").write_bytes(bytes(8 * 1024))
    before = tree_hashes(data)
    with Store.open(data, clock=ManualClock()) as store:
        assert store.topics() == []
        with pytest.raises(Exception, match="__cluster_metadata"):
            store.log("__cluster_metadata", 0)
    assert {k: v for k, v in tree_hashes(data).items() if k.startswith(METADATA_DIR)} == {
        k: v for k, v in before.items() if k.startswith(METADATA_DIR)
    }
    assert verify_data_dir(str(data)).ok


def test_kafkas_clean_shutdown_epoch_survives_an_open_and_close(
    kafka_dir: tuple[Path, dict[str, bytes]],
) -> None:
    data, _ = kafka_dir
    marker = data / ".kafka_cleanshutdown"
    with Store.open(data) as store:
        assert store.had_clean_shutdown
        assert not marker.exists()
    assert marker.read_bytes() == b'{"version":0,"brokerEpoch":11}'
    marker.unlink()  # a crash: the next clean close cannot vouch for Kafka's broker epoch
    with Store.open(data) as store:
        assert not store.had_clean_shutdown
    assert marker.read_bytes() == b'{"version":0,"brokerEpoch":-1}'


def test_checkpoint_entries_of_partitions_not_loaded_are_kept(
    kafka_dir: tuple[Path, dict[str, bytes]],
) -> None:
    data, _ = kafka_dir
    (data / "compactlog-topics.json").write_text('{"version": 1, "topics": {}}')
    partition_dirs(data, "foreign", 1, None)
    (data / "recovery-point-offset-checkpoint").write_text("0\n2\nforeign 0 7\ngone 0 3\n")
    with Store.open(data) as store:
        assert "foreign" not in store.topics()
    text = (data / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert "foreign 0 7" in text and "gone 0 3" not in text


def test_the_spark_report_reads_the_catalog_the_store_would_adopt(
    kafka_dir: tuple[Path, dict[str, bytes]],
) -> None:
    pytest.importorskip("pyspark")
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.readonly import read_topics

    data, _ = kafka_dir
    before = tree_hashes(data)
    topics = read_topics(str(data), BrokerConfig.from_dict({}))
    assert {name: (t.partitions, t.config.compact) for name, t in topics.items()} == {
        "orders": (2, False),
        "prices": (1, True),
        "stray": (1, False),
    }
    assert tree_hashes(data) == before  # a report writes nothing


def test_a_kafka_log_dir_whose_metadata_log_is_elsewhere_gets_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    partition_dirs(data, "orders", 1, new_id())
    (data / "meta.properties").write_text("node.id=1\nversion=1\n")
    with caplog.at_level(logging.WARNING, "compactlog"), Store.open(data) as store:
        assert store.topic_info("orders").overrides == RETENTION_DISABLED
    assert any("without Kafka's metadata log" in r.getMessage() for r in caplog.records)
    (data / "compactlog-topics.json").unlink()
    notes = [str(n) for n in verify_data_dir(str(data)).notes]
    assert any("compaction included, are unknown" in n for n in notes)
