"""The asyncio Kafka-protocol broker: connections, limits, request handlers, groups.

Layer rule: ``compactlog.broker`` may import :mod:`compactlog.cleaner`,
:mod:`compactlog.storage`, :mod:`compactlog.protocol`, :mod:`compactlog.records` and
:mod:`compactlog.errors`; nothing below imports it (``lint-imports`` checks this).

Modules:

* :mod:`~compactlog.broker.server` - ``Broker`` and ``BrokerThread``: the listener, start-up and
  shutdown over one :class:`~compactlog.storage.store.Store` (store calls run on the loop thread);
* :mod:`~compactlog.broker.connection` - one connection: frames in, requests handled one at a time
  in order, responses out;
* :mod:`~compactlog.broker.handlers` - one module per family of APIs, dispatched by api key;
* :mod:`~compactlog.broker.settings` and :mod:`~compactlog.broker.limits` - the broker's settings
  by Kafka's names, and every limit with its default and reason;
* :mod:`~compactlog.broker.metrics` - counters, and ``GET /metrics`` in Prometheus text format;
* :mod:`~compactlog.broker.node_state` - the cluster id and producer-id blocks kept in the data
  directory;
* :mod:`~compactlog.broker.groups` - the classic consumer-group coordinator (JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups),
  sans-I/O, with its state in ``__consumer_offsets``;
* :mod:`~compactlog.broker.group_api` - error codes, configs and result types of the group APIs;
* :mod:`~compactlog.broker.classic_group` - one group's members and state machine;
* :mod:`~compactlog.broker.membership` - JoinGroup, SyncGroup, Heartbeat, LeaveGroup;
* :mod:`~compactlog.broker.rebalance` - join phases, deadlines and sessions between requests;
* :mod:`~compactlog.broker.offsets` - committed offsets and their expiry;
* :mod:`~compactlog.broker.offsets_topic` - the record layouts of ``__consumer_offsets`` and the
  group-to-partition hash;
* :mod:`~compactlog.broker.delayed` - delayed responses and the coordinator's timer.
"""
