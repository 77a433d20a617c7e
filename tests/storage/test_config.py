"""Topic and broker configs: names, types, defaults, ranges, precedence, describe and alter.

The expected values below were transcribed from Kafka 3.9's ``LogConfig``, ``TopicConfig``,
``ServerLogConfigs``, ``CleanerConfig`` and ``ServerTopicConfigSynonyms``, independently of the
tables in the module under test.
"""

from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactlog.errors import INVALID_CONFIG, ConfigError
from compactlog.storage.config import (
    BROKER_CONFIGS,
    CONFIG_TYPE_IDS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigSource,
    ConfigSynonym,
    LogConfig,
    canonical_metadata_version,
    java_double_to_string,
    parse_config_assignments,
    parse_value,
    render_value,
)

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

# name -> (type, default, highest-priority broker synonym)
EXPECTED_TOPIC_CONFIGS = {
    "cleanup.policy": ("list", ("delete",), "log.cleanup.policy"),
    "compression.gzip.level": ("int", -1, "compression.gzip.level"),
    "compression.lz4.level": ("int", 9, "compression.lz4.level"),
    "compression.type": ("string", "producer", "compression.type"),
    "compression.zstd.level": ("int", 3, "compression.zstd.level"),
    "delete.retention.ms": ("long", 86400000, "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": ("long", 60000, "log.segment.delete.delay.ms"),
    "flush.messages": ("long", LONG_MAX, "log.flush.interval.messages"),
    "flush.ms": ("long", LONG_MAX, "log.flush.interval.ms"),
    "follower.replication.throttled.replicas": ("list", (), None),
    "index.interval.bytes": ("int", 4096, "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": ("list", (), None),
    "local.retention.bytes": ("long", -2, "log.local.retention.bytes"),
    "local.retention.ms": ("long", -2, "log.local.retention.ms"),
    "max.compaction.lag.ms": ("long", LONG_MAX, "log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": ("int", 1048588, "message.max.bytes"),
    "message.downconversion.enable": ("boolean", True, "log.message.downconversion.enable"),
    "message.format.version": ("string", "3.0-IV1", "log.message.format.version"),
    "message.timestamp.after.max.ms": ("long", LONG_MAX, "log.message.timestamp.after.max.ms"),
    "message.timestamp.before.max.ms": ("long", LONG_MAX, "log.message.timestamp.before.max.ms"),
    "message.timestamp.difference.max.ms": (
        "long",
        LONG_MAX,
        "log.message.timestamp.difference.max.ms",
    ),
    "message.timestamp.type": ("string", "CreateTime", "log.message.timestamp.type"),
    "min.cleanable.dirty.ratio": ("double", 0.5, "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": ("long", 0, "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": ("int", 1, "min.insync.replicas"),
    "preallocate": ("boolean", False, "log.preallocate"),
    "remote.log.copy.disable": ("boolean", False, None),
    "remote.log.delete.on.disable": ("boolean", False, None),
    "remote.storage.enable": ("boolean", False, None),
    "retention.bytes": ("long", -1, "log.retention.bytes"),
    "retention.ms": ("long", 604800000, "log.retention.ms"),
    "segment.bytes": ("int", 1073741824, "log.segment.bytes"),
    "segment.index.bytes": ("int", 10485760, "log.index.size.max.bytes"),
    "segment.jitter.ms": ("long", 0, "log.roll.jitter.ms"),
    "segment.ms": ("long", 604800000, "log.roll.ms"),
    "unclean.leader.election.enable": ("boolean", False, "unclean.leader.election.enable"),
}

# Kafka's DescribeConfigs rendering of a topic with no overrides on a default broker.
EXPECTED_DEFAULT_DESCRIBE = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "producer",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.downconversion.enable": "true",
    "message.format.version": "3.0-IV1",
    "message.timestamp.after.max.ms": "9223372036854775807",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.difference.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}

# (config, lowest accepted value, highest accepted value); the neighbours must be refused.
BOUNDS = [
    ("segment.bytes", 14, INT_MAX),
    ("segment.ms", 1, LONG_MAX),
    ("segment.jitter.ms", 0, LONG_MAX),
    ("segment.index.bytes", 4, INT_MAX),
    ("index.interval.bytes", 0, INT_MAX),
    ("retention.bytes", LONG_MIN, LONG_MAX),
    ("retention.ms", -1, LONG_MAX),
    ("delete.retention.ms", 0, LONG_MAX),
    ("min.compaction.lag.ms", 0, LONG_MAX),
    ("max.compaction.lag.ms", 1, LONG_MAX),
    ("file.delete.delay.ms", 0, LONG_MAX),
    ("max.message.bytes", 0, INT_MAX),
    ("flush.messages", 1, LONG_MAX),
    ("flush.ms", 0, LONG_MAX),
    ("message.timestamp.after.max.ms", 0, LONG_MAX),
    ("message.timestamp.before.max.ms", 0, LONG_MAX),
    ("message.timestamp.difference.max.ms", 0, LONG_MAX),
    ("min.insync.replicas", 1, INT_MAX),
    ("local.retention.ms", -2, LONG_MAX),
    ("local.retention.bytes", -2, LONG_MAX),
    ("compression.lz4.level", 1, 17),
    ("compression.zstd.level", -131072, 22),
    ("compression.gzip.level", 1, 9),
]


def create(**overrides: object) -> LogConfig:
    return LogConfig.create({k.replace("_", "."): v for k, v in overrides.items()})  # type: ignore[misc]


def refused(overrides: dict[str, object], broker: BrokerConfig | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        LogConfig.create(overrides, broker)  # type: ignore[arg-type]
    assert info.value.error_code == INVALID_CONFIG
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------------------------


def test_topic_config_names_are_exactly_kafka_39s() -> None:
    assert set(TOPIC_CONFIGS) == set(EXPECTED_TOPIC_CONFIGS)
    assert list(TOPIC_CONFIGS) == sorted(TOPIC_CONFIGS)


@pytest.mark.parametrize("name", sorted(EXPECTED_TOPIC_CONFIGS))
def test_topic_config_type_default_and_synonym(name: str) -> None:
    config_type, default, synonym = EXPECTED_TOPIC_CONFIGS[name]
    definition = TOPIC_CONFIGS[name]
    assert definition.name == name
    assert definition.type == config_type
    assert definition.default == default
    assert type(definition.default) is type(default)
    assert definition.synonym == synonym
    assert definition.doc.strip()
    # Every default is itself a valid value.
    assert parse_value(definition, render_value(definition.type, default)) == default


def test_multi_synonym_precedence_lists() -> None:
    def names(config: str) -> list[tuple[str, int]]:
        return [(s.name, s.to_ms) for s in TOPIC_CONFIGS[config].synonyms]

    assert names("segment.ms") == [("log.roll.ms", 1), ("log.roll.hours", 3600000)]
    assert names("segment.jitter.ms") == [
        ("log.roll.jitter.ms", 1),
        ("log.roll.jitter.hours", 3600000),
    ]
    assert names("retention.ms") == [
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60000),
        ("log.retention.hours", 3600000),
    ]
    assert names("flush.ms") == [
        ("log.flush.interval.ms", 1),
        ("log.flush.scheduler.interval.ms", 1),
    ]


def test_configs_without_effect_say_so() -> None:
    no_effect = {n for n, d in TOPIC_CONFIGS.items() if not d.has_effect}
    assert no_effect == {
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "message.downconversion.enable",
        "message.format.version",
        "min.insync.replicas",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "unclean.leader.election.enable",
    }
    for name in no_effect:
        assert "no effect here" in TOPIC_CONFIGS[name].doc


def test_broker_configs_cover_every_synonym_and_the_broker_settings() -> None:
    for definition in TOPIC_CONFIGS.values():
        for synonym in definition.synonyms:
            assert synonym.name in BROKER_CONFIGS, synonym.name
    for name in (
        "log.cleaner.enable",
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
        "message.max.bytes",
        "log.retention.check.interval.ms",
        "log.flush.offset.checkpoint.interval.ms",
        "log.flush.start.offset.checkpoint.interval.ms",
        "log.flush.scheduler.interval.ms",
        "num.recovery.threads.per.data.dir",
        "producer.id.expiration.ms",
        "log.initial.task.delay.ms",
        "log.segment.delete.delay.ms",
    ):
        assert name in BROKER_CONFIGS
    assert not set(BROKER_CONFIGS) & (set(TOPIC_CONFIGS) - {
        "compression.type", "compression.gzip.level", "compression.lz4.level",
        "compression.zstd.level", "min.insync.replicas", "unclean.leader.election.enable",
    })  # fmt: skip


@pytest.mark.parametrize(
    ("name", "config_type", "default"),
    [
        ("log.cleaner.enable", "boolean", True),
        ("log.cleaner.threads", "int", 1),
        ("log.cleaner.dedupe.buffer.size", "long", 134217728),
        ("log.cleaner.io.buffer.load.factor", "double", 0.9),
        ("log.cleaner.io.buffer.size", "int", 524288),
        ("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308),
        ("log.cleaner.backoff.ms", "long", 15000),
        ("message.max.bytes", "int", 1048588),
        ("log.retention.check.interval.ms", "long", 300000),
        ("log.flush.offset.checkpoint.interval.ms", "int", 60000),
        ("log.flush.start.offset.checkpoint.interval.ms", "int", 60000),
        ("log.flush.scheduler.interval.ms", "long", LONG_MAX),
        ("log.flush.interval.ms", "long", None),
        ("num.recovery.threads.per.data.dir", "int", 1),
        ("producer.id.expiration.ms", "int", 86400000),
        ("log.initial.task.delay.ms", "long", 30000),
        ("log.segment.delete.delay.ms", "long", 60000),
        ("log.roll.ms", "long", None),
        ("log.roll.hours", "int", 168),
        ("log.roll.jitter.ms", "long", None),
        ("log.roll.jitter.hours", "int", 0),
        ("log.retention.ms", "long", None),
        ("log.retention.minutes", "int", None),
        ("log.retention.hours", "int", 168),
        ("log.retention.bytes", "long", -1),
        ("log.cleanup.policy", "list", ("delete",)),
        ("log.segment.bytes", "int", 1073741824),
        ("log.index.size.max.bytes", "int", 10485760),
        ("log.index.interval.bytes", "int", 4096),
        ("log.cleaner.delete.retention.ms", "long", 86400000),
        ("log.cleaner.min.compaction.lag.ms", "long", 0),
        ("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX),
        ("log.cleaner.min.cleanable.ratio", "double", 0.5),
        ("log.flush.interval.messages", "long", LONG_MAX),
        ("log.preallocate", "boolean", False),
        ("compression.type", "string", "producer"),
        ("log.message.timestamp.type", "string", "CreateTime"),
        ("remote.log.storage.system.enable", "boolean", False),
    ],
)
def test_broker_config_type_and_default(name: str, config_type: str, default: object) -> None:
    definition = BROKER_CONFIGS[name]
    assert (definition.type, definition.default) == (config_type, default)


def test_broker_accessors_default_values() -> None:
    broker = BrokerConfig.from_dict(None)
    assert broker.cleaner_enable is True
    assert broker.cleaner_threads == 1
    assert broker.dedupe_buffer_size == 128 * 1024 * 1024
    assert broker.io_buffer_load_factor == 0.9
    assert broker.io_buffer_size == 512 * 1024
    assert broker.io_max_bytes_per_second == 1.7976931348623157e308
    assert broker.cleaner_backoff_ms == 15000
    assert broker.message_max_bytes == 1048588
    assert broker.retention_check_interval_ms == 300000
    assert broker.recovery_point_checkpoint_interval_ms == 60000
    assert broker.log_start_offset_checkpoint_interval_ms == 60000
    assert broker.flush_scheduler_interval_ms == LONG_MAX
    assert broker.num_recovery_threads_per_data_dir == 1
    assert broker.producer_id_expiration_ms == 86400000
    assert broker.initial_task_delay_ms == 30000
    assert broker.segment_delete_delay_ms == 60000
    assert broker.remote_storage_system_enable is False
    assert broker.dedupe_buffer_size_per_thread == 128 * 1024 * 1024
    assert broker.io_buffer_size_per_thread == 256 * 1024
    assert broker == BrokerConfig.from_dict({})
    assert not broker.is_set("log.cleaner.threads")


def test_describe_config_type_ids_match_kafka() -> None:
    assert dict(CONFIG_TYPE_IDS) == {
        "boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7,
    }  # fmt: skip
    assert [s.value for s in ConfigSource] == [0, 1, 2, 3, 4, 5]


# ---------------------------------------------------------------------------------------------
# Values: types, ranges, enumerations
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "low", "high"), BOUNDS)
def test_bounds_are_inclusive_and_neighbours_refused(name: str, low: int, high: int) -> None:
    for value in (low, high):
        assert LogConfig.create({name: str(value)}).get(name) == value
        assert LogConfig.create({name: value}).get(name) == value
    message = refused({name: str(low - 1)})
    assert name in message and str(low - 1) in message
    message = refused({name: str(high + 1)})
    assert name in message


def test_gzip_level_accepts_its_library_default_marker_only() -> None:
    assert create(compression_gzip_level=-1).get("compression.gzip.level") == -1
    for bad in ("0", "-2", "10"):
        assert "between 1 and 9 or equal to -1" in refused({"compression.gzip.level": bad})


@pytest.mark.parametrize("ratio", ["0", "0.0", "1", "1.0", "0.5", "5e-1", ".25", "0.75d", "1E0"])
def test_dirty_ratio_accepts_java_doubles_in_unit_interval(ratio: str) -> None:
    value = LogConfig.create({"min.cleanable.dirty.ratio": ratio}).min_cleanable_dirty_ratio
    assert 0.0 <= value <= 1.0
    assert value == float(ratio.rstrip("d"))


@pytest.mark.parametrize(
    ("ratio", "reason"),
    [
        ("-0.1", "at least 0"),
        ("1.2", "at most 1"),
        ("1.0000001", "at most 1"),
        ("Infinity", "at most 1"),
        ("NaN", "NaN"),
        ("not_a_number", "not a number"),
        ("", "not a number"),
        ("0,5", "not a number"),
        ("1_0", "not a number"),
        ("nan", "not a number"),
        ("inf", "not a number"),
    ],
)
def test_dirty_ratio_refusals(ratio: str, reason: str) -> None:
    message = refused({"min.cleanable.dirty.ratio": ratio})
    assert "min.cleanable.dirty.ratio" in message and reason in message


def test_hex_double_and_python_numbers() -> None:
    assert "too large" in refused({"min.cleanable.dirty.ratio": 10**400})
    assert create(min_cleanable_dirty_ratio="0x1p-1").min_cleanable_dirty_ratio == 0.5
    assert create(min_cleanable_dirty_ratio=1).min_cleanable_dirty_ratio == 1.0
    assert isinstance(create(min_cleanable_dirty_ratio=1).min_cleanable_dirty_ratio, float)
    assert "bool" in refused({"min.cleanable.dirty.ratio": True})


@pytest.mark.parametrize(
    "bad", ["abc", "1.5", "", "1e3", "0x10", "1_000", "١٢", "2147483648", "-2147483649", "+-1"]
)
def test_int_refusals(bad: str) -> None:
    message = refused({"segment.bytes": bad})
    assert "segment.bytes" in message and "32-bit integer" in message


@pytest.mark.parametrize("bad", [1.0, 1.5, True, None, b"100", ["100"]])
def test_int_refuses_wrong_python_types(bad: object) -> None:
    assert "segment.bytes" in refused({"segment.bytes": bad})


@pytest.mark.parametrize(("text", "value"), [("+100", 100), (" 100 ", 100), ("\t100\n", 100)])
def test_int_accepts_sign_and_java_trimmed_whitespace(text: str, value: int) -> None:
    assert create(segment_bytes=text).segment_bytes == value


def test_trimming_is_javas_not_unicodes() -> None:
    refused({"segment.bytes": "\u00a0100"})  # NBSP is not removed by String.trim()


@pytest.mark.parametrize("bad", ["9223372036854775808", "-9223372036854775809", "1.0", "x"])
def test_long_refusals(bad: str) -> None:
    assert "64-bit integer" in refused({"retention.bytes": bad})


@pytest.mark.parametrize(("text", "value"), [("true", True), ("TRUE", True), (" False ", False)])
def test_boolean_accepts_true_false_in_any_case(text: str, value: bool) -> None:
    assert create(preallocate=text).preallocate is value
    assert create(preallocate=value).preallocate is value


@pytest.mark.parametrize("bad", ["yes", "1", "0", "", "t", 1, 0])
def test_boolean_refusals(bad: object) -> None:
    assert "true or false" in refused({"preallocate": bad})


@pytest.mark.parametrize(
    ("text", "policy"),
    [
        ("delete", {"delete"}),
        ("compact", {"compact"}),
        ("compact,delete", {"compact", "delete"}),
        ("delete, compact", {"compact", "delete"}),
        (" compact ,  delete ", {"compact", "delete"}),
        ("compact,compact", {"compact"}),
        ("", set()),
        ("   ", set()),
    ],
)
def test_cleanup_policy_values(text: str, policy: set[str]) -> None:
    config = create(cleanup_policy=text)
    assert config.cleanup_policy == frozenset(policy)
    assert config.compact is ("compact" in policy)
    assert config.delete is ("delete" in policy)


@pytest.mark.parametrize(
    "bad", ["Compact", "DELETE", "compact,", ",delete", "foo", "compact;delete", "true"]
)
def test_cleanup_policy_refusals_are_case_sensitive_like_kafkas_valid_list(bad: str) -> None:
    message = refused({"cleanup.policy": bad})
    assert "cleanup.policy" in message and "compact, delete" in message


def test_list_separator_whitespace_is_javas() -> None:
    assert create(cleanup_policy="compact\t,\ndelete").delete
    refused({"cleanup.policy": "compact,\u2003delete"})  # Java's \\s is ASCII-only


def test_cleanup_policy_from_python_sequence() -> None:
    config = LogConfig.create({"cleanup.policy": ["delete", "compact"]})
    assert config.compact and config.delete
    assert config.describe()["cleanup.policy"] == "delete,compact"
    assert config.overrides["cleanup.policy"] == "delete,compact"
    refused({"cleanup.policy": ["compact", 1]})


@pytest.mark.parametrize("codec", ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"])
def test_compression_types(codec: str) -> None:
    assert create(compression_type=codec).compression_type == codec


@pytest.mark.parametrize("bad", ["GZIP", "none", "", "deflate"])
def test_compression_type_refusals(bad: str) -> None:
    assert "compression.type" in refused({"compression.type": bad})


def test_compression_level_follows_the_codec() -> None:
    assert create(compression_type="gzip", compression_gzip_level="6").compression_level == 6
    assert create(compression_type="zstd").compression_level == 3
    assert create(compression_type="lz4").compression_level == 9
    assert create(compression_type="snappy").compression_level is None
    assert create().compression_level is None


def test_timestamp_type() -> None:
    assert create(message_timestamp_type="LogAppendTime").message_timestamp_type == "LogAppendTime"
    assert "message.timestamp.type" in refused({"message.timestamp.type": "createtime"})


@pytest.mark.parametrize(
    "good", ["*", "* ", "", " ", "100:10", "100:10,12:10", "100:10,12:10,15:1  ", "100:0,"]
)
def test_throttled_replicas_accepted(good: str) -> None:
    for name in (
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    ):
        LogConfig.create({name: good})


@pytest.mark.parametrize(
    "bad", ["100", "100:", "100:0,10", "100:0,10:", "100: 0,10:", "*,100:10", "* ,100:10"]
)
def test_throttled_replicas_refused(bad: str) -> None:
    assert "partitionId:brokerId" in refused({"leader.replication.throttled.replicas": bad})


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("0.8.0", "0.8.0"),
        ("0.10.0", "0.10.0-IV1"),
        ("0.10.0-IV0", "0.10.0-IV0"),
        ("0.10.0.1", "0.10.0-IV1"),
        ("2.8", "2.8-IV1"),
        ("2.8.1", "2.8-IV1"),
        ("3.0", "3.0-IV1"),
        ("3.0-IV1", "3.0-IV1"),
        ("3.3", "3.3-IV3"),
        ("3.9", "3.9-IV0"),
        ("4.0-IV0", "4.0-IV0"),
    ],
)
def test_message_format_versions(text: str, canonical: str) -> None:
    assert canonical_metadata_version(text) == canonical
    assert create(message_format_version=text).get("message.format.version") == text


@pytest.mark.parametrize("bad", ["", "4.0", "3.10", "abc", "0.7", "3.0-IV9"])
def test_message_format_version_refusals(bad: str) -> None:
    assert canonical_metadata_version(bad) is None
    assert "message.format.version" in refused({"message.format.version": bad})


def test_unknown_names_are_refused_by_name() -> None:
    assert refused({"foo": "1"}) == "Unknown topic config name: foo"
    message = refused({"log.segment.bytes": "1024"})
    assert "log.segment.bytes" in message and "segment.bytes" in message
    message = refused({"seg\x00ment.bytes": "1"})
    assert "\\x00" in message


def test_error_messages_quote_strange_values() -> None:
    message = refused({"segment.bytes": "1\x002"})
    assert "'1\\x002'" in message
    assert "Invalid value abc for config segment.bytes" in refused({"segment.bytes": "abc"})


def test_first_bad_value_in_name_order_is_reported() -> None:
    message = refused({"segment.ms": "x", "delete.retention.ms": "y"})
    assert "delete.retention.ms" in message


# ---------------------------------------------------------------------------------------------
# Cross-field rules
# ---------------------------------------------------------------------------------------------


def test_min_compaction_lag_may_not_exceed_max() -> None:
    message = refused({"min.compaction.lag.ms": "200", "max.compaction.lag.ms": "100"})
    assert "min.compaction.lag.ms (200)" in message and "max.compaction.lag.ms (100)" in message
    refused({"min.compaction.lag.ms": "101", "max.compaction.lag.ms": "100"})
    equal = create(min_compaction_lag_ms=100, max_compaction_lag_ms=100)
    assert (equal.min_compaction_lag_ms, equal.max_compaction_lag_ms) == (100, 100)


def test_compaction_lag_rule_applies_to_the_effective_config() -> None:
    broker = BrokerConfig.from_dict({"log.cleaner.max.compaction.lag.ms": 1000})
    assert "max.compaction.lag.ms (1000)" in refused({"min.compaction.lag.ms": 5000}, broker)
    broker = BrokerConfig.from_dict({"log.cleaner.min.compaction.lag.ms": 5000})
    assert "min.compaction.lag.ms (5000)" in refused({"max.compaction.lag.ms": 1000}, broker)


def test_remote_storage_needs_the_store_to_allow_it() -> None:
    assert "remote.log.storage.system.enable" in refused({"remote.storage.enable": "true"})
    LogConfig.create({"remote.storage.enable": "false"})


def test_remote_storage_is_refused_for_compacted_topics() -> None:
    broker = BrokerConfig.from_dict({"remote.log.storage.system.enable": True})
    config = LogConfig.create({"remote.storage.enable": "true"}, broker)
    assert config.remote_storage_enable is True
    for policy in ("compact", "compact,delete", "delete,compact"):
        message = refused({"remote.storage.enable": "true", "cleanup.policy": policy}, broker)
        assert "compact" in message and "remote.storage.enable" in message


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"retention.ms": "1000", "local.retention.ms": "-1"}, "local.retention.ms"),
        ({"retention.ms": "1000", "local.retention.ms": "2000"}, "more than retention.ms"),
        ({"retention.bytes": "100", "local.retention.bytes": "-1"}, "local.retention.bytes"),
        ({"retention.bytes": "100", "local.retention.bytes": "200"}, "more than retention.bytes"),
        (
            {"remote.log.copy.disable": "true", "retention.ms": "1000", "local.retention.ms": "10"},
            "must equal",
        ),
    ],
)
def test_local_retention_rules_of_tiered_topics(overrides: dict[str, str], fragment: str) -> None:
    broker = BrokerConfig.from_dict({"remote.log.storage.system.enable": "true"})
    assert fragment in refused({"remote.storage.enable": "true", **overrides}, broker)
    # The same values are fine on a topic that is not tiered.
    LogConfig.create(overrides, broker)


def test_local_retention_is_not_checked_against_unlimited_totals() -> None:
    broker = BrokerConfig.from_dict({"remote.log.storage.system.enable": "true"})
    config = LogConfig.create(
        {"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.ms": "-1"}, broker
    )
    assert config.local_retention_ms == -1
    assert LogConfig.create({"retention.ms": "500"}).local_retention_ms == 500
    assert LogConfig.create({"retention.bytes": "7"}).local_retention_bytes == 7


def test_turning_remote_storage_off_needs_delete_on_disable() -> None:
    broker = BrokerConfig.from_dict({"remote.log.storage.system.enable": "true"})
    tiered = LogConfig.create({"remote.storage.enable": "true"}, broker)
    with pytest.raises(ConfigError, match=r"remote\.log\.delete\.on\.disable"):
        tiered.altered({"remote.storage.enable": "false"})
    with pytest.raises(ConfigError, match=r"remote\.log\.delete\.on\.disable"):
        tiered.altered(delete=["remote.storage.enable"])
    off = tiered.altered({"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"})
    assert off.remote_storage_enable is False


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------


def test_describe_of_defaults_matches_kafka() -> None:
    assert LogConfig.create().describe() == EXPECTED_DEFAULT_DESCRIBE


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.5, "0.5"),
        (1.0, "1.0"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (0.001, "0.001"),
        (0.00123, "0.00123"),
        (0.0001, "1.0E-4"),
        (1.5e-4, "1.5E-4"),
        (1e-5, "1.0E-5"),
        (100.0, "100.0"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (123456789.0, "1.23456789E8"),
        (0.9, "0.9"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (5e-324, "4.9E-324"),
        (-2.5e10, "-2.5E10"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (math.nan, "NaN"),
    ],
)
def test_java_double_to_string(value: float, text: str) -> None:
    assert java_double_to_string(value) == text


@given(st.floats(allow_nan=False))
def test_rendered_doubles_parse_back_exactly(value: float) -> None:
    text = java_double_to_string(value)
    assert float(text) == value or (math.isinf(value) and text.endswith("Infinity"))
    assert parse_value(BROKER_CONFIGS["log.cleaner.io.max.bytes.per.second"], text) == value


def test_overrides_are_normalised() -> None:
    config = LogConfig.create(
        {
            "cleanup.policy": " compact ,  delete ",
            "preallocate": "TRUE",
            "segment.bytes": " +1024 ",
            "min.cleanable.dirty.ratio": "5e-1",
            "retention.ms": 1000,
            "compression.type": " gzip ",
        }
    )
    assert config.overrides == {
        "cleanup.policy": "compact,delete",
        "preallocate": "true",
        "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.5",
        "retention.ms": "1000",
        "compression.type": "gzip",
    }
    described = config.describe()
    for name, value in config.overrides.items():
        assert described[name] == value
    # The normal form parses back to the same config.
    assert LogConfig.create(config.overrides) == config


def test_describe_entries_sources_and_synonyms() -> None:
    broker = BrokerConfig.from_dict({"log.retention.minutes": "5", "log.segment.bytes": "4096"})
    config = LogConfig.create({"segment.bytes": "2048"}, broker)
    entries = {e.name: e for e in config.describe_entries()}
    assert set(entries) == set(TOPIC_CONFIGS)

    segment_bytes = entries["segment.bytes"]
    assert (segment_bytes.value, segment_bytes.source) == ("2048", ConfigSource.TOPIC_CONFIG)
    assert segment_bytes.synonyms == (
        ConfigSynonym("segment.bytes", "2048", ConfigSource.TOPIC_CONFIG),
        ConfigSynonym("log.segment.bytes", "4096", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    )
    assert not segment_bytes.is_default

    # Kafka lists synonyms from the primary broker setting (log.retention.ms) on: it is unset
    # and has no default, so the minutes setting that supplies the value is not listed and the
    # source is DEFAULT_CONFIG (ConfigHelper.configSynonyms' dropWhile; Kafka 4.4 does this).
    retention = entries["retention.ms"]
    assert (retention.value, retention.source, retention.synonyms) == (
        "300000",
        ConfigSource.DEFAULT_CONFIG,
        (),
    )
    assert config.source("retention.ms") == ConfigSource.STATIC_BROKER_CONFIG

    segment_ms = entries["segment.ms"]
    assert (segment_ms.source, segment_ms.is_default) == (ConfigSource.DEFAULT_CONFIG, True)
    assert segment_ms.synonyms == ()
    remote = entries["remote.storage.enable"]
    assert (remote.value, remote.source, remote.synonyms) == (
        "false",
        ConfigSource.DEFAULT_CONFIG,
        (),
    )
    assert entries["min.cleanable.dirty.ratio"].type == "double"
    assert entries["cleanup.policy"].documentation == TOPIC_CONFIGS["cleanup.policy"].doc


def test_source_and_is_default() -> None:
    broker = BrokerConfig.from_dict({"log.cleanup.policy": "compact"})
    config = LogConfig.create({"retention.ms": "10"}, broker)
    assert config.source("retention.ms") == ConfigSource.TOPIC_CONFIG
    assert config.source("cleanup.policy") == ConfigSource.STATIC_BROKER_CONFIG
    assert config.source("segment.bytes") == ConfigSource.DEFAULT_CONFIG
    assert [config.is_default(n) for n in ("retention.ms", "cleanup.policy", "segment.bytes")] == [
        False,
        False,
        True,
    ]
    with pytest.raises(ConfigError):
        config.source("nope")


# ---------------------------------------------------------------------------------------------
# Broker precedence
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "retention_ms"),
    [
        ({}, 604800000),
        ({"log.retention.hours": "1"}, 3600000),
        ({"log.retention.minutes": "2", "log.retention.hours": "1"}, 120000),
        ({"log.retention.ms": "5", "log.retention.minutes": "2", "log.retention.hours": "1"}, 5),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.ms": "-5"}, -1),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.minutes": "-3"}, -1),
    ],
)
def test_retention_ms_precedence(settings: dict[str, str], retention_ms: int) -> None:
    broker = BrokerConfig.from_dict(settings)
    assert broker.topic_defaults()["retention.ms"] == retention_ms
    assert LogConfig.create({}, broker).retention_ms == retention_ms


@pytest.mark.parametrize("settings", [{"log.retention.ms": "0"}, {"log.retention.minutes": "0"}])
def test_zero_broker_retention_is_refused(settings: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"retention"):
        BrokerConfig.from_dict(settings)


def test_roll_and_jitter_precedence() -> None:
    assert BrokerConfig.from_dict({"log.roll.hours": 2}).topic_defaults()["segment.ms"] == 7200000
    both = BrokerConfig.from_dict({"log.roll.ms": 10, "log.roll.hours": 2})
    assert both.topic_defaults()["segment.ms"] == 10
    jitter = BrokerConfig.from_dict({"log.roll.jitter.hours": 1})
    assert jitter.topic_defaults()["segment.jitter.ms"] == 3600000
    jitter = BrokerConfig.from_dict({"log.roll.jitter.ms": 7, "log.roll.jitter.hours": 1})
    assert jitter.topic_defaults()["segment.jitter.ms"] == 7
    with pytest.raises(ConfigError, match=r"log\.roll\.ms"):
        BrokerConfig.from_dict({"log.roll.ms": 0})
    with pytest.raises(ConfigError, match=r"log\.roll\.hours"):
        BrokerConfig.from_dict({"log.roll.hours": 0})
    with pytest.raises(ConfigError, match=r"log\.roll\.jitter\.ms"):
        BrokerConfig.from_dict({"log.roll.jitter.ms": -1})


def test_flush_ms_falls_back_to_the_scheduler_interval() -> None:
    assert BrokerConfig.from_dict({}).topic_defaults()["flush.ms"] == LONG_MAX
    broker = BrokerConfig.from_dict({"log.flush.scheduler.interval.ms": 500})
    assert broker.topic_defaults()["flush.ms"] == 500
    assert broker.flush_scheduler_interval_ms == 500
    broker = BrokerConfig.from_dict(
        {"log.flush.scheduler.interval.ms": 500, "log.flush.interval.ms": 20}
    )
    assert broker.topic_defaults()["flush.ms"] == 20
    with pytest.raises(ConfigError, match=r"log\.flush\.scheduler\.interval\.ms.*flush\.ms"):
        BrokerConfig.from_dict({"log.flush.scheduler.interval.ms": -1})


@pytest.mark.parametrize(
    ("setting", "value", "topic_config", "expected"),
    [
        ("log.segment.bytes", "1024", "segment.bytes", 1024),
        ("log.index.size.max.bytes", "4", "segment.index.bytes", 4),
        ("log.index.interval.bytes", "1", "index.interval.bytes", 1),
        ("log.retention.bytes", "99", "retention.bytes", 99),
        ("log.cleaner.delete.retention.ms", "5", "delete.retention.ms", 5),
        ("log.cleaner.min.compaction.lag.ms", "6", "min.compaction.lag.ms", 6),
        ("log.cleaner.max.compaction.lag.ms", "7", "max.compaction.lag.ms", 7),
        ("log.cleaner.min.cleanable.ratio", "0.25", "min.cleanable.dirty.ratio", 0.25),
        ("log.segment.delete.delay.ms", "8", "file.delete.delay.ms", 8),
        ("message.max.bytes", "100", "max.message.bytes", 100),
        ("log.flush.interval.messages", "3", "flush.messages", 3),
        ("log.preallocate", "true", "preallocate", True),
        ("log.cleanup.policy", "compact", "cleanup.policy", ("compact",)),
        ("compression.type", "zstd", "compression.type", "zstd"),
        ("compression.zstd.level", "-5", "compression.zstd.level", -5),
        ("log.message.timestamp.type", "LogAppendTime", "message.timestamp.type", "LogAppendTime"),
        ("log.message.timestamp.before.max.ms", "9", "message.timestamp.before.max.ms", 9),
        ("log.message.format.version", "2.8", "message.format.version", "2.8-IV1"),
        ("min.insync.replicas", "2", "min.insync.replicas", 2),
        ("unclean.leader.election.enable", "true", "unclean.leader.election.enable", True),
        ("log.message.downconversion.enable", "false", "message.downconversion.enable", False),
        ("log.local.retention.ms", "-1", "local.retention.ms", -1),
    ],
)
def test_broker_synonym_sets_topic_default(
    setting: str, value: str, topic_config: str, expected: object
) -> None:
    broker = BrokerConfig.from_dict({setting: value})
    assert broker.topic_defaults()[topic_config] == expected
    config = LogConfig.create({}, broker)
    assert config.get(topic_config) == expected
    assert config.source(topic_config) == ConfigSource.STATIC_BROKER_CONFIG
    assert broker.topic_default_source(topic_config) == (ConfigSource.STATIC_BROKER_CONFIG, setting)


def test_topic_defaults_cover_every_topic_config() -> None:
    defaults = BrokerConfig.from_dict({}).topic_defaults()
    assert {n: render_value(TOPIC_CONFIGS[n].type, v) for n, v in defaults.items()} == (
        EXPECTED_DEFAULT_DESCRIBE
    )


def test_broker_refuses_unknown_and_topic_names() -> None:
    with pytest.raises(ConfigError, match=r"Unknown broker config name: nope"):
        BrokerConfig.from_dict({"nope": 1})
    with pytest.raises(ConfigError, match=r"segment\.bytes is a topic config.*log\.segment\.bytes"):
        BrokerConfig.from_dict({"segment.bytes": 1024})


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"log.segment.bytes": "13"}, "at least 14"),
        ({"log.cleaner.threads": "-1"}, "at least 0"),
        ({"log.cleaner.threads": "0"}, "log.cleaner.enable=false"),
        ({"log.cleaner.dedupe.buffer.size": 1024 * 1024}, "more than 1 MiB"),
        ({"log.cleaner.threads": 2, "log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024}, "1 MiB"),
        ({"log.cleaner.min.cleanable.ratio": "1.5"}, "at most 1"),
        ({"log.cleaner.backoff.ms": "-1"}, "at least 0"),
        ({"log.retention.check.interval.ms": "0"}, "at least 1"),
        ({"num.recovery.threads.per.data.dir": "0"}, "at least 1"),
        ({"producer.id.expiration.ms": "0"}, "at least 1"),
        ({"log.cleaner.enable": "maybe"}, "true or false"),
        ({"log.cleanup.policy": "Compact"}, "compact, delete"),
        (
            {"log.cleaner.min.compaction.lag.ms": 10, "log.cleaner.max.compaction.lag.ms": 5},
            "min.compaction.lag.ms (10)",
        ),
        (
            {"remote.log.storage.system.enable": True, "log.retention.ms": 10,
             "log.local.retention.ms": 20},
            "local.retention.ms",
        ),
    ],
)  # fmt: skip
def test_broker_refusals(settings: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_dict(settings)  # type: ignore[arg-type]
    assert fragment in str(info.value)


def test_broker_cleaner_settings() -> None:
    broker = BrokerConfig.from_dict(
        {
            "log.cleaner.enable": "false",
            "log.cleaner.threads": "4",
            "log.cleaner.dedupe.buffer.size": str(64 * 1024 * 1024),
            "log.cleaner.io.buffer.load.factor": "0.75",
            "log.cleaner.io.buffer.size": "1048576",
            "log.cleaner.io.max.bytes.per.second": "1e6",
            "log.cleaner.backoff.ms": "100",
        }
    )
    assert broker.cleaner_enable is False
    assert broker.cleaner_threads == 4
    assert broker.dedupe_buffer_size_per_thread == 16 * 1024 * 1024
    assert broker.io_buffer_load_factor == 0.75
    assert broker.io_buffer_size_per_thread == 131072
    assert broker.io_max_bytes_per_second == 1e6
    assert broker.cleaner_backoff_ms == 100
    assert broker.is_set("log.cleaner.threads")
    assert broker.get("log.roll.ms") is None
    big = BrokerConfig.from_dict({"log.cleaner.dedupe.buffer.size": 2**40})
    assert big.dedupe_buffer_size_per_thread == INT_MAX


# ---------------------------------------------------------------------------------------------
# Alter
# ---------------------------------------------------------------------------------------------


def test_alter_set_and_delete() -> None:
    broker = BrokerConfig.from_dict({"log.retention.hours": "1"})
    config = LogConfig.create({"retention.ms": "10", "segment.bytes": "1024"}, broker)
    changed = config.altered({"cleanup.policy": "compact"}, ["retention.ms"])
    assert changed.overrides == {"segment.bytes": "1024", "cleanup.policy": "compact"}
    assert changed.retention_ms == 3600000  # back to the broker default, not the static one
    assert changed.compact and not changed.delete
    assert config.overrides == {"retention.ms": "10", "segment.bytes": "1024"}
    assert config.retention_ms == 10


def test_alter_deleting_a_known_but_unset_config_is_a_no_op() -> None:
    config = LogConfig.create({"segment.bytes": "1024"})
    assert config.altered(delete=["retention.ms"]) == config


def test_alter_refusals_change_nothing() -> None:
    config = LogConfig.create({"max.compaction.lag.ms": "100"})
    snapshot = (config.describe(), config.overrides)
    with pytest.raises(ConfigError, match=r"min\.compaction\.lag\.ms"):
        config.altered({"min.compaction.lag.ms": "200"})
    with pytest.raises(ConfigError, match=r"Unknown topic config name: nope"):
        config.altered({"segment.bytes": "1024", "nope": "1"})
    with pytest.raises(ConfigError, match=r"Unknown topic config name: nope"):
        config.altered(delete=["nope"])
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        config.altered({"segment.bytes": "1", "retention.ms": "5"})
    with pytest.raises(ConfigError, match=r"one operation"):
        config.altered({"segment.bytes": "1024"}, ["segment.bytes"])
    assert (config.describe(), config.overrides) == snapshot


def test_alter_validates_the_result_as_a_whole() -> None:
    config = LogConfig.create({"max.compaction.lag.ms": "100"})
    both = config.altered({"min.compaction.lag.ms": "200", "max.compaction.lag.ms": "300"})
    assert (both.min_compaction_lag_ms, both.max_compaction_lag_ms) == (200, 300)
    with pytest.raises(ConfigError):
        both.altered(delete=["max.compaction.lag.ms"], set={"max.compaction.lag.ms": "1"})


def test_alter_append_and_subtract_lists() -> None:
    config = LogConfig.create()
    both = config.altered(append={"cleanup.policy": "compact"})
    assert both.overrides["cleanup.policy"] == "delete,compact"
    assert both.altered(append={"cleanup.policy": "delete"}).overrides["cleanup.policy"] == (
        "delete,compact"
    )
    compact = both.altered(subtract={"cleanup.policy": "delete"})
    assert compact.overrides["cleanup.policy"] == "compact"
    neither = compact.altered(subtract={"cleanup.policy": "compact"})
    assert neither.cleanup_policy == frozenset()
    assert neither.overrides["cleanup.policy"] == ""
    with pytest.raises(ConfigError, match=r"not a list"):
        config.altered(append={"segment.bytes": "1"})
    with pytest.raises(ConfigError, match=r"cleanup\.policy"):
        config.altered(append={"cleanup.policy": "Compact"})


# ---------------------------------------------------------------------------------------------
# The LogConfig object
# ---------------------------------------------------------------------------------------------


ATTRIBUTES = {
    "segment_bytes": "segment.bytes",
    "segment_ms": "segment.ms",
    "segment_jitter_ms": "segment.jitter.ms",
    "segment_index_bytes": "segment.index.bytes",
    "index_interval_bytes": "index.interval.bytes",
    "retention_bytes": "retention.bytes",
    "retention_ms": "retention.ms",
    "delete_retention_ms": "delete.retention.ms",
    "min_compaction_lag_ms": "min.compaction.lag.ms",
    "max_compaction_lag_ms": "max.compaction.lag.ms",
    "min_cleanable_dirty_ratio": "min.cleanable.dirty.ratio",
    "file_delete_delay_ms": "file.delete.delay.ms",
    "max_message_bytes": "max.message.bytes",
    "preallocate": "preallocate",
    "compression_type": "compression.type",
    "message_timestamp_type": "message.timestamp.type",
    "message_timestamp_before_max_ms": "message.timestamp.before.max.ms",
    "message_timestamp_after_max_ms": "message.timestamp.after.max.ms",
    "flush_messages": "flush.messages",
    "flush_ms": "flush.ms",
    "remote_storage_enable": "remote.storage.enable",
}


def test_typed_attributes_match_the_values() -> None:
    overrides = {
        "segment.bytes": "1000", "segment.ms": "1001", "segment.jitter.ms": "1002",
        "segment.index.bytes": "1003", "index.interval.bytes": "1004", "retention.bytes": "1005",
        "retention.ms": "1006", "delete.retention.ms": "1007", "min.compaction.lag.ms": "1008",
        "max.compaction.lag.ms": "1009", "min.cleanable.dirty.ratio": "0.1",
        "file.delete.delay.ms": "1010", "max.message.bytes": "1011", "preallocate": "true",
        "compression.type": "lz4", "message.timestamp.type": "LogAppendTime",
        "message.timestamp.before.max.ms": "1012", "message.timestamp.after.max.ms": "1013",
        "flush.messages": "1014", "flush.ms": "1015",
    }  # fmt: skip
    config = LogConfig.create(overrides)
    for attribute, name in ATTRIBUTES.items():
        assert getattr(config, attribute) == config.get(name), attribute
        expected_type = {"int": int, "long": int, "double": float, "boolean": bool}.get(
            TOPIC_CONFIGS[name].type, str
        )
        assert type(getattr(config, attribute)) is expected_type, attribute
    assert config.segment_bytes == 1000 and config.flush_ms == 1015


def test_timestamp_limits_fall_back_to_the_deprecated_difference() -> None:
    config = create(message_timestamp_difference_max_ms=500)
    assert config.message_timestamp_before_max_ms == 500
    assert config.message_timestamp_after_max_ms == 500
    config = create(message_timestamp_difference_max_ms=500, message_timestamp_after_max_ms=7)
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (
        500,
        7,
    )
    assert create().message_timestamp_before_max_ms == LONG_MAX


def test_max_segment_ms_is_capped_for_compacted_topics() -> None:
    assert create(segment_ms=1000, max_compaction_lag_ms=10).max_segment_ms == 1000
    compacted = create(cleanup_policy="compact", segment_ms=1000, max_compaction_lag_ms=10)
    assert compacted.max_segment_ms == 10
    assert create(preallocate="true", segment_bytes=2048).init_file_size == 2048
    assert create(segment_bytes=2048).init_file_size == 0


def test_log_config_is_immutable_and_comparable() -> None:
    config = LogConfig.create({"segment.bytes": "1024"})
    with pytest.raises(AttributeError):
        config.segment_bytes = 5  # type: ignore[misc]
    config.overrides["segment.bytes"] = "1"
    assert config.segment_bytes == 1024 and config.overrides == {"segment.bytes": "1024"}
    assert config == LogConfig.create({"segment.bytes": 1024})
    assert hash(config) == hash(LogConfig.create({"segment.bytes": 1024}))
    assert config != LogConfig.create()
    assert "segment.bytes" in repr(config)
    with pytest.raises(AttributeError):
        BrokerConfig.from_dict().cleaner_threads = 3  # type: ignore[misc]


def test_explicitly_set_default_is_still_an_override() -> None:
    config = LogConfig.create({"segment.bytes": "1073741824"})
    assert config.overrides == {"segment.bytes": "1073741824"}
    assert config.source("segment.bytes") == ConfigSource.TOPIC_CONFIG
    assert config != LogConfig.create()


# ---------------------------------------------------------------------------------------------
# CLI assignments
# ---------------------------------------------------------------------------------------------


def test_parse_config_assignments() -> None:
    assert parse_config_assignments(["segment.bytes=1024", "cleanup.policy=compact,delete"]) == {
        "segment.bytes": "1024",
        "cleanup.policy": "compact,delete",
    }
    assert parse_config_assignments(["a=b=c", " k =", "e= x "]) == {"a": "b=c", "k": "", "e": " x "}
    assert parse_config_assignments([]) == {}


@pytest.mark.parametrize("items", [["segment.bytes"], ["=1"], [" =1"], ["a=1", "a=2"]])
def test_parse_config_assignment_refusals(items: list[str]) -> None:
    with pytest.raises(ConfigError):
        parse_config_assignments(items)


def test_assignment_error_names_the_item() -> None:
    with pytest.raises(ConfigError, match=r"segment\.bytes.*NAME=VALUE"):
        parse_config_assignments(["segment.bytes"])


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------


def _valid_value(name: str) -> st.SearchStrategy[object]:
    bounds = {b[0]: (b[1], b[2]) for b in BOUNDS}
    definition = TOPIC_CONFIGS[name]
    if name in bounds:
        low, high = bounds[name]
        return st.integers(low, high) | st.integers(low, high).map(str)
    if name == "min.cleanable.dirty.ratio":
        return st.floats(0, 1) | st.floats(0, 1).map(repr)
    if definition.type == "boolean":
        return st.booleans() | st.sampled_from(["true", "false", "TRUE", "False"])
    if name == "cleanup.policy":
        return st.lists(st.sampled_from(["compact", "delete"]), max_size=3).map(",".join)
    if name == "compression.type":
        return st.sampled_from(["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"])
    if name == "message.timestamp.type":
        return st.sampled_from(["CreateTime", "LogAppendTime"])
    if name == "message.format.version":
        return st.sampled_from(["0.10.0", "2.8", "3.0-IV1"])
    return st.sampled_from(["*", "", "1:2,3:4"])


_SAFE = sorted(set(TOPIC_CONFIGS) - {
    "remote.storage.enable", "min.compaction.lag.ms", "max.compaction.lag.ms",
})  # fmt: skip


@given(st.data())
def test_valid_overrides_round_trip_through_their_normal_form(data: st.DataObject) -> None:
    names = data.draw(st.lists(st.sampled_from(_SAFE), unique=True, max_size=8))
    overrides = {name: data.draw(_valid_value(name)) for name in names}
    config = LogConfig.create(overrides)  # type: ignore[arg-type]
    assert set(config.overrides) == set(names)
    again = LogConfig.create(config.overrides)
    assert again == config
    assert again.describe() == config.describe()


@given(st.text(max_size=12))
def test_any_text_for_any_config_parses_or_raises_config_error(text: str) -> None:
    for definition in TOPIC_CONFIGS.values():
        with contextlib.suppress(ConfigError):
            parse_value(definition, text)


# What Kafka 4.4's broker answered (IncrementalAlterConfigs error_message) for the same values;
# the broker sends ``kafka_message`` so that Kafka's tools print the same line.
@pytest.mark.parametrize(
    ("name", "value", "kafka_message"),
    [
        ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: "
         "Not a number of type LONG"),
        ("retention.ms", "-5", "Invalid value -5 for configuration retention.ms: "
         "Value must be at least -1"),
        ("cleanup.policy", "compact,bogus", "Invalid value bogus for configuration "
         "cleanup.policy: String must be one of: compact, delete"),
        ("min.cleanable.dirty.ratio", "2", "Invalid value 2.0 for configuration "
         "min.cleanable.dirty.ratio: Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "x", "Invalid value x for configuration "
         "min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
        ("compression.type", "x", "Invalid value x for configuration compression.type: "
         "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("preallocate", "maybe", "Invalid value maybe for configuration preallocate: "
         "Expected value to be either true or false"),
        ("max.message.bytes", "99999999999", "Invalid value 99999999999 for configuration "
         "max.message.bytes: Not a number of type INT"),
        ("compression.gzip.level", "99", "Invalid value 99 for configuration "
         "compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
        ("compression.zstd.level", "99", "Invalid value 99 for configuration "
         "compression.zstd.level: Value must be no more than 22"),
        ("compression.lz4.level", "99", "Invalid value 99 for configuration "
         "compression.lz4.level: Value must be no more than 17"),
        ("message.timestamp.type", "x", "Invalid value x for configuration "
         "message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
        ("follower.replication.throttled.replicas", "x", "Invalid value [x] for configuration "
         "follower.replication.throttled.replicas: follower.replication.throttled.replicas must "
         "be the literal '*' or a list of replicas in the following format: "
         "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    ],
)  # fmt: skip
def test_refusals_carry_kafkas_wording(name: str, value: str, kafka_message: str) -> None:
    with pytest.raises(ConfigError) as e:
        LogConfig.create({name: value})
    assert e.value.kafka_message == kafka_message
    assert str(e.value).startswith(f"Invalid value {value} for config {name}: ")


def test_append_to_a_non_list_carries_kafkas_wording() -> None:
    with pytest.raises(ConfigError) as e:
        LogConfig.create().altered(append={"retention.ms": "5"})
    assert e.value.kafka_message == "Can't APPEND to key retention.ms because its type is not LIST."
