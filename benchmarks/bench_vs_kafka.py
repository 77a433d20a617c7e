"""compactlog against Apache Kafka 4.4 itself, in the same run, on the same disk.

Prints one JSON line per figure (the figure, its unit, Kafka's figure beside it and the ratio,
and the machine's limit measured in the same run):

    python benchmarks/bench_vs_kafka.py [--dir bench-data] [--gib 1] [--small-records 10000000]

Two logs, each one partition of a compacted topic, every key written 5 times (version v of key
k is record ``v * keys + k``), no compression, segments of 128 MiB:

* ``1KiB``: ``--gib`` GiB of 1 KiB records (a 12-byte key, a 1,012-byte value);
* ``100B``: ``--small-records`` records of 100 bytes (a 12-byte key, an 88-byte value).

For each log:

1. **Append and read through a broker.** The same confluent-kafka producer (batches of 5,000,
   ``acks=1``, error-only delivery reports: see benchmarks/bench_broker.py) sends the records to
   a real Kafka 4.4 broker and to ``compactlog serve``, each alone on the machine with its
   cleaner off; then a confluent-kafka consumer reads them all back from each. Figures in
   records/s and MB/s, with each broker's CPU seconds.
2. **The cleaner.** Kafka's files of that log are copied into a compactlog data directory, so
   both cleaners start from the same bytes. Kafka's cleaner (one thread, its default 128 MiB
   dedupe buffer and MD5 offset map) cleans it in the broker: its own summary line gives the
   MB/s ("N MB of log processed in S seconds"). compactlog's cleaner (``LogManager.clean``, the
   Kafka offset map, the same buffer) cleans the copy; its figure is computed the same way
   (bytes read over the round's time). Both run warm: Kafka's JVM cleans a 64 MiB log of the
   same shape first (the measured topic waits with ``min.cleanable.dirty.ratio=1`` until
   then), compactlog cleans a copy of that warm-up log first. The checkpoints and the records
   kept are checked equal.

``machine`` gives cores, memory, versions, the load average; ``dd_write``/``dd_read`` the disk.
Nothing here is a test: it prints figures, not verdicts.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.kafka.harness

from bench_broker import Served, bench_consume, bench_produce, cpu_seconds, emit, say
from bench_storage import dd_read_mb_s, dd_write_mb_s
from compactlog.log_manager import LogManager
from compactlog.storage.store import Store
from tests.kafka.harness import (
    KAFKA_VERSION,
    KafkaBroker,
    read_offset_checkpoint,
    unavailable,
    write_offset_checkpoint,
)

MIB = 1 << 20
MB = 1_000_000
VERSIONS = 5
KEY_BYTES = 12
SEGMENT_BYTES = 128 * MIB
WARM_UP_BYTES = 64 * MIB


def topic_config(log_bytes: int) -> dict[str, str]:
    """128 MiB segments (at least 8 of them for a smaller log: the active one is not cleaned)."""
    segment = max(MIB, min(SEGMENT_BYTES, log_bytes // 8))
    return {"cleanup.policy": "compact", "segment.bytes": str(segment)}


_SUMMARY = re.compile(r"([\d,.]+) MB of log processed in [\d,.]+ seconds \(([\d,.]+) MB/sec\)")


def workload(record_bytes: int) -> Callable[[int], Iterator[list[tuple[bytes, bytes]]]]:
    """Batches of 5,000 records; version v of key k is record ``v * keys + k``."""
    value = b"v" * (record_bytes - KEY_BYTES)

    def batches(records: int) -> Iterator[list[tuple[bytes, bytes]]]:
        keys = max(records // VERSIONS, 1)
        for start in range(0, records, 5000):
            yield [
                (b"key-%08d" % (i % keys), value) for i in range(start, min(start + 5000, records))
            ]

    return batches


def compactlog_copy(kafka_data: Path, topics: dict[str, dict[str, str]], ours: Path) -> None:
    """A compactlog data directory holding Kafka's files of ``topics`` (partition 0, with the
    topic configs given)."""
    with Store.open(ours) as store:
        for topic, config in topics.items():
            store.create_topic(topic, 1, config)
    kinds = (".log", ".index", ".timeindex", ".snapshot")
    for topic in topics:
        for path in (ours / f"{topic}-0").iterdir():
            if path.suffix in kinds:
                path.unlink()
        for path in (kafka_data / f"{topic}-0").iterdir():
            if path.suffix in kinds:
                shutil.copyfile(path, ours / f"{topic}-0" / path.name)
    mine = {(t, 0) for t in topics}
    for name in ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint"):
        entries = read_offset_checkpoint(kafka_data / name)
        write_offset_checkpoint(ours / name, {tp: o for tp, o in entries.items() if tp in mine})


def compactlog_clean(data_dir: Path, topic: str) -> dict[str, Any]:
    """Clean ``topic`` with compactlog's cleaner (its min.cleanable.dirty.ratio set to 0.5
    first); Kafka's figure: bytes read over the rounds' time."""
    with LogManager.open(data_dir) as logs:
        store = logs.store
        store.alter_config(topic, {"min.cleanable.dirty.ratio": "0.5"})
        started_cpu = time.process_time()
        rounds = []
        while True:
            result = logs.clean()
            if result.cleaned is None:
                break
            assert result.cleaned == (topic, 0), result
            rounds.append(result.stats)
        cpu = time.process_time() - started_cpu
        checkpoint = store.cleaner_offset_checkpoint.read()
    read = sum(s.bytes_read for s in rounds)
    seconds = sum((s.end_ms - s.start_ms) / 1000 for s in rounds)
    return {
        "mb_s": read / MIB / seconds,
        "seconds": seconds,
        "bytes_read": read,
        "rounds": len(rounds),
        "cpu_s": round(cpu, 2),
        "checkpoint": checkpoint.get((topic, 0)),
    }


def kafka_clean(broker: KafkaBroker, topic: str, warm_up: str) -> dict[str, Any]:
    """Start ``broker`` with its cleaner on: it cleans ``warm_up``, then ``topic`` (held back by
    its dirty ratio until the warm-up is done); Kafka's own summary gives the figure."""
    broker.config["log.cleaner.enable"] = "true"
    broker.start()
    broker.wait_for(
        lambda: any(s.log == f"{warm_up}-0" for s in broker.cleaner_summaries()),
        "the warm-up cleaning",
        timeout=600,
    )
    cpu_before = cpu_seconds(broker.process.pid)  # type: ignore[union-attr]
    done = broker.tool(
        "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
        "--add-config", "min.cleanable.dirty.ratio=0.5",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    def cleaned() -> bool:
        return broker.cleaner_checkpoint().get((topic, 0), 0) > 0

    broker.wait_for(cleaned, f"the cleaning of {topic}", timeout=3600)
    time.sleep(1)
    cpu = cpu_seconds(broker.process.pid) - cpu_before  # type: ignore[union-attr]
    summaries = [s for s in broker.cleaner_summaries() if s.log == f"{topic}-0"]
    read_mb = seconds = 0.0
    for summary in summaries:  # the seconds it prints are rounded to 0.1: use its MB/sec
        match = _SUMMARY.search(summary.text)
        assert match, summary.text
        mb, rate = (float(g.replace(",", "")) for g in match.groups())
        read_mb += mb
        seconds += mb / rate
    checkpoint = broker.cleaner_checkpoint().get((topic, 0))
    broker.stop()
    return {
        "mb_s": read_mb / seconds,
        "seconds": seconds,
        "rounds": len(summaries),
        "cpu_s": round(cpu, 2),
        "checkpoint": checkpoint,
        "summary": summaries[-1].text.strip().splitlines(),
    }


def bench_log(root: Path, name: str, record_bytes: int, records: int) -> None:
    batches = workload(record_bytes)
    warm_records = WARM_UP_BYTES // record_bytes
    topic, warm_up = f"bench-{name}", f"warm-{name}"
    mb = records * record_bytes / MB
    configs = {
        topic: {**topic_config(records * record_bytes), "min.cleanable.dirty.ratio": "1"},
        warm_up: {**topic_config(WARM_UP_BYTES), "min.cleanable.dirty.ratio": "0.5"},
    }

    say(f"{name}: {records:,} records of {record_bytes} bytes into Kafka {KAFKA_VERSION}")
    kafka = KafkaBroker(root / f"kafka-{name}", config={"log.cleaner.enable": "false"}, heap="2g")
    kafka.start()
    try:
        for t, config in configs.items():
            done = kafka.tool(
                "kafka-topics", "--create", "--topic", t, "--partitions", "1",
                *[a for k, v in config.items() for a in ("--config", f"{k}={v}")],
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        pid = kafka.process.pid  # type: ignore[union-attr]
        bench_produce(kafka.bootstrap, warm_up, warm_records, "1", batches)
        cpu = cpu_seconds(pid)
        kafka_append = bench_produce(kafka.bootstrap, topic, records, "1", batches)
        kafka_append_cpu = cpu_seconds(pid) - cpu
        cpu = cpu_seconds(pid)
        kafka_read = bench_consume(kafka.bootstrap, topic, records)
        kafka_read_cpu = cpu_seconds(pid) - cpu
    finally:
        kafka.stop()

    say(f"{name}: the same records into compactlog serve")
    served_dir = root / f"served-{name}"
    served = Served(str(served_dir))
    try:
        cpu = cpu_seconds(served.proc.pid)
        ours_append = bench_produce(served.bootstrap, topic, records, "1", batches)
        ours_append_cpu = cpu_seconds(served.proc.pid) - cpu
        cpu = cpu_seconds(served.proc.pid)
        ours_read = bench_consume(served.bootstrap, topic, records)
        ours_read_cpu = cpu_seconds(served.proc.pid) - cpu
    finally:
        served.stop()
    shutil.rmtree(served_dir, ignore_errors=True)

    for figure, ours, theirs, ours_cpu, theirs_cpu in (
        ("append", ours_append, kafka_append, ours_append_cpu, kafka_append_cpu),
        ("read", ours_read, kafka_read, ours_read_cpu, kafka_read_cpu),
    ):
        emit(
            f"broker_{figure}_{name}",
            ours,
            "records/s",
            mb_s=round(ours * record_bytes / MB, 1),
            kafka={"value": round(theirs), "mb_s": round(theirs * record_bytes / MB, 1)},
            ratio=round(ours / theirs, 3),
            broker_cpu_s={"compactlog": round(ours_cpu, 2), "kafka": round(theirs_cpu, 2)},
            records=records,
            client="confluent-kafka, acks=1, batches of 5,000",
        )

    say(f"{name}: both cleaners on Kafka's files ({mb:,.0f} MB)")
    ours_dir = root / f"compactlog-{name}"
    shutil.rmtree(ours_dir, ignore_errors=True)
    compactlog_copy(kafka.data_dir, configs, ours_dir)
    compactlog_clean(ours_dir, warm_up)  # warm: the compiled kernels, the page cache
    ours = compactlog_clean(ours_dir, topic)
    theirs = kafka_clean(kafka, topic, warm_up)
    assert ours["checkpoint"] == theirs["checkpoint"], (ours, theirs)
    emit(
        f"cleaner_{name}",
        ours["mb_s"],
        "MB/s",
        kafka={k: v for k, v in theirs.items() if k != "checkpoint"},
        compactlog={k: v for k, v in ours.items() if k not in ("mb_s", "checkpoint")},
        ratio=round(ours["mb_s"] / theirs["mb_s"], 3),
        log_mb=round(mb),
        records=records,
        keys=records // VERSIONS,
        offset_map="kafka (MD5, 24 bytes a key), 128 MiB",
        note="MB/s as Kafka's summary line counts it: bytes read (MiB) over the round's time",
    )
    shutil.rmtree(ours_dir, ignore_errors=True)
    shutil.rmtree(kafka.workdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="bench-data")
    parser.add_argument("--gib", type=float, default=1.0, help="size of the 1 KiB-record log")
    parser.add_argument("--small-records", type=int, default=10_000_000)
    args = parser.parse_args()
    reason = unavailable()
    if reason:
        print(f"bench_vs_kafka: skipped: {reason}", file=sys.stderr)
        return 0
    root = Path(args.dir).resolve() / "vs-kafka"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    import confluent_kafka

    emit(
        "machine",
        os.cpu_count() or 0,
        "cores",
        python=sys.version.split()[0],
        kafka=KAFKA_VERSION,
        librdkafka=confluent_kafka.libversion()[0],
        load_average=[round(x, 2) for x in os.getloadavg()],
        memory_gib=round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    )
    emit("dd_write", dd_write_mb_s(str(root), 1024), "MB/s", what="dd 1 GiB, conv=fdatasync")
    probe = root / "dd-probe.bin"
    with probe.open("wb") as f:
        f.write(os.urandom(MIB) * 512)
    emit("dd_read", dd_read_mb_s(str(probe)), "MB/s", what="dd 512 MiB to /dev/null, cached")
    probe.unlink()

    bench_log(root, "1KiB", 1024, int(args.gib * 2**30) // 1024)
    bench_log(root, "100B", 100, args.small_records)
    emit("load_average_at_end", os.getloadavg()[0], "load", load_average=list(os.getloadavg()))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
