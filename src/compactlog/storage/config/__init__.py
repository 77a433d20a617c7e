"""Topic and broker configuration, with Kafka 3.9's names, types, defaults and valid values.

Theory of operation
-------------------

Kafka keeps two layers of log settings (spec section 7):

* **Topic configs** (``segment.bytes``, ``cleanup.policy``, ...): set per topic as *overrides*.
  :data:`TOPIC_CONFIGS` lists every one Kafka 3.9 documents, each with its type, static default,
  validator and the broker settings ("synonyms") that supply its default.
* **Broker configs** (``log.segment.bytes``, ``log.cleaner.threads``, ...): set once for the whole
  store (``Store.open(config={...})``). :data:`BROKER_CONFIGS` lists the ones compactlog accepts:
  the cleaner and scheduler settings plus every synonym of a topic config.

The value of a topic config for one topic is resolved like Kafka's ``LogConfig.fromProps`` over
``KafkaConfig.extractLogConfigMap``:

1. the topic's own override, if it sets one;
2. else the first broker synonym that has a value, converted to milliseconds where the synonym
   counts hours or minutes (``segment.ms`` <- ``log.roll.ms`` <- ``log.roll.hours``;
   ``retention.ms`` <- ``log.retention.ms`` <- ``.minutes`` <- ``.hours``, where any negative
   result means -1; ``flush.ms`` <- ``log.flush.interval.ms`` <-
   ``log.flush.scheduler.interval.ms``);
3. else the topic config's static default.

Values are parsed and rendered the Java way (Kafka's ``ConfigDef.parseType``, and DescribeConfigs'
printing of the parsed Java value behind :meth:`LogConfig.describe`); the rules are written at the
top of :mod:`compactlog.storage.config.values`. Cross-field rules run on the whole effective
config: ``min.compaction.lag.ms <= max.compaction.lag.ms`` and the tiered-storage rules of
``LogConfig.validateTopicLogConfigValues``. Every refusal is a :class:`ConfigError` naming the
config, the value and the reason; nothing is partially applied.

Deliberate differences from Kafka: a double that parses as NaN is refused (Kafka accepts it and
then never cleans by ratio), integers must be ASCII digits, and altering or deleting an unknown
topic config name is refused (Kafka's controller ignores deletes of unknown names).

Layout
------

The package is split by concern; the layers below never import the ones above:

* :mod:`~compactlog.storage.config.defs`: the value types, :class:`ConfigSource`, the validators,
  :class:`ConfigDef` and the tables :data:`TOPIC_CONFIGS` and :data:`BROKER_CONFIGS`;
* :mod:`~compactlog.storage.config.values`: parsing and rendering values the Java way;
* :mod:`~compactlog.storage.config.rules`: the rules across configs (broker start-up checks,
  ``min.compaction.lag.ms <= max.compaction.lag.ms``, the tiered-storage checks);
* :mod:`~compactlog.storage.config.broker_config`: :class:`BrokerConfig`, the store's settings
  and the topic defaults they imply, and the DescribeConfigs synonym lists;
* :mod:`~compactlog.storage.config.log_config`: :class:`LogConfig`, one topic's effective config,
  and the DescribeConfigs rows it produces.

Every public name of those modules is re-exported here (see ``__all__``), so
``from compactlog.storage.config import ...`` is the one import callers need.
"""

from compactlog.storage.config.broker_config import BrokerConfig, ConfigSynonym
from compactlog.storage.config.defs import (
    BROKER_CONFIGS,
    CONFIG_TYPE_IDS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DOUBLE_MAX,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    MIN_SEGMENT_BYTES,
    MS_PER_HOUR,
    MS_PER_MINUTE,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigSource,
    ConfigType,
    ConfigValue,
    LevelRange,
    ListOf,
    MetadataVersionString,
    OneOf,
    Range,
    RawValue,
    Synonym,
    ThrottledReplicaList,
    Validator,
    at_least,
    canonical_metadata_version,
)
from compactlog.storage.config.log_config import ConfigEntry, LogConfig
from compactlog.storage.config.rules import MIN_DEDUPE_BUFFER_PER_THREAD
from compactlog.storage.config.values import (
    java_double_to_string,
    parse_config_assignments,
    parse_value,
    render_value,
)

__all__ = [
    "BROKER_CONFIGS",
    "CONFIG_TYPE_IDS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DOUBLE_MAX",
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "MIN_DEDUPE_BUFFER_PER_THREAD",
    "MIN_SEGMENT_BYTES",
    "MS_PER_HOUR",
    "MS_PER_MINUTE",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigEntry",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "ConfigValue",
    "LevelRange",
    "ListOf",
    "LogConfig",
    "MetadataVersionString",
    "OneOf",
    "Range",
    "RawValue",
    "Synonym",
    "ThrottledReplicaList",
    "Validator",
    "at_least",
    "canonical_metadata_version",
    "java_double_to_string",
    "parse_config_assignments",
    "parse_value",
    "render_value",
]
