"""The request handlers, one module per family of APIs, and the table that dispatches to them.

Every handler is ``async def handle(ctx, request, peer) -> Struct | None``: it gets the decoded
request (:class:`compactlog.protocol.Request`), returns the response body to encode in the
request's version (``None``: no response, for Produce with acks=0), or raises
:class:`~compactlog.broker.context.CloseConnection`. Handlers catch the store's errors and answer
them with their ``error_code``, per partition or per resource as Kafka does; anything else that
escapes is a bug, logged by the connection, which then closes.

* :mod:`.metadata` - ApiVersions, Metadata, and the advertised version table;
* :mod:`.produce` - Produce, InitProducerId;
* :mod:`.fetch` - Fetch (with long polling), ListOffsets;
* :mod:`.topics` - CreateTopics, DeleteTopics, DeleteRecords;
* :mod:`.partitions` - CreatePartitions, ElectLeaders, AlterPartitionReassignments,
  DescribeProducers;
* :mod:`.configs` - DescribeConfigs, AlterConfigs, IncrementalAlterConfigs;
* :mod:`.cluster` - DescribeCluster, DescribeTopicPartitions, ListPartitionReassignments,
  DescribeLogDirs (what Kafka's admin tools ask besides Metadata);
* :mod:`.groups` - FindCoordinator and the classic group APIs (OffsetDelete included), over
  :class:`compactlog.broker.coordinator.service.GroupCoordinator`.
"""
