"""Admin calls through each client's admin API (spec 1.3 (d)), checked against the store.

Create topics with configs, describe configs, alter them (AlterConfigs replaces a topic's whole
dynamic set, IncrementalAlterConfigs changes only the named keys), delete records (refused with
POLICY_VIOLATION on a ``compact``-only topic), delete topics, and list offsets (earliest, latest,
by timestamp; kcat ``-Q``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.broker.helpers.clients import (
    CLIENT_TIMEOUT_S,
    needs_aiokafka,
    needs_confluent,
    needs_kafka_python,
    needs_kcat,
)
from tests.broker.helpers.kcat import kcat
from tests.broker.helpers.server import CliBroker
from tests.broker.helpers.store import append, create_topic, log_start_offset, on_broker, topics


def partitions(broker: Any, topic: str) -> int:
    return on_broker(broker, lambda store: store.partitions(topic))


pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(60),
    pytest.mark.usefixtures("collect_client_garbage"),
]

#: Record i of the timestamped topic has this timestamp plus ``STEP_MS * i``.
BASE_MS = 1_700_000_000_000
STEP_MS = 1000
RECORDS = 10


def fill_timestamped(broker: Any, topic: str, config: dict[str, Any] | None = None) -> None:
    """``topic`` (1 partition): record i at offset i with timestamp BASE_MS + STEP_MS * i."""
    create_topic(broker, topic, 1, config)
    for i in range(RECORDS):
        append(broker, topic, 0, [(b"k%d" % i, b"v%d" % i)], timestamp=BASE_MS + STEP_MS * i)


def overrides(broker: Any, topic: str) -> dict[str, str]:
    """The topic's effective configs that differ from a fresh topic's (as strings)."""

    def read(store: Any) -> dict[str, str]:
        described = store.describe_config(topic)
        return {k: described[k] for k in store.topic_config(topic).overrides}

    return on_broker(broker, read)


# --- kafka-python -------------------------------------------------------------------------------
@needs_kafka_python
def test_kafka_python_admin(broker: Any) -> None:
    from kafka import KafkaAdminClient, OffsetSpec, TopicPartition
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
    from kafka.errors import PolicyViolationError, TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics(
            {
                "ka": {
                    "num_partitions": 3,
                    "replication_factor": 1,
                    "configs": {"cleanup.policy": "compact", "segment.bytes": "1048576"},
                }
            }
        )
        assert partitions(broker, "ka") == 3
        assert overrides(broker, "ka") == {"cleanup.policy": "compact", "segment.bytes": "1048576"}
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics({"ka": {"num_partitions": 1, "replication_factor": 1}})

        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "ka")], config_filter="all"
        )["topic"]["ka"]
        assert described["cleanup.policy"]["value"] == "compact"
        assert described["segment.bytes"]["value"] == "1048576"
        assert described["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        # Spec 1.4 item 6: every alterable topic config, defaults included, not read-only.
        assert described["retention.ms"]["read_only"] is False
        assert described["retention.ms"]["config_source"] == "DEFAULT_CONFIG"

        # alter_configs: DescribeConfigs first (every key must be known), then
        # IncrementalAlterConfigs, which leaves the other overrides alone.
        result = admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    "ka",
                    configs={
                        "retention.ms": "60000",
                        "segment.bytes": (AlterConfigOp.DELETE, None),
                    },
                )
            ]
        )
        assert result == {"topic": {"ka": "OK"}}
        assert overrides(broker, "ka") == {"cleanup.policy": "compact", "retention.ms": "60000"}
        with pytest.raises(ValueError, match="Unrecognized configs"):
            admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "ka", configs={"no.such.config": "1"})]
            )

        # DeleteRecords: refused on a compact-only topic, moves the log start offset otherwise.
        with pytest.raises(PolicyViolationError):
            admin.delete_records({TopicPartition("ka", 0): 0})
        fill_timestamped(broker, "times")
        tp = TopicPartition("times", 0)
        deleted = admin.delete_records({tp: 4})
        assert deleted[tp]["low_watermark"] == 4
        assert log_start_offset(broker, "times") == 4

        offsets = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})
        assert offsets[tp].offset == 4
        assert admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset == RECORDS
        at = admin.list_partition_offsets({tp: BASE_MS + 6 * STEP_MS - 500})[tp]
        assert (at.offset, at.timestamp) == (6, BASE_MS + 6 * STEP_MS)
        after = admin.list_partition_offsets({tp: BASE_MS + RECORDS * STEP_MS})[tp]
        assert after.offset == -1

        admin.delete_topics(["ka", "times"])
        assert "ka" not in topics(broker) and "times" not in topics(broker)
    finally:
        admin.close()


# --- confluent-kafka ----------------------------------------------------------------------------
def _result(future: Any) -> Any:
    return future.result(timeout=CLIENT_TIMEOUT_S)


@needs_confluent
def test_confluent_admin(broker: Any) -> None:
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        OffsetSpec,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.create_topics(
        [
            NewTopic(
                "ck",
                num_partitions=2,
                replication_factor=1,
                config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"},
            )
        ],
        request_timeout=10,
    ).values()
    assert _result(future) is None
    assert partitions(broker, "ck") == 2
    assert overrides(broker, "ck") == {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.1",
    }

    resource = ConfigResource("topic", "ck")
    (future,) = admin.describe_configs([resource], request_timeout=10).values()
    entries = _result(future)
    assert entries["cleanup.policy"].value == "compact"
    assert entries["min.cleanable.dirty.ratio"].value == "0.1"
    assert entries["retention.ms"].is_read_only is False

    # incremental_alter_configs: only the named keys change.
    incremental = ConfigResource(
        "topic",
        "ck",
        incremental_configs=[
            ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "min.cleanable.dirty.ratio", None, incremental_operation=AlterConfigOpType.DELETE
            ),
        ],
    )
    (future,) = admin.incremental_alter_configs([incremental], request_timeout=10).values()
    _result(future)
    assert overrides(broker, "ck") == {"cleanup.policy": "compact", "retention.ms": "60000"}

    # alter_configs (AlterConfigs, deprecated by the client): replaces the whole dynamic set, so
    # cleanup.policy goes back to its default.
    with pytest.deprecated_call():
        futures = admin.alter_configs(
            [ConfigResource("topic", "ck", set_config={"segment.bytes": "2097152"})],
            request_timeout=10,
        )
    (future,) = futures.values()
    _result(future)
    assert overrides(broker, "ck") == {"segment.bytes": "2097152"}
    assert (
        on_broker(broker, lambda store: store.describe_config("ck"))["cleanup.policy"] == "delete"
    )

    # Bad values are refused with INVALID_CONFIG (40).
    bad = ConfigResource(
        "topic",
        "ck",
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (future,) = admin.incremental_alter_configs([bad], request_timeout=10).values()
    with pytest.raises(KafkaException) as refused:
        _result(future)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG

    fill_timestamped(broker, "times")
    tp = TopicPartition("times", 0)
    (future,) = admin.delete_records([TopicPartition("times", 0, 3)], request_timeout=10).values()
    assert _result(future).low_watermark == 3
    assert log_start_offset(broker, "times") == 3

    def listed(spec: Any) -> Any:
        (f,) = admin.list_offsets({tp: spec}, request_timeout=10).values()
        return _result(f)

    assert listed(OffsetSpec.earliest()).offset == 3
    assert listed(OffsetSpec.latest()).offset == RECORDS
    at = listed(OffsetSpec.for_timestamp(BASE_MS + 7 * STEP_MS))
    assert (at.offset, at.timestamp) == (7, BASE_MS + 7 * STEP_MS)
    assert listed(OffsetSpec.for_timestamp(BASE_MS + RECORDS * STEP_MS)).offset == -1

    # Compact-only: DeleteRecords is a POLICY_VIOLATION (44).
    create_topic(broker, "compacted", 1, {"cleanup.policy": "compact"})
    (future,) = admin.delete_records(
        [TopicPartition("compacted", 0, 0)], request_timeout=10
    ).values()
    with pytest.raises(KafkaException) as refused:
        _result(future)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION

    for f in admin.delete_topics(["ck", "times"], request_timeout=10).values():
        assert _result(f) is None
    assert "ck" not in topics(broker) and "times" not in topics(broker)


# --- aiokafka ----------------------------------------------------------------------------------
@needs_aiokafka
def test_aiokafka_admin(broker: Any) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    fill_timestamped(broker, "times")
    tp = TopicPartition("times", 0)

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        await asyncio.wait_for(admin.start(), CLIENT_TIMEOUT_S)
        try:
            response = await admin.create_topics(
                [
                    NewTopic(
                        "ak",
                        num_partitions=4,
                        replication_factor=1,
                        topic_configs={
                            "cleanup.policy": "compact,delete",
                            "retention.ms": "3600000",
                        },
                    )
                ]
            )
            assert [t[1] for t in response.topic_errors] == [0], response
            assert partitions(broker, "ak") == 4
            assert overrides(broker, "ak") == {
                "cleanup.policy": "compact,delete",
                "retention.ms": "3600000",
            }

            (described,) = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "ak")]
            )
            ((error, _msg, _type, name, entries),) = described.resources
            assert (error, name) == (0, "ak")
            values = {e[0]: e[1] for e in entries}
            assert values["cleanup.policy"] == "compact,delete"
            assert values["retention.ms"] == "3600000"

            # AlterConfigs replaces the dynamic set: retention.ms goes back to its default.
            (altered,) = await admin.alter_configs(
                [
                    ConfigResource(
                        ConfigResourceType.TOPIC, "ak", configs={"cleanup.policy": "compact"}
                    )
                ]
            )
            assert [r[0] for r in altered.resources] == [0], altered
            assert overrides(broker, "ak") == {"cleanup.policy": "compact"}

            low = await admin.delete_records({tp: RecordsToDelete(before_offset=2)})
            assert low == {tp: 2}
            assert log_start_offset(broker, "times") == 2

            response = await admin.delete_topics(["ak"])
            assert [t[1] for t in response.topic_error_codes] == [0], response
            assert "ak" not in topics(broker)
        finally:
            await admin.close()

        # aiokafka has no admin call for offsets: its consumer's, over ListOffsets.
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        await asyncio.wait_for(consumer.start(), CLIENT_TIMEOUT_S)
        try:
            assert await consumer.beginning_offsets([tp]) == {tp: 2}
            assert await consumer.end_offsets([tp]) == {tp: RECORDS}
            found = await consumer.offsets_for_times({tp: BASE_MS + 5 * STEP_MS - 1})
            assert (found[tp].offset, found[tp].timestamp) == (5, BASE_MS + 5 * STEP_MS)
            none = await consumer.offsets_for_times({tp: BASE_MS + RECORDS * STEP_MS})
            assert none == {tp: None}
        finally:
            await consumer.stop()

    asyncio.run(run())


# --- kcat -Q -------------------------------------------------------------------------------------
@needs_kcat
def test_kcat_query_offsets_by_timestamp(broker: Any) -> None:
    fill_timestamped(broker, "times")
    on_broker(broker, lambda store: store.delete_records("times", 0, 1))

    def query(ts: int) -> str:
        return kcat(broker.bootstrap, "-Q", "-t", f"times:0:{ts}").stdout.decode().strip()

    assert query(BASE_MS + 3 * STEP_MS - 10) == "times [0] offset 3"
    assert query(BASE_MS + 3 * STEP_MS) == "times [0] offset 3"
    assert query(-2) == "times [0] offset 1"  # earliest: the log start offset
    assert query(-1) == f"times [0] offset {RECORDS}"  # latest: the high watermark
    assert query(BASE_MS + RECORDS * STEP_MS) == "times [0] offset -1"


@needs_kcat
def test_kcat_metadata_lists_topics(broker: Any) -> None:
    create_topic(broker, "listed", 3)
    meta = json.loads(kcat(broker.bootstrap, "-L", "-J").stdout)
    topics = {t["topic"]: t for t in meta["topics"]}
    assert [p["partition"] for p in topics["listed"]["partitions"]] == [0, 1, 2]
    assert {b["id"] for b in meta["brokers"]} == {
        p["leader"] for p in topics["listed"]["partitions"]
    }


@needs_confluent
def test_confluent_all_topics_metadata_against_compactlog_serve(
    cli_broker: Callable[..., CliBroker],
) -> None:
    """librdkafka 2.16 sends 3 bytes after the body of an all-topics Metadata v13 request
    (``AdminClient.list_topics()``, a regex subscription); the broker ignores them, as Kafka
    does, rather than closing the connection."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    served = cli_broker({"num.partitions": 1}).start()
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    wanted = {"ta": 2, "tb": 1, "other": 1}
    created = admin.create_topics([NewTopic(t, num_partitions=n) for t, n in wanted.items()])
    for future in created.values():
        _result(future)

    listed = admin.list_topics(timeout=CLIENT_TIMEOUT_S)
    assert {t: len(m.partitions) for t, m in listed.topics.items() if t in wanted} == wanted
    assert all(m.error is None for m in listed.topics.values())

    producer = Producer({"bootstrap.servers": served.bootstrap})
    for topic in wanted:
        producer.produce(topic, key=topic.encode(), value=b"v", partition=0)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": served.bootstrap,
            "group.id": "regex",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    try:
        consumer.subscribe(["^t.*"])
        seen: set[str] = set()
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while seen != {"ta", "tb"} and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(msg.topic())
        assert seen == {"ta", "tb"}
        assert {tp.topic for tp in consumer.assignment()} == {"ta", "tb"}
    finally:
        consumer.close()
    assert served.alive()
    assert "malformed" not in served.log_path.read_text(), served.log_tail()


@needs_confluent
def test_offsets_by_timestamp_agree_while_the_broker_appends(broker: Any) -> None:
    """ListOffsets (confluent-kafka's offsets_for_times), a read-only view of the directory the
    broker holds, and ``consume -o s@MS`` in local mode find the same first offset at or after
    each timestamp, the latest batch's (not yet in any time index) included."""
    from click.testing import CliRunner
    from confluent_kafka import Consumer, TopicPartition

    from compactlog.cli.main import main
    from compactlog.storage.readonly import ReadOnlyDataDir

    create_topic(broker, "ts", 1, {"segment.bytes": 1500, "index.interval.bytes": 300})
    future = (time.time_ns() // 1_000_000 // 1000) * 1000 + 30 * 86_400_000
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ts"})
    path = broker.broker.store.path
    try:
        for b in range(30):
            append(broker, "ts", 0, [(b"k", b"v" * 40), (b"l", b"w" * 40)], future + 10 * b)
            if b % 6 and b != 29:
                continue
            for t, want in ((future - 1, 0), (future + 10 * b, 2 * b), (future + 10 * b + 1, -1)):
                (net,) = consumer.offsets_for_times(
                    [TopicPartition("ts", 0, t)], timeout=CLIENT_TIMEOUT_S
                )
                with ReadOnlyDataDir(path) as files:
                    found = files.log("ts", 0).offset_for_timestamp(t)
                args = ["--data-dir", path, "consume", "ts", "-o", f"s@{t}", "-c", "1"]
                local = CliRunner().invoke(main, [*args, "-f", "%o"])
                assert local.exit_code == 0, local.output
                assert (net.offset, -1 if found is None else found[0]) == (want, want), (b, t)
                assert local.stdout == ("" if want < 0 else str(want)), (b, t)
    finally:
        consumer.close()
