"""Broker benchmarks: confluent-kafka over loopback against the embedded store, in the same run.

Prints one JSON line per figure: the figure, its unit, and the limit measured in the same run on
the same disk, so that a figure is read against what this machine does rather than against a
number from another day.

    python benchmarks/bench_broker.py [--records 1000000] [--dir bench-data]

Workload: ``--records`` records of 100 bytes (a 12-byte key ``key-%08d`` and an 88-byte value),
one partition, no compression, batches of up to 5,000 records.

Figures:

* ``embedded_append_100B``: ``Store.append`` of the records in batches of 5,000 (the limit of
  the produce figures); ``embedded_read_100B``: ``Store.read`` of them (the limit of consume).
* ``broker_produce_confluent_acks1_100B`` and ``..._acks_all_100B``: a confluent-kafka producer
  (``linger.ms`` 50, ``batch.num.messages`` 5,000, so batches are as large as the embedded
  ones; ``produce_batch``, error-only delivery reports) sending the same records to
  ``compactlog serve`` in another process over loopback, from the first produce to the end of
  ``flush()``; ``ratio`` is against the embedded append (target >= 0.4).
* ``broker_consume_confluent_100B``: a confluent-kafka consumer assigned the partition, reading
  all of it from the beginning; ``ratio`` is against the embedded read.
* Each broker figure carries ``broker_cpu_s`` and ``client_cpu_s``, the CPU time the
  ``compactlog serve`` process and this one spent during it: which side the time went to.
* ``machine`` and ``load_average_at_end``: cores, memory, versions, and the load average at the
  start and the end (other jobs share the machine: read the figures against it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from compactlog.storage.store import Store

MB = 1_000_000
KEY_BYTES = 12
VALUE = b"v" * 88
BATCH = 5_000  # about 550 kB: under message.max.bytes (1 MiB) with room to spare


def emit(name: str, value: float, unit: str, **extra: Any) -> None:
    print(
        json.dumps({"benchmark": name, "value": round(value, 3), "unit": unit, **extra}), flush=True
    )


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def batches(records: int) -> Iterator[list[tuple[bytes, bytes]]]:
    for start in range(0, records, BATCH):
        yield [(b"key-%08d" % i, VALUE) for i in range(start, min(start + BATCH, records))]


# --- the limit: the embedded store ---------------------------------------------------------------
def bench_embedded(data_dir: str, records: int) -> tuple[float, float, int]:
    """(append records/s, read records/s, log bytes) of the store alone."""
    shutil.rmtree(data_dir, ignore_errors=True)
    with Store.open(data_dir) as store:
        store.create_topic("bench", 1)
        started = time.perf_counter()
        for batch in batches(records):
            store.append("bench", 0, batch)
        append_rate = records / (time.perf_counter() - started)
        size = store.log("bench", 0).size()
        best = 0.0
        for _ in range(2):
            started = time.perf_counter()
            count = sum(1 for _ in store.read("bench", 0))
            best = max(best, count / (time.perf_counter() - started))
    shutil.rmtree(data_dir, ignore_errors=True)
    return append_rate, best, size


# --- the broker in its own process ---------------------------------------------------------------
class Served:
    """``compactlog serve`` on a free loopback port, in a process of its own (so that the client
    and the broker do not share an interpreter lock)."""

    def __init__(self, data_dir: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        exe = os.path.join(os.path.dirname(sys.executable), "compactlog")
        self.proc = subprocess.Popen(
            [exe, "--data-dir", data_dir, "serve", "--listen", f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"compactlog serve exited with {self.proc.returncode}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("compactlog serve is not listening after 60 s")
            time.sleep(0.05)
        self.bootstrap = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)


def bench_produce(
    bootstrap: str,
    topic: str,
    records: int,
    acks: str,
    make_batches: Callable[[int], Iterator[list[tuple[bytes, bytes]]]] = batches,
) -> float:
    """Records/s from the first produce to the end of flush(); every record acknowledged.

    Records go in with ``produce_batch`` (5,000 a call) and librdkafka reports failed deliveries
    only, the way a Python application sending at volume uses confluent-kafka: one ``produce()``
    call and one delivery callback per record cost the client about 3 us a record, which then
    is the figure (measured: 0.35-0.38 M records/s, client CPU 2.9-3.1 s against the broker's
    0.4 s for a million records; with batches and error-only reports 0.62-0.64 M, client CPU 1.8
    s, broker 0.3 s).
    """
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 50,
            "batch.num.messages": BATCH,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": max(records, 100_000),
            "queue.buffering.max.kbytes": 2_097_151,
            "compression.type": "none",
            "delivery.report.only.error": True,
        }
    )
    producer.list_topics(topic, timeout=30)  # auto-creates the topic, outside the clock
    failed = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    started = time.perf_counter()
    for batch in make_batches(records):
        messages = [{"key": key, "value": value} for key, value in batch]
        queued = producer.produce_batch(topic, messages, partition=0, on_delivery=delivered)
        if queued != len(messages):  # the queue holds every record: this is not back-pressure
            raise RuntimeError(f"only {queued} of {len(messages)} records queued")
        producer.poll(0)
    left = producer.flush(600)
    elapsed = time.perf_counter() - started
    if left or failed:
        raise RuntimeError(f"{left} records not delivered, {failed} failed")
    return records / elapsed


def bench_consume(bootstrap: str, topic: str, records: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            # librdkafka stops fetching for fetch.queue.backoff.ms (default 1,000 ms) whenever
            # its local queue (64 MiB) is full, which a Python loop at about 1.5 us a message
            # keeps it: with the default, a million records took 3.4-3.6 s, a third of it idle
            # on both sides; with 10 ms, 1.7 s, the client's CPU busy 91 % of it.
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    count = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 600
    while count < records:
        for msg in consumer.consume(num_messages=BATCH, timeout=1.0):
            if msg.error() is None:
                count += 1
        if time.monotonic() > deadline:
            raise RuntimeError(f"consumed {count} of {records} in 600 s")
    elapsed = time.perf_counter() - started
    consumer.close()
    return records / elapsed


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(pid: int, job: Callable[[], float]) -> tuple[float, dict[str, float]]:
    """``job()``'s result, and the CPU seconds the broker (``pid``) and this process (the
    client, librdkafka's threads included) spent meanwhile: where a figure's time went."""
    broker, client = cpu_seconds(pid), cpu_seconds(os.getpid())
    result = job()
    return result, {
        "broker_cpu_s": round(cpu_seconds(pid) - broker, 2),
        "client_cpu_s": round(cpu_seconds(os.getpid()) - client, 2),
    }


def _figure(name: str, rate: float, limit: float, what: str, **extra: Any) -> None:
    emit(
        name,
        rate,
        "records/s",
        mb_s=round(rate * (KEY_BYTES + len(VALUE)) / MB, 1),
        limit={"what": what, "value": round(limit), "unit": "records/s"},
        ratio=round(rate / limit, 3),
        **extra,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="bench-data")
    parser.add_argument("--records", type=int, default=1_000_000, help="records of 100 bytes")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()
    root = os.path.abspath(os.path.join(args.dir, "broker"))
    os.makedirs(root, exist_ok=True)
    import confluent_kafka

    emit(
        "machine",
        os.cpu_count() or 0,
        "cores",
        python=sys.version.split()[0],
        confluent_kafka=confluent_kafka.__version__,
        librdkafka=confluent_kafka.libversion()[0],
        load_average=[round(x, 2) for x in os.getloadavg()],
        memory_gib=round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    )

    say(f"embedded store: {args.records:,} records")
    append_rate, read_rate, log_bytes = bench_embedded(os.path.join(root, "embedded"), args.records)
    emit(
        "embedded_append_100B",
        append_rate,
        "records/s",
        records=args.records,
        batch=BATCH,
        log_bytes=log_bytes,
    )
    emit("embedded_read_100B", read_rate, "records/s", records=args.records)

    data_dir = os.path.join(root, "served")
    shutil.rmtree(data_dir, ignore_errors=True)
    served = Served(data_dir)
    try:
        for acks, topic in (("1", "bench-acks1"), ("all", "bench-acks-all")):
            say(f"produce with acks={acks}")
            rate, cpu = timed(
                served.proc.pid,
                lambda: bench_produce(served.bootstrap, topic, args.records, acks),  # noqa: B023
            )
            _figure(
                f"broker_produce_confluent_acks{'1' if acks == '1' else '_all'}_100B",
                rate,
                append_rate,
                "Store.append of the same records in batches of 5,000, same run",
                records=args.records,
                acks=acks,
                target_ratio=0.4,
                **cpu,
            )
        say("consume")
        rate, cpu = timed(
            served.proc.pid, lambda: bench_consume(served.bootstrap, "bench-acks1", args.records)
        )
        _figure(
            "broker_consume_confluent_100B",
            rate,
            read_rate,
            "Store.read of the same records, same run",
            records=args.records,
            **cpu,
        )
    finally:
        served.stop()
    emit("load_average_at_end", os.getloadavg()[0], "load", load_average=list(os.getloadavg()))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
