"""Kafka 4.4's command-line tools against ``compactlog serve`` and against Kafka 4.4 itself.

Every step runs the same command against both brokers (tests/kafka/tools.py) and requires the
same exit status, stdout and stderr, after the normalisations named there (ports, log
directories, random topic ids, member ids and group names, log times). Errors are compared the
same way: what Kafka's tools print when the broker refuses is part of what they must print.
Each step also checks a line of Kafka's own output, so that two brokers failing alike cannot
pass.

Known differences are listed where they occur, each with the lines both print.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.tools import Background, BrokerPair, eventually, start_pair

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]


@pytest.fixture
def pair(kafka: Callable[..., Any], compactlog_serve: Callable[..., Any]) -> BrokerPair:
    return start_pair(kafka, compactlog_serve)


# --- kafka-topics --------------------------------------------------------------------------------
def test_kafka_topics(pair: BrokerPair) -> None:
    same = pair.same
    assert same("kafka-topics", "--create", "--topic", "t", "--partitions", "2").stdout == (
        "Created topic t.\n"
    )
    same("kafka-topics", "--create", "--topic", "c", "--partitions", "1",
         "--replication-factor", "1", "--config", "cleanup.policy=compact",
         "--config", "max.message.bytes=2000000")  # fmt: skip
    same("kafka-topics", "--create", "--topic", "d")  # the broker's default partitions
    # Refusals: by the broker (exists, replication factor), by the tool (configs, partitions).
    exists = same("kafka-topics", "--create", "--topic", "t", "--partitions", "2", returncode=1)
    assert "Topic 't' already exists." in exists.stdout
    same("kafka-topics", "--create", "--topic", "t", "--if-not-exists")
    rf = same("kafka-topics", "--create", "--topic", "r", "--replication-factor", "3",
              returncode=1)  # fmt: skip
    assert "The target replication factor of 3 cannot be reached" in rf.stdout
    same("kafka-topics", "--create", "--topic", "x", "--config", "no.such.config=1", returncode=1)
    same("kafka-topics", "--create", "--topic", "x", "--config", "retention.ms=abc", returncode=1)
    same("kafka-topics", "--create", "--topic", "x", "--partitions", "0", returncode=1)
    same("kafka-topics", "--create", "--topic", "bad name", returncode=1)
    same("kafka-topics", "--create", "--topic", "a_b")
    collides = same("kafka-topics", "--create", "--topic", "a.b", returncode=1)
    assert "Topic 'a.b' collides with existing topic: a_b" in collides.stdout
    assert same("kafka-topics", "--list").lines() == ["a_b", "c", "d", "t"]

    described = same("kafka-topics", "--describe", "--topic", "t")
    assert described.lines() == [
        "Topic: t\tTopicId: <topic id>\tPartitionCount: 2\tReplicationFactor: 1\t"
        "Configs: min.insync.replicas=1",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: ",
        "\tTopic: t\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: ",
    ]
    assert "Configs: min.insync.replicas=1,cleanup.policy=compact,max.message.bytes=2000000" in (
        same("kafka-topics", "--describe").stdout
    )
    same("kafka-topics", "--describe", "--topics-with-overrides")
    same("kafka-topics", "--describe", "--topic", "nosuch", returncode=1)
    same("kafka-topics", "--describe", "--topic", "nosuch", "--if-exists")

    assert same("kafka-topics", "--delete", "--topic", "d").stdout == ""
    same("kafka-topics", "--delete", "--topic", "nosuch", returncode=1)
    assert same("kafka-topics", "--list").lines() == ["a_b", "c", "t"]


# --- kafka-configs -------------------------------------------------------------------------------
def test_kafka_configs(pair: BrokerPair) -> None:
    same = pair.same
    same("kafka-topics", "--create", "--topic", "t", "--partitions", "1")
    changed = same("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "t",
                   "--add-config", "retention.ms=86400000,max.message.bytes=2000000,"
                   "cleanup.policy=[compact,delete]")  # fmt: skip
    assert changed.stdout == "Completed updating config for topic t.\n"
    described = same("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", "t")
    assert described.lines() == [
        "Dynamic configs for topic t are:",
        "  cleanup.policy=compact,delete sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  max.message.bytes=2000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "max.message.bytes=2000000, DEFAULT_CONFIG:message.max.bytes=1048588}",
        "  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "retention.ms=86400000}",
    ]
    same("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "t",
         "--delete-config", "max.message.bytes")  # fmt: skip
    same("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "t",
         "--add-config", "cleanup.policy=[delete]")  # fmt: skip
    same("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", "t")
    same("kafka-configs", "--describe", "--entity-type", "topics")  # every topic
    same("kafka-topics", "--describe", "--topic", "t")
    # Refusals by the broker, with Kafka's sentences
    for add, said in (
        ("no.such=1", "Unknown topic config name: no.such"),
        ("retention.ms=abc", "Invalid value abc for configuration retention.ms: Not a number "
         "of type LONG"),
        ("cleanup.policy=sometimes", "Invalid value sometimes for configuration cleanup.policy: "
         "String must be one of: compact, delete"),
        ("min.cleanable.dirty.ratio=2", "Invalid value 2.0 for configuration "
         "min.cleanable.dirty.ratio: Value must be no more than 1"),
    ):  # fmt: skip
        refused = same("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name",
                       "t", "--add-config", add, returncode=1)  # fmt: skip
        assert f"InvalidConfigurationException: {said}" in refused.stderr
    unknown = same("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "nosuch",
                   "--add-config", "retention.ms=1", returncode=1)  # fmt: skip
    assert "UnknownTopicOrPartitionException: The topic 'nosuch' does not exist." in unknown.stderr
    missing = same("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name",
                   "nosuch")  # fmt: skip
    assert missing.stdout == "The topic 'nosuch' doesn't exist and doesn't have dynamic config.\n"
    # The cluster-wide dynamic default Kafka 4.4 starts with, and the broker's.
    cluster = same("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-default")
    assert cluster.lines() == [
        "Default configs for brokers in the cluster are:",
        "  min.insync.replicas=1 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}",
    ]
    same("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "1")


#: ``kafka-configs --describe --all`` of a topic without overrides: the lines only one broker
#: prints. compactlog's topic config catalogue is Kafka 3.9's (storage/config/defs.py): 4.0
#: removed the message-format configs and message.timestamp.difference.max.ms, lowered
#: message.timestamp.after.max.ms' default to one hour, and 4.x added four configs.
CATALOGUE_ONLY_KAFKA = {
    "  errors.deadletterqueue.group.enable=false sensitive=false synonyms={}",
    "  max.decompressed.message.bytes=2147483639 sensitive=false "
    "synonyms={DEFAULT_CONFIG:max.decompressed.message.bytes=2147483639}",
    "  message.timestamp.after.max.ms=3600000 sensitive=false "
    "synonyms={DEFAULT_CONFIG:log.message.timestamp.after.max.ms=3600000}",
    "  remote.copy.lag.bytes=-1 sensitive=false "
    "synonyms={DEFAULT_CONFIG:log.remote.copy.lag.bytes=-1}",
    "  remote.copy.lag.ms=0 sensitive=false synonyms={DEFAULT_CONFIG:log.remote.copy.lag.ms=0}",
}
CATALOGUE_ONLY_COMPACTLOG = {
    "  message.downconversion.enable=true sensitive=false "
    "synonyms={DEFAULT_CONFIG:log.message.downconversion.enable=true}",
    "  message.format.version=3.0-IV1 sensitive=false "
    "synonyms={DEFAULT_CONFIG:log.message.format.version=3.0-IV1}",
    "  message.timestamp.after.max.ms=9223372036854775807 sensitive=false "
    "synonyms={DEFAULT_CONFIG:log.message.timestamp.after.max.ms=9223372036854775807}",
    "  message.timestamp.difference.max.ms=9223372036854775807 sensitive=false "
    "synonyms={DEFAULT_CONFIG:log.message.timestamp.difference.max.ms=9223372036854775807}",
}


def test_kafka_configs_all_differs_only_by_the_catalogue(pair: BrokerPair) -> None:
    pair.same("kafka-topics", "--create", "--topic", "t")
    args = ("--describe", "--all", "--entity-type", "topics", "--entity-name", "t")
    kafka, compactlog = pair.run("kafka-configs", *args)
    assert (kafka.returncode, compactlog.returncode, kafka.stderr, compactlog.stderr) == (
        0, 0, "", ""
    )  # fmt: skip
    assert kafka.lines()[0] == compactlog.lines()[0] == "All configs for topic t are:"
    assert set(kafka.lines()) - set(compactlog.lines()) == CATALOGUE_ONLY_KAFKA
    assert set(compactlog.lines()) - set(kafka.lines()) == CATALOGUE_ONLY_COMPACTLOG
    assert (
        "  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
        "min.insync.replicas=1, DEFAULT_CONFIG:min.insync.replicas=1}" in compactlog.lines()
    )


# --- console producer and consumer, kafka-get-offsets, kafka-delete-records, kafka-log-dirs -----
#: Keyed records: the default partitioner puts each key on the same partition against both
#: brokers (murmur2 of the key, on the client).
RECORDS = "".join(f"k{i}:v{i}\n" for i in range(10))
#: One batch per record (no batching), so that the log sizes do not depend on timing.
PRODUCER = ("--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
            "--producer-property", "batch.size=0")  # fmt: skip
PRINT = ("--formatter-property", "print.key=true", "--formatter-property", "print.partition=true",
         "--formatter-property", "print.offset=true")  # fmt: skip
#: Why console consumers' lines may come in another order: which partition a fetch returns
#: first depends on timing, on either broker.
INTERLEAVED = "the interleaving of partitions depends on fetch timing"


def _delete_records_file(tmp_path: Path, name: str, *entries: tuple[str, int, int]) -> str:
    path = tmp_path / name
    partitions = [{"topic": t, "partition": p, "offset": o} for t, p, o in entries]
    path.write_text(json.dumps({"partitions": partitions, "version": 1}))
    return str(path)


def test_console_clients_offsets_and_delete_records(pair: BrokerPair, tmp_path: Path) -> None:
    same = pair.same
    same("kafka-topics", "--create", "--topic", "p", "--partitions", "2")
    same("kafka-topics", "--create", "--topic", "c", "--config", "cleanup.policy=compact")
    same("kafka-console-producer", "--topic", "p", *PRODUCER, input=RECORDS)
    same("kafka-console-producer", "--topic", "c", *PRODUCER, input="a:1\nb:2\n")
    consumed = same("kafka-console-consumer", "--topic", "p", "--from-beginning",
                    "--max-messages", "10", *PRINT, sort_stdout=INTERLEAVED)  # fmt: skip
    assert len(consumed.lines()) == 10 and "Processed a total of 10 messages" in consumed.stderr
    one = same("kafka-console-consumer", "--topic", "p", "--partition", "0", "--offset", "1",
               "--max-messages", "2", *PRINT)  # fmt: skip
    assert len(one.lines()) == 2 and one.lines()[0].startswith("Partition:0\tOffset:1\t")
    same("kafka-console-consumer", "--topic", "p", "--group", "g", "--from-beginning",
         "--max-messages", "10", *PRINT, sort_stdout=INTERLEAVED)  # fmt: skip
    # A keyless record to a compacted topic: refused (INVALID_RECORD), nothing appended.
    # (exit status 0: the console producer logs a failed send and goes on, against Kafka too)
    keyless = same("kafka-console-producer", "--topic", "c", input="no key\n")
    assert keyless.stderr.splitlines()[-1] == (
        "org.apache.kafka.common.InvalidRecordException: Compacted topic cannot accept message "
        "without key in topic partition c-0"
    )

    ends = same("kafka-get-offsets", "--topic", "p")
    assert sum(int(line.rsplit(":", 1)[1]) for line in ends.lines()) == 10
    same("kafka-get-offsets", "--topic", "p", "--time", "-2")
    same("kafka-get-offsets", "--topic", "c", "--time", "-1")
    same("kafka-get-offsets", "--topic", "c", "--time", "-3")  # max timestamp: first record
    same("kafka-get-offsets", "--topic", "p", "--time", "0")
    same("kafka-get-offsets", "--topic", "p", "--time", str(2**62))  # none that late
    same("kafka-get-offsets", "--topic", "nosuch", returncode=1)
    # Every topic but the internal one: where a console consumer without --group keeps its
    # group depends on the group's random name (a hash of it picks the partition).
    same("kafka-get-offsets", "--exclude-internal-topics")
    # Group "g" lives in partition 3 of __consumer_offsets (Java's "g".hashCode() % 50) on both,
    # with as many records: group metadata and offset commits, written the same way.
    assert (
        same("kafka-get-offsets", "--topic", "__consumer_offsets", "--partitions", "3").lines()
        != []
    )

    ok = _delete_records_file(tmp_path, "ok.json", ("p", 0, 2), ("p", 1, -1))
    # The tool prints the admin client's result map, a Map.ofEntries: its iteration order is
    # salted per JVM (java.util.ImmutableCollections), so the two runs may list p-0 and p-1 in
    # either order.
    deleted = same(
        "kafka-delete-records", "--offset-json-file", ok, sort_stdout="per-JVM map order"
    )
    assert "partition: p-0\tlow_watermark: 2" in deleted.stdout
    beyond = same("kafka-delete-records", "--offset-json-file",
                  _delete_records_file(tmp_path, "beyond.json", ("p", 0, 1000)))  # fmt: skip
    assert "OffsetOutOfRangeException" in beyond.stdout
    compact = same("kafka-delete-records", "--offset-json-file",
                   _delete_records_file(tmp_path, "compact.json", ("c", 0, 1)))  # fmt: skip
    assert "PolicyViolationException" in compact.stdout
    # (A topic that does not exist is not tried: the admin client retries its metadata until
    # the tool's timeout, a minute, against either broker, then prints the attempts it made.)
    starts = same("kafka-get-offsets", "--topic", "p", "--time", "-2")
    assert "p:0:2" in starts.lines()
    same("kafka-console-consumer", "--topic", "p", "--partition", "0", "--from-beginning",
         "--max-messages", "1", *PRINT)  # fmt: skip

    kafka, compactlog = pair.run("kafka-log-dirs", "--describe", "--topic-list", "p,c")
    assert (kafka.returncode, kafka.stderr) == (compactlog.returncode, compactlog.stderr) == (0, "")
    assert (
        kafka.lines()[:2]
        == compactlog.lines()[:2]
        == [
            "Querying brokers for log directories information",
            "Received log directory information from brokers 1",
        ]
    )

    # The partitions come in the order of a hash map on the broker: compared as sets.
    def log_dirs(outcome: Any) -> Any:
        (broker,) = json.loads(outcome.lines()[2])["brokers"]
        (log_dir,) = broker["logDirs"]
        return (
            broker["broker"],
            log_dir["logDir"],
            sorted(
                (p["partition"], p["size"], p["offsetLag"], p["isFuture"])
                for p in log_dir["partitions"]
            ),
        )

    assert log_dirs(kafka) == log_dirs(compactlog)
    assert log_dirs(kafka)[1] == "<log dir>"


# --- kafka-consumer-groups -----------------------------------------------------------------------
def _stable(pair: BrokerPair, group: str) -> bool:
    kafka, compactlog = pair.run("kafka-consumer-groups", "--describe", "--group", group, "--state")
    return all(" Stable " in outcome.stdout for outcome in (kafka, compactlog))


def test_kafka_consumer_groups(pair: BrokerPair) -> None:
    same = pair.same
    same("kafka-topics", "--create", "--topic", "t", "--partitions", "2")
    same("kafka-console-producer", "--topic", "t", *PRODUCER, input=RECORDS)
    same("kafka-console-consumer", "--topic", "t", "--group", "g1", "--from-beginning",
         "--max-messages", "10", *PRINT, sort_stdout=INTERLEAVED)  # fmt: skip
    assert same("kafka-consumer-groups", "--list").lines() == ["g1"]
    described = same("kafka-consumer-groups", "--describe", "--group", "g1")
    assert described.lines()[2].split() == ["g1", "t", "0", "6", "6", "0", "-", "-", "-"]
    assert "Consumer group 'g1' has no active members." in described.stderr
    same("kafka-consumer-groups", "--describe", "--group", "g1", "--members")
    same("kafka-consumer-groups", "--describe", "--group", "g1", "--members", "--verbose")
    same("kafka-consumer-groups", "--describe", "--group", "g1", "--state")
    same("kafka-consumer-groups", "--describe", "--group", "g1", "--offsets")
    same("kafka-consumer-groups", "--describe", "--all-groups")
    missing = same("kafka-consumer-groups", "--describe", "--group", "nosuch")
    assert "GroupIdNotFoundException: Group nosuch not found." in missing.stdout

    # Resetting offsets: a dry run changes nothing, --execute commits.
    for how in (("--to-earliest",), ("--to-offset", "3"), ("--shift-by", "-1"), ("--to-latest",),
                ("--to-datetime", "2000-01-01T00:00:00.000")):  # fmt: skip
        same("kafka-consumer-groups", "--reset-offsets", "--group", "g1", "--topic", "t", *how,
             "--dry-run")  # fmt: skip
    same("kafka-consumer-groups", "--reset-offsets", "--group", "g1", "--topic", "t",
         "--to-earliest")  # without --dry-run or --execute: a warning, and a dry run  # fmt: skip
    same("kafka-consumer-groups", "--describe", "--group", "g1")
    same("kafka-consumer-groups", "--reset-offsets", "--group", "g1", "--topic", "t:1",
         "--to-offset", "2", "--execute")  # fmt: skip
    same("kafka-consumer-groups", "--reset-offsets", "--group", "g1", "--all-topics",
         "--shift-by", "-4", "--execute")  # fmt: skip
    after = same("kafka-consumer-groups", "--describe", "--group", "g1", "--offsets")
    assert [line.split()[:5] for line in after.lines()[2:]] == [
        ["g1", "t", "0", "2", "6"],
        ["g1", "t", "1", "0", "4"],
    ]
    # A new group may be given offsets before it ever consumed.
    same("kafka-consumer-groups", "--reset-offsets", "--group", "fresh", "--topic", "t",
         "--to-offset", "1", "--execute")  # fmt: skip
    same("kafka-consumer-groups", "--describe", "--group", "fresh", "--offsets")

    # An active group: described with its member; its offsets may not be reset.
    running = Background(pair, "kafka-console-consumer", "--topic", "t", "--group", "g2",
                         "--from-beginning")  # fmt: skip
    try:
        eventually(lambda: _stable(pair, "g2"), "stable group g2 on both brokers")
        active = same("kafka-consumer-groups", "--describe", "--group", "g2")
        assert [line.split()[6:] for line in active.lines()[2:]] == [
            ["console-consumer-<member", "uuid>", "/127.0.0.1", "console-consumer"]
        ] * 2
        same("kafka-consumer-groups", "--describe", "--group", "g2", "--members", "--verbose")
        same("kafka-consumer-groups", "--describe", "--group", "g2", "--state")
        same("kafka-consumer-groups", "--list", "--state")
        same("kafka-consumer-groups", "--list", "--state", "stable")
        # (exit status 0: the tool prints the error and an empty table, against Kafka too)
        refused = same("kafka-consumer-groups", "--reset-offsets", "--group", "g2", "--topic",
                       "t", "--to-earliest", "--execute")  # fmt: skip
        assert refused.lines()[:2] == [
            "",
            "Error: Assignments can only be reset if the group 'g2' is inactive, but the current "
            "state is Stable.",
        ]
        busy = same("kafka-consumer-groups", "--delete", "--group", "g2")  # exit 0 on Kafka too
        assert "GroupNotEmptyException" in busy.stdout
    finally:
        stopped = running.stop()
    # Both consumers read all 10 records and left the group when stopped (their shutdown hook).
    assert [sorted(out.splitlines()) for _, out, _ in stopped] == [
        sorted(f"v{i}" for i in range(10))
    ] * 2
    left = same("kafka-consumer-groups", "--describe", "--group", "g2", "--state")
    assert left.lines()[2].split()[3:] == ["-", "Empty", "0"]
    # Deleting groups (DeleteGroups): an empty one, two at once, one that does not exist.
    deleted = same("kafka-consumer-groups", "--delete", "--group", "g2")
    assert deleted.lines() == ["Deletion of requested consumer groups ('g2') was successful."]
    same("kafka-consumer-groups", "--delete", "--group", "g1", "--group", "fresh")
    missing = same("kafka-consumer-groups", "--delete", "--group", "nosuch")
    assert "GroupIdNotFoundException" in missing.stdout
    assert same("kafka-consumer-groups", "--list").lines() == []


# --- kafka-topics --alter, kafka-consumer-groups --delete-offsets (CreatePartitions, OffsetDelete)
def test_kafka_topics_alter_partitions(pair: BrokerPair) -> None:
    same = pair.same
    same("kafka-topics", "--create", "--topic", "g", "--partitions", "1")
    assert same("kafka-topics", "--alter", "--topic", "g", "--partitions", "3").stdout == ""
    described = same("kafka-topics", "--describe", "--topic", "g")
    assert "PartitionCount: 3" in described.lines()[0]
    shrink = same("kafka-topics", "--alter", "--topic", "g", "--partitions", "2", returncode=1)
    assert "The topic g currently has 3 partition(s); 2 would not be an increase." in shrink.stdout
    keep = same("kafka-topics", "--alter", "--topic", "g", "--partitions", "3", returncode=1)
    assert "Topic already has 3 partition(s)." in keep.stdout
    same("kafka-topics", "--alter", "--topic", "nosuch", "--partitions", "3", returncode=1)
    # Explicit assignments (the new partition's replicas are the last entry): only this node.
    wrong = same("kafka-topics", "--alter", "--topic", "g", "--partitions", "4",
                 "--replica-assignment", "1,1,1,2", returncode=1)  # fmt: skip
    assert "includes broker 2, but no such broker is registered." in wrong.stdout
    same("kafka-topics", "--alter", "--topic", "g", "--partitions", "4",
         "--replica-assignment", "1,1,1,1")  # fmt: skip
    assert "PartitionCount: 4" in same("kafka-topics", "--describe", "--topic", "g").lines()[0]


def test_kafka_consumer_groups_delete_offsets(pair: BrokerPair) -> None:
    same = pair.same
    same("kafka-topics", "--create", "--topic", "t", "--partitions", "2")
    same("kafka-console-producer", "--topic", "t", *PRODUCER, input=RECORDS)
    same("kafka-consumer-groups", "--reset-offsets", "--group", "g", "--topic", "t",
         "--to-offset", "1", "--execute")  # fmt: skip
    deleted = same("kafka-consumer-groups", "--delete-offsets", "--group", "g", "--topic", "t:0")
    assert deleted.lines()[0] == "Request succeeded for deleting offsets from group g."
    assert deleted.lines()[3].split() == ["t", "0", "Successful"]
    left = same("kafka-consumer-groups", "--describe", "--group", "g", "--offsets")
    assert [line.split()[:4] for line in left.lines()[2:]] == [["g", "t", "1", "1"]]
    same("kafka-consumer-groups", "--delete-offsets", "--group", "g", "--topic", "t")
    unknown = same("kafka-consumer-groups", "--delete-offsets", "--group", "g", "--topic", "nosuch")
    assert "UnknownTopicOrPartitionException" in unknown.stdout
    missing = same("kafka-consumer-groups", "--delete-offsets", "--group", "nosuch", "--topic", "t")
    assert "Error: The group id does not exist." in missing.stdout
    # An active group: the topic its member consumes is refused (exit 0 on Kafka too).
    running = Background(pair, "kafka-console-consumer", "--topic", "t", "--group", "g2",
                         "--from-beginning")  # fmt: skip
    try:
        eventually(lambda: _stable(pair, "g2"), "stable group g2 on both brokers")
        busy = same("kafka-consumer-groups", "--delete-offsets", "--group", "g2", "--topic", "t")
        assert busy.stdout.count("GroupSubscribedToTopicException") == 2
    finally:
        running.stop()


# --- kafka-leader-election, kafka-reassign-partitions, kafka-transactions describe-producers -----
def test_elections_reassignments_and_producers(pair: BrokerPair, tmp_path: Path) -> None:
    same = pair.same
    same("kafka-topics", "--create", "--topic", "t", "--partitions", "2")
    same("kafka-console-producer", "--topic", "t", *PRODUCER, input=RECORDS)
    one = same("kafka-leader-election", "--election-type", "preferred", "--topic", "t",
               "--partition", "0")  # fmt: skip
    assert one.lines() == ["Valid replica already elected for partitions t-0"]
    # Every partition: those that need no election are left out, so nothing is printed.
    for election in ("unclean", "preferred"):
        everything = same("kafka-leader-election", "--election-type", election,
                          "--all-topic-partitions")  # fmt: skip
        assert everything.stdout == ""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1]}]}))  # fmt: skip
    # Reassigning to where the partition is: accepted, completed at once.
    started = same("kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--execute")
    assert "Successfully started partition reassignment for t-0" in started.stdout
    verified = same("kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--verify")
    assert "Reassignment of partition t-0 is completed." in verified.stdout
    assert same("kafka-reassign-partitions", "--list").lines() == [
        "No partition reassignments found."
    ]
    cancelled = same("kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--cancel")
    assert "None of the specified partition reassignments are active." in cancelled.stdout
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 1, "replicas": [2]}]}))  # fmt: skip
    refused = same("kafka-reassign-partitions", "--reassignment-json-file", str(moved),
                   "--execute", returncode=1)  # fmt: skip
    assert "Unknown broker id 2" in refused.stdout
    # The last timestamps differ between the two brokers; the rest is the same.
    kafka, compactlog = pair.run("kafka-transactions", "describe-producers", "--topic", "t",
                                 "--partition", "0")  # fmt: skip

    def columns(outcome: Any) -> list[list[str]]:
        header, *rows = outcome.stdout.splitlines()
        return [header.split()] + [row.split()[:4] + row.split()[5:] for row in rows]

    assert (kafka.returncode, columns(kafka)) == (compactlog.returncode, columns(compactlog))
    assert len(columns(kafka)) == 2  # the console producer, one row
