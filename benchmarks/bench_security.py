"""Produce and consume throughput over SASL_SSL beside PLAINTEXT, in the same run.

    python benchmarks/bench_security.py [--records 1000000]

One ``compactlog serve`` process (another process, so that client and broker do not share an
interpreter) listens on a PLAINTEXT and a SASL_SSL listener (TLS from scripts/make-test-ca.py,
SCRAM-SHA-512 user made with the Admin API). A confluent-kafka producer sends ``--records``
records of 100 bytes (12-byte key, 88-byte value; ``linger.ms`` 50, batches of up to 5,000) to
a topic of one partition over each listener, then a consumer reads them back from the
beginning; ``--rounds`` times, alternating which listener goes first, keeping the best round.
Prints one JSON line per figure: MB/s of record bytes (key + value), and for SASL_SSL the ratio
to PLAINTEXT (1.0 = no cost), plus the machine's load average (other jobs share the machine:
read the figures against it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MB = 1_000_000
RECORD_BYTES = 100
VALUE = b"v" * 88


def emit(name: str, value: float, unit: str, **extra: Any) -> None:
    row = {"benchmark": name, "value": round(value, 3), "unit": unit, **extra}
    print(json.dumps(row), flush=True)


def start_broker(work: Path, ca: Path) -> tuple[subprocess.Popen[str], dict[str, int]]:
    compactlog = Path(sys.executable).with_name("compactlog")
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(ca / "broker.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    args = [str(compactlog), "--data-dir", str(work / "data"), "serve"]
    for name, value in settings.items():
        args += ["--config", f"{name}={value}"]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    ports: dict[str, int] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("compactlog serve exited")
        found = re.search(r"listener (\w+) \(\w+\) on [\d.]+:(\d+)", line)
        if found:
            ports[found.group(1)] = int(found.group(2))
        if "listening on" in line:
            return proc, ports
    raise RuntimeError("compactlog serve did not start")


def client_config(name: str, ports: dict[str, int], ca: Path) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{ports[name]}"}
    if name == "SASL_SSL":
        conf.update(
            {
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(ca / "ca.pem"),
                "sasl.mechanisms": "SCRAM-SHA-512",
                "sasl.username": "bench",
                "sasl.password": "bench-secret",
            }
        )
    return conf


def add_user(ports: dict[str, int]) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    for future in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("bench", info, b"bench-secret")]
    ).values():
        future.result(30)


def produce(conf: dict[str, Any], topic: str, records: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({**conf, "linger.ms": 50, "batch.num.messages": 5000,
                         "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    failed: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(err)

    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, b"key-%08d" % i, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(300) == 0 and not failed, failed[:3]
    return time.perf_counter() - started


def consume(conf: dict[str, Any], topic: str, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": f"bench-{topic}", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    started = time.perf_counter()
    while seen < records:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2, help="best of this many (default 2)")
    args = parser.parse_args()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        work = Path(tmp)
        script = ROOT / "scripts" / "make-test-ca.py"
        subprocess.run(
            [sys.executable, str(script), str(work / "ca")], check=True, capture_output=True
        )
        proc, ports = start_broker(work, work / "ca")
        try:
            add_user(ports)
            best: dict[tuple[str, str], float] = {}
            megabytes = args.records * RECORD_BYTES / MB
            for round_ in range(args.rounds):
                # alternate which listener goes first: the machine's load drifts during a run
                order = ("PLAINTEXT", "SASL_SSL") if round_ % 2 == 0 else ("SASL_SSL", "PLAINTEXT")
                for listener in order:
                    conf = client_config(listener, ports, work / "ca")
                    topic = f"bench-{listener.lower()}-{round_}"
                    for kind, run in (("produce", produce), ("consume", consume)):
                        rate = megabytes / run(conf, topic, args.records)
                        best[(kind, listener)] = max(best.get((kind, listener), 0.0), rate)
            for kind in ("produce", "consume"):
                plain = best[(kind, "PLAINTEXT")]
                secure = best[(kind, "SASL_SSL")]
                common = {"records": args.records, "rounds": args.rounds, "of": "best round"}
                emit(f"broker_{kind}_plaintext_100B", plain, "MB/s", **common)
                emit(f"broker_{kind}_sasl_ssl_100B", secure, "MB/s",
                     ratio_to_plaintext=round(secure / plain, 3), **common)  # fmt: skip
        finally:
            proc.terminate()
            proc.communicate(timeout=60)
    emit("load_average", os.getloadavg()[0], "1-min", at_start=round(load_start[0], 2),
         cores=os.cpu_count())  # fmt: skip


if __name__ == "__main__":
    main()
