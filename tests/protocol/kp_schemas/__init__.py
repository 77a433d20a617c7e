"""Kafka 4.4's ConsumerGroupHeartbeat and ConsumerGroupDescribe schemas for kafka-python 3.0,
which ships none: its ``ApiMessage`` reads them from this package (``load_json=``). Fields,
types and versions as Kafka 4.4's ``kafka-clients`` jar declares them (its generated
``*Data.SCHEMAS``); the descriptions are left out. ``AuthorizedOperations`` is typed
"bitfield", as kafka-python patches that int32 in its own DescribeGroups schema."""
