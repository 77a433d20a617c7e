"""The broker's settings: one mapping of Kafka broker config names, split among its three owners.

``Broker(config={...})`` (and ``compactlog serve --config NAME=VALUE``) takes one flat mapping.
Each name belongs to exactly one of:

* the **store**: every name of :data:`compactlog.storage.config.BROKER_CONFIGS`
  (``message.max.bytes``, ``log.cleaner.*``, ``log.retention.*``, ``log.segment.bytes``, ...),
  validated by :meth:`BrokerConfig.from_dict`;
* the **group coordinator**: :data:`GROUP_SETTINGS` (``group.*``, ``offsets.*``,
  ``offset.metadata.max.bytes``), read by :meth:`GroupCoordinatorConfig.from_properties`;
* the **broker** itself: :data:`BROKER_SETTINGS` (its node id, auto-creation, partitions of
  auto-created topics, the limits of :mod:`compactlog.broker.limits`, and authorization:
  ``authorizer.class.name``, ``super.users``, ``allow.everyone.if.no.acl.found``, read by
  :mod:`compactlog.broker.authorizer`).

A name in none of them is a :class:`~compactlog.errors.ConfigError` naming it, raised when the
broker starts, before anything is bound or opened. Values may be Kafka's strings (``"true"``,
``"1048588"``) or Python values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from compactlog.broker.authorizer import AUTHORIZER_CLASS_NAME, parse_super_users
from compactlog.broker.coordinator.config import GroupCoordinatorConfig
from compactlog.broker.limits import (
    DEFAULT_CONNECTIONS_MAX_IDLE_MS,
    DEFAULT_FAILED_REQUEST_CLOSE_DELAY_MS,
    DEFAULT_FETCH_MAX_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_IP,
    DEFAULT_MAX_IN_FLIGHT_REQUESTS,
    DEFAULT_SOCKET_REQUEST_MAX_BYTES,
    Limits,
)
from compactlog.broker.node_state import NODE_ID
from compactlog.broker.security.config import SecuritySettings, is_security_setting
from compactlog.errors import ConfigError
from compactlog.storage.config import (
    BROKER_CONFIGS,
    INT_MAX,
    BrokerConfig,
    ConfigDef,
    ConfigSource,
    ConfigValue,
    Range,
    RawValue,
    at_least,
    parse_value,
    render_value,
)

__all__ = [
    "BROKER_SETTINGS",
    "GROUP_SETTINGS",
    "BrokerSettings",
    "DescribedSetting",
    "parse_per_ip_overrides",
]

_DEFAULT_GROUPS = GroupCoordinatorConfig()

_BROKER_DEFS: Final = (
    ConfigDef("node.id", "int", NODE_ID,
              "The id of this broker: the leader, replica and coordinator that Metadata, "
              "FindCoordinator and DescribeCluster name (Kafka requires it; compactlog defaults "
              "to 0). A data directory keeps the id it was first served with.",
              Range(0, INT_MAX)),
    ConfigDef("auto.create.topics.enable", "boolean", True,
              "Create a topic that a Metadata request names when it does not exist and the "
              "request allows it (producers do); Kafka's default is true."),
    ConfigDef("num.partitions", "int", 1,
              "Partitions of an auto-created topic.", at_least(1)),
    ConfigDef("socket.request.max.bytes", "int", DEFAULT_SOCKET_REQUEST_MAX_BYTES,
              "The largest request frame; a larger size prefix closes the connection before "
              "the body is read.", at_least(1)),
    ConfigDef("max.connections", "int", DEFAULT_MAX_CONNECTIONS,
              "Concurrent client connections; one more is closed as soon as it is accepted.",
              at_least(0)),
    ConfigDef("max.connections.per.ip", "int", DEFAULT_MAX_CONNECTIONS_PER_IP,
              "Connections from one address; one more from it is closed as soon as it is "
              "accepted. 0 only with max.connections.per.ip.overrides.", at_least(0)),
    ConfigDef("max.connections.per.ip.overrides", "string", "",
              "Per-address or per-host-name limits that replace max.connections.per.ip, as "
              "host:count pairs separated by commas, e.g. \"hostName:100,127.0.0.1:200\"."),
    ConfigDef("connections.max.idle.ms", "long", DEFAULT_CONNECTIONS_MAX_IDLE_MS,
              "A connection with no traffic and no request in progress for this long is "
              "closed.", at_least(1)),
    ConfigDef("compactlog.max.in.flight.requests.per.connection", "int",
              DEFAULT_MAX_IN_FLIGHT_REQUESTS,
              "Requests of one connection read ahead of their answers; beyond it the socket is "
              "not read until an answer is sent.", Range(1, 1000)),
    ConfigDef("compactlog.failed.request.close.delay.ms", "int",
              DEFAULT_FAILED_REQUEST_CLOSE_DELAY_MS,
              "How long a connection that sent an undecodable or unsupported request is held "
              "before it is closed (Kafka's connection.failed.authentication.delay.ms, for "
              "malformed requests): a client that floods bad requests waits instead of costing "
              "the well-behaved ones their latency. 0 closes at once.", Range(0, 10_000)),
    ConfigDef("authorizer.class.name", "string", "",
              "The authorizer: empty for none (every request is allowed), or "
              f"{AUTHORIZER_CLASS_NAME} for Kafka's ACLs (CreateAcls, kafka-acls)."),
    ConfigDef("super.users", "string", "",
              "Principals allowed everything whatever the ACLs, separated by semicolons "
              "(User:admin;User:ops)."),
    ConfigDef("allow.everyone.if.no.acl.found", "boolean", False,
              "Allow a request on a resource that no ACL applies to (default: deny)."),
    ConfigDef("fetch.max.bytes", "int", DEFAULT_FETCH_MAX_BYTES,
              "The most one Fetch response carries (beyond its first batch, which is always "
              "returned whole).", at_least(1024)),
)  # fmt: skip

#: The broker's own settings (not the store's, not the group coordinator's), by name.
BROKER_SETTINGS: Final[Mapping[str, ConfigDef]] = MappingProxyType(
    {d.name: d for d in _BROKER_DEFS}
)

_GROUP_DEFS: Final = (
    ("group.min.session.timeout.ms", _DEFAULT_GROUPS.group_min_session_timeout_ms,
     "The shortest session timeout a member may ask for."),
    ("group.max.session.timeout.ms", _DEFAULT_GROUPS.group_max_session_timeout_ms,
     "The longest session timeout a member may ask for."),
    ("group.initial.rebalance.delay.ms", _DEFAULT_GROUPS.group_initial_rebalance_delay_ms,
     "How long a new group waits for more members before its first rebalance completes."),
    ("group.max.size", _DEFAULT_GROUPS.group_max_size, "The most members a group may have."),
    ("offset.metadata.max.bytes", _DEFAULT_GROUPS.offset_metadata_max_bytes,
     "The longest metadata string an offset commit may carry."),
    ("offsets.retention.minutes", _DEFAULT_GROUPS.offsets_retention_minutes,
     "How long the committed offsets of an empty group are kept."),
    ("offsets.retention.check.interval.ms",
     _DEFAULT_GROUPS.offsets_retention_check_interval_ms,
     "How often expired offsets are looked for."),
    ("offsets.topic.num.partitions", _DEFAULT_GROUPS.offsets_topic_num_partitions,
     "Partitions of __consumer_offsets (used only when it is created)."),
    ("offsets.topic.segment.bytes", _DEFAULT_GROUPS.offsets_topic_segment_bytes,
     "segment.bytes of __consumer_offsets (used only when it is created)."),
)  # fmt: skip

#: The group coordinator's settings, by Kafka's names.
GROUP_SETTINGS: Final[Mapping[str, ConfigDef]] = MappingProxyType(
    {
        name: ConfigDef(name, "int", default, doc, Range(0, INT_MAX))
        for name, default, doc in _GROUP_DEFS
    }
)


def parse_per_ip_overrides(text: str) -> tuple[tuple[str, int], ...]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs separated by commas (Kafka's
    map syntax); a malformed pair or count is a :class:`ConfigError` naming it."""
    pairs: list[tuple[str, int]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().removeprefix("[").removesuffix("]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(
                f"Invalid value {text!r} for configuration max.connections.per.ip.overrides: "
                f'{item!r} is not host:count (e.g. "hostName:100,127.0.0.1:200")'
            )
        limit = int(count)
        if limit > INT_MAX:
            raise ConfigError(
                f"max.connections.per.ip.overrides: the count of {host} ({limit}) is larger "
                f"than {INT_MAX}"
            )
        pairs.append((host, limit))
    return tuple(pairs)


@dataclass(frozen=True)
class DescribedSetting:
    """One broker setting as DescribeConfigs reports it for the broker resource."""

    name: str
    value: str | None
    source: ConfigSource
    documentation: str


@dataclass(frozen=True)
class BrokerSettings:
    """The validated settings of one broker; build with :meth:`from_mapping`."""

    #: What the store is opened with (names of ``BROKER_CONFIGS``), as given.
    store_config: Mapping[str, RawValue]
    store: BrokerConfig
    groups: GroupCoordinatorConfig
    limits: Limits
    auto_create_topics_enable: bool
    num_partitions: int
    node_id: int
    _values: Mapping[str, ConfigValue]
    _explicit: frozenset[str]
    #: Listeners, TLS, SASL (:mod:`compactlog.broker.security.config`).
    security: SecuritySettings = field(default_factory=SecuritySettings)
    #: ACLs are enforced (``authorizer.class.name`` names Kafka's StandardAuthorizer).
    authorizer_enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None = None) -> BrokerSettings:
        """Sort ``config`` to its owners and validate every value; :class:`ConfigError` names
        the first unknown name or bad value."""
        config = dict(config or {})
        store_config: dict[str, RawValue] = {}
        group_values: dict[str, int] = {}
        values: dict[str, ConfigValue] = {}
        security_config: dict[str, Any] = {}
        for name, raw in config.items():
            if not isinstance(name, str):
                raise ConfigError(f"a config name must be a string, not {name!r}")
            if name in BROKER_CONFIGS:
                store_config[name] = raw
            elif name in GROUP_SETTINGS:
                value = parse_value(GROUP_SETTINGS[name], raw)
                assert isinstance(value, int)
                group_values[name] = value
            elif name in BROKER_SETTINGS:
                values[name] = parse_value(BROKER_SETTINGS[name], raw)
            elif is_security_setting(name):
                security_config[name] = raw
            else:
                raise ConfigError(
                    f"Unknown broker config name: {name} (the broker takes Kafka's broker "
                    "settings: its own, the store's such as message.max.bytes and "
                    "log.cleaner.*, and the group coordinator's group.* and offsets.*)"
                )
        store = BrokerConfig.from_dict(store_config)
        groups = GroupCoordinatorConfig.from_properties(group_values)
        explicit = frozenset(values)
        for name, definition in BROKER_SETTINGS.items():
            if name not in values:
                assert definition.default is not None
                values[name] = definition.default

        def number(name: str) -> int:
            value = values[name]
            assert isinstance(value, int)
            return value

        per_ip = number("max.connections.per.ip")
        overrides = parse_per_ip_overrides(str(values["max.connections.per.ip.overrides"]))
        if per_ip == 0 and not overrides:
            raise ConfigError(
                "max.connections.per.ip can be set to zero only if "
                "max.connections.per.ip.overrides property is set."
            )
        authorizer_class = str(values["authorizer.class.name"]).strip()
        if authorizer_class not in ("", AUTHORIZER_CLASS_NAME):
            raise ConfigError(
                f"Invalid value {authorizer_class!r} for configuration authorizer.class.name: "
                f"compactlog implements only {AUTHORIZER_CLASS_NAME} (or empty for none)"
            )
        super_users = parse_super_users(str(values["super.users"]))
        # The listeners' safe-by-default check needs to know whether ACLs are enforced.
        security_config["authorizer.class.name"] = authorizer_class
        limits = Limits(
            socket_request_max_bytes=number("socket.request.max.bytes"),
            max_connections=number("max.connections"),
            connections_max_idle_ms=number("connections.max.idle.ms"),
            max_in_flight_requests=number("compactlog.max.in.flight.requests.per.connection"),
            failed_request_close_delay_ms=number("compactlog.failed.request.close.delay.ms"),
            fetch_max_bytes=number("fetch.max.bytes"),
            max_connections_per_ip=per_ip,
            max_connections_per_ip_overrides=overrides,
        )
        return cls(
            store_config=MappingProxyType(store_config),
            store=store,
            groups=groups,
            limits=limits,
            auto_create_topics_enable=bool(values["auto.create.topics.enable"]),
            num_partitions=number("num.partitions"),
            node_id=number("node.id"),
            _values=MappingProxyType(values),
            _explicit=explicit | frozenset(group_values),
            security=SecuritySettings.from_mapping(security_config),
            authorizer_enabled=bool(authorizer_class),
            super_users=super_users,
            allow_everyone_if_no_acl_found=bool(values["allow.everyone.if.no.acl.found"]),
        )

    @property
    def cluster_defaults(self) -> dict[str, str]:
        """The cluster-wide dynamic broker defaults a Kafka 4.4 cluster has from its start.

        Kafka's controller writes ``min.insync.replicas`` as a cluster-level config (resource
        BROKER, name "") when the eligible-leader-replicas feature is on, which it is for every
        cluster formatted by Kafka 4.1 or later, with the static setting's value. Kafka's tools
        therefore show it among every topic's configs (DYNAMIC_DEFAULT_BROKER_CONFIG); so do
        we. There are no other dynamic broker configs here: they cannot be altered.
        """
        value = self.store.get("min.insync.replicas")
        return {"min.insync.replicas": str(value)}

    def describe(self) -> list[DescribedSetting]:
        """Every setting of the broker, store and coordinator with its value and whether it
        was set (STATIC_BROKER_CONFIG) or left at its default (DEFAULT_CONFIG), by name."""
        rows: list[DescribedSetting] = []
        for name, definition in BROKER_CONFIGS.items():
            if definition.internal:
                continue
            value = self.store.get(name)
            source = (
                ConfigSource.STATIC_BROKER_CONFIG
                if self.store.is_set(name)
                else ConfigSource.DEFAULT_CONFIG
            )
            rendered = None if value is None else render_value(definition.type, value)
            rows.append(DescribedSetting(name, rendered, source, definition.doc))
        for name, definition in BROKER_SETTINGS.items():
            rows.append(self._row(definition, self._values[name]))
        for name, definition in GROUP_SETTINGS.items():
            field = name.replace(".", "_")
            rows.append(self._row(definition, getattr(self.groups, field)))
        return sorted(rows, key=lambda row: row.name)

    def _row(self, definition: ConfigDef, value: ConfigValue) -> DescribedSetting:
        source = (
            ConfigSource.STATIC_BROKER_CONFIG
            if definition.name in self._explicit
            else ConfigSource.DEFAULT_CONFIG
        )
        return DescribedSetting(
            definition.name, render_value(definition.type, value), source, definition.doc
        )
