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
* :mod:`~compactlog.broker.coordinator` - Kafka's group coordinator for classic consumer groups
  (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
  DescribeGroups, DeleteGroups), sans-I/O, with its state in ``__consumer_offsets``; it imports
  nothing of the broker around it (``lint-imports`` checks this), and the request handlers of the
  group APIs (:mod:`~compactlog.broker.handlers.groups`) call it.
"""
