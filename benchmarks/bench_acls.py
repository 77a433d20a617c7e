"""Authorization benchmarks: what a decision costs, and produce throughput with and without the
authorizer in the same run.

Prints one JSON line per figure.

    python benchmarks/bench_acls.py [--records 200000]

Figures:

* ``acl_decision_us`` at 10, 1,000 and 10,000 ACLs (half LITERAL, half PREFIXED, 50
  principals): microseconds per :meth:`StandardAuthorizer.authorize` of a request no ACL allows
  (the longest path: every applying binding is looked at).
* ``produce_100B_records_per_s`` with ``authorizer: false`` and ``true`` (an ACL allowing WRITE on
  the topic to ``User:*``): confluent-kafka producing ``--records`` records of 100 bytes to an
  in-process broker over loopback; ``ratio`` is the authorized run against the other.

Every line carries its unit and, where one applies, the limit it is measured against in the
same run (for a decision, a call of a function that does nothing; for the authorized produce,
the same produce without the authorizer).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from compactlog.broker.authorizer import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAuthorizer,
)

CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def decisions() -> None:
    for n in (10, 1_000, 10_000):
        acls = [
            AclBinding(
                ResourceType.TOPIC,
                f"topic-{i}",
                PatternType.LITERAL if i % 2 else PatternType.PREFIXED,
                f"User:u{i % 50}",
                "*",
                AclOperation.READ,
                AclPermissionType.ALLOW,
            )
            for i in range(n)
        ]
        authorizer = StandardAuthorizer(acls)
        rounds = 20_000
        started = time.perf_counter()
        for _ in range(rounds):
            authorizer.authorize(
                "User:u3", "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, "topic-3"
            )
        per = (time.perf_counter() - started) / rounds * 1e6
        floor = _call_floor_us(rounds)
        print(json.dumps({
            "figure": "acl_decision_us", "acls": n, "value": round(per, 2), "unit": "us",
            "limit": {"what": "a Python call with the same arguments that does nothing, same run",
                      "value": round(floor, 3), "unit": "us"},
        }))  # fmt: skip


def _call_floor_us(rounds: int) -> float:
    """The interpreter's floor for one decision: a call with the same five arguments."""

    def nothing(*_: object) -> None:
        return None

    started = time.perf_counter()
    for _ in range(rounds):
        nothing("User:u3", "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, "topic-3")
    return (time.perf_counter() - started) / rounds * 1e6


def produce(records: int, authorizer: bool) -> float:
    from confluent_kafka import Producer

    from compactlog.broker.server import BrokerThread

    data = Path(tempfile.mkdtemp(prefix="bench-acls-")) / "data"
    config: dict[str, object] = {}
    if authorizer:
        config = {"authorizer.class.name": CLASS, "super.users": "User:ANONYMOUS"}
    broker = BrokerThread(data, config=config).start()
    try:
        if authorizer:
            from confluent_kafka.admin import AclBinding as Binding
            from confluent_kafka.admin import AclOperation as Operation
            from confluent_kafka.admin import AclPermissionType as Permission
            from confluent_kafka.admin import AdminClient, ResourcePatternType
            from confluent_kafka.admin import ResourceType as Resource

            write = Binding(
                Resource.TOPIC, "bench", ResourcePatternType.LITERAL, "User:*", "*",
                Operation.WRITE, Permission.ALLOW,
            )  # fmt: skip
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_acls([write])[write].result(30)
            from confluent_kafka.admin import NewTopic

            admin.create_topics([NewTopic("bench", 1)])["bench"].result(30)
            del admin
            # Back without super users: every request is decided by the ACLs.
            broker.stop()
            broker = BrokerThread(data, config={"authorizer.class.name": CLASS}).start()
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 50,
             "batch.num.messages": 5000, "acks": 1}
        )  # fmt: skip
        value = os.urandom(44).hex().encode()  # 88 bytes
        started = time.perf_counter()
        for i in range(records):
            while True:
                try:
                    producer.produce("bench", value, key=b"key-%08d" % i)
                    break
                except BufferError:
                    producer.poll(0.01)
        assert producer.flush(120) == 0
        return records / (time.perf_counter() - started)
    finally:
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    decisions()
    off = produce(args.records, authorizer=False)
    on = produce(args.records, authorizer=True)
    limit = {"what": "the same produce to the same broker without the authorizer, same run",
             "value": round(off), "unit": "records/s"}  # fmt: skip
    for enabled, rate in ((False, off), (True, on)):
        print(json.dumps({"figure": "produce_100B_records_per_s", "authorizer": enabled,
                          "value": round(rate), "unit": "records/s",
                          **({"limit": limit} if enabled else {})}))  # fmt: skip
    print(json.dumps({"figure": "produce_100B_ratio_authorized", "value": round(on / off, 3),
                      "unit": "ratio", "limit": limit}))  # fmt: skip
    print(json.dumps({"figure": "load_average_at_end", "value": os.getloadavg(),
                      "unit": "runnable processes", "cores": os.cpu_count()}))  # fmt: skip


if __name__ == "__main__":
    main()
