"""Kafka's group coordinator for classic and KIP-848 consumer groups, sans-I/O, with its state
in the compacted topic ``__consumer_offsets``.

It opens no socket and needs no event loop: the broker's request handlers
(:mod:`compactlog.broker.handlers.groups`) call :class:`~.service.GroupCoordinator` and copy its
results into the wire format. Nothing here imports the broker around it (its server, connections
or handlers); ``lint-imports`` checks this.

Modules, each importing only those listed before it:

* :mod:`.offsets_topic` - the record layouts of ``__consumer_offsets`` and the group-to-partition
  hash;
* :mod:`.delayed` - delayed responses (:class:`~.delayed.Pending`) and the coordinator's timer;
* :mod:`.config` - the coordinator's settings by their Kafka names;
* :mod:`.api` - the result types of the group APIs, and what a failed write tells the client;
* :mod:`.classic_group` - one classic group's members and state machine;
* :mod:`.runtime` - the coordinator as its managers see it, and the records they write;
* :mod:`.rebalance` - join phases, deadlines and sessions between requests;
* :mod:`.membership` - JoinGroup, SyncGroup, Heartbeat, LeaveGroup;
* :mod:`.offsets` - committed offsets and their expiry;
* :mod:`.assignors` - the server-side assignors of KIP-848 groups, ``uniform`` and ``range``;
* :mod:`.consumer_group` - one KIP-848 consumer group, its members and their reconciliation;
* :mod:`.consumer_records` - the ConsumerGroup* records of ``__consumer_offsets``;
* :mod:`.consumer_groups` - ConsumerGroupHeartbeat and ConsumerGroupDescribe;
* :mod:`.service` - :class:`~.service.GroupCoordinator`, the entry point: loads the groups from
  ``__consumer_offsets`` and answers the group APIs.
"""
