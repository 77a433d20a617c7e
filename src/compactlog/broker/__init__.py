"""The asyncio Kafka-protocol broker: connections, limits, request handlers, groups.

Layer rule: ``compactlog.broker`` may import :mod:`compactlog.cleaner`,
:mod:`compactlog.storage`, :mod:`compactlog.protocol`, :mod:`compactlog.records` and
:mod:`compactlog.errors`; nothing below imports it (``lint-imports`` checks this).

Modules so far:

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
