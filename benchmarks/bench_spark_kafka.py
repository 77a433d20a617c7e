"""Spark's own Kafka connector through ``compactlog serve`` against the ``compactlog`` data source
reading the same files, in the same run, on the same topic.

Prints one JSON line per figure (the figure, its unit, and the machine limit measured in the same
run), like the other benchmark files; progress goes to stderr.

    python benchmarks/bench_spark_kafka.py [--dir bench-data/spark-kafka] [--records 1000000]
        [--partitions 4] [--repeats 3] [--master local[2]] [--keep]

Needs Spark's Kafka connector jars in .jars/spark-kafka/ (scripts/setup-env.sh fetches them from
tests/jars/spark-kafka/pom.xml; the connector is 4.2.0, run on PySpark 4.3.0).

Figures:

* ``kafka_connector_read``: ``spark.read.format("kafka")`` of the topic (``--records`` records of
  100 bytes: 16-byte key + 84-byte value, 5,000 records per batch, round-robin over
  ``--partitions`` partitions, uncompressed) from a ``compactlog serve`` process (its cleaner
  off) over the data directory, into the ``noop`` sink; one task per Kafka partition, as the
  connector plans it. After one warm-up read, ``--repeats`` timed reads, alternating with the
  next figure's; records/s and MB/s (bytes of the log files) of the median and the best read.
* ``compactlog_source_read``: ``spark.read.format("compactlog")`` of the same data directory
  (``minPartitions`` at the session's default parallelism, as :func:`log_reader` sets it) into
  ``noop``, timed alike; and ``source_over_connector``, the ratio of the medians.
* ``kafka_connector_write``: ``df.write.format("kafka")`` of the topic's rows (key, value,
  partition, read from the files) into a new topic of the same broker with as many partitions;
  records/s and MB/s of the bytes written to its ``.log`` files (1,000 warm-up records
  included), one run after that warm-up (producers connected, metadata fetched).
* Limits: ``dd`` reading the largest segment (from the page cache after the first read), and
  the cores (the broker is one Python process: one core at most; Spark runs ``--master``).
  ``machine`` and ``load_average_at_end``: cores, versions, load (other jobs share the machine).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

from bench_spark import MB, READ_TOPIC, build_read_log, emit
from bench_storage import dd_read_mb_s

JARS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".jars")
STARTED = time.time()


def say(message: str) -> None:
    print(
        f"[bench_spark_kafka {time.time() - STARTED:7.1f}s] {message}", file=sys.stderr, flush=True
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_broker(data_dir: str, log_path: str) -> tuple[subprocess.Popen[bytes], str]:
    """``compactlog serve`` over ``data_dir`` on a free loopback port, its cleaner off."""
    bootstrap = f"127.0.0.1:{_free_port()}"
    exe = os.path.join(os.path.dirname(sys.executable), "compactlog")
    cmd = [exe, "--data-dir", data_dir, "serve", "--listen", bootstrap]
    cmd += ["--config", "log.cleaner.enable=false"]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    host, port = bootstrap.split(":")
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"compactlog serve exited with {proc.returncode}: see {log_path}")
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), 1):
            return proc, bootstrap
        if time.monotonic() > deadline:
            raise RuntimeError("compactlog serve is not listening after 60 s")
        time.sleep(0.05)


def _noop(df: Any) -> float:
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def _rates(name: str, seconds: list[float], records: int, log_bytes: int, **extra: Any) -> None:
    median, best = statistics.median(seconds), min(seconds)
    emit(
        name,
        records / median,
        "records/s",
        mb_s=round(log_bytes / MB / median, 1),
        best_records_s=round(records / best),
        seconds=[round(s, 3) for s in seconds],
        records=records,
        log_mb=round(log_bytes / MB, 1),
        **extra,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="bench-data/spark-kafka", help="work directory (created)")
    parser.add_argument("--records", type=int, default=1_000_000, help="records of the topic")
    parser.add_argument("--partitions", type=int, default=4, help="of the topic")
    parser.add_argument("--repeats", type=int, default=3, help="timed reads of each kind")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    jars = sorted(glob.glob(os.path.join(JARS, "spark-kafka", "*.jar")))
    if not jars:
        print("no .jars/spark-kafka: run scripts/setup-env.sh (Spark's Kafka connector)")
        return 2

    import pyspark

    from compactlog.spark import local_session
    from compactlog.spark.source import log_reader

    root = os.path.abspath(args.dir)
    made_parent = not os.path.exists(os.path.dirname(root))
    os.makedirs(root, exist_ok=True)
    emit(
        "machine",
        os.cpu_count() or 0,
        "cores",
        python=sys.version.split()[0],
        pyspark=pyspark.__version__,
        connector=[os.path.basename(j) for j in jars],
        load_average=[round(x, 2) for x in os.getloadavg()],
        master=args.master,
    )
    data = os.path.join(root, "data")
    say(f"building the topic: {args.records:,} records of 100 bytes")
    built = build_read_log(data, args.records, args.partitions)
    say(f"  built in {built.seconds:.1f} s ({built.log_bytes / MB:.0f} MB)")
    broker, bootstrap = start_broker(data, os.path.join(root, "serve.log"))
    try:
        spark = local_session(
            args.master,
            "bench-spark-kafka",
            driver_memory=args.driver_memory,
            conf={"spark.jars": ",".join(jars)},
        )
        kafka = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", READ_TOPIC)
            .load()
        )
        files = log_reader(spark).option("subscribe", READ_TOPIC).load(data)
        say(f"  counts: connector {kafka.count():,}, source {files.count():,}")
        warm = {"kafka": _noop(kafka), "compactlog": _noop(files)}
        say(f"  warm-up: connector {warm['kafka']:.1f} s, source {warm['compactlog']:.1f} s")
        times: dict[str, list[float]] = {"kafka": [], "compactlog": []}
        for i in range(args.repeats):
            times["kafka"].append(_noop(kafka))
            times["compactlog"].append(_noop(files))
            say(
                f"  read {i + 1}: connector {times['kafka'][-1]:.2f} s, "
                f"source {times['compactlog'][-1]:.2f} s"
            )
        limit = {
            "what": "dd read of the largest segment (page cache), MB/s",
            "value": round(dd_read_mb_s(built.largest_segment), 1),
        }
        tasks = {"kafka": kafka.rdd.getNumPartitions(), "compactlog": files.rdd.getNumPartitions()}
        _rates(
            "kafka_connector_read",
            times["kafka"],
            built.records,
            built.log_bytes,
            tasks=tasks["kafka"],
            limit=limit,
            via=f"compactlog serve (one Python process) -> kafka-clients -> {args.master}",
        )
        _rates(
            "compactlog_source_read",
            times["compactlog"],
            built.records,
            built.log_bytes,
            tasks=tasks["compactlog"],
            limit=limit,
            via=f"segment files -> {args.master}",
        )
        emit(
            "source_over_connector",
            statistics.median(times["kafka"]) / statistics.median(times["compactlog"]),
            "x",
            what="median connector read seconds / median source read seconds",
        )
        say("writing the topic back through the connector")
        exe = os.path.join(os.path.dirname(sys.executable), "compactlog")
        parts = str(args.partitions)
        subprocess.run(
            [
                exe,
                "--bootstrap-server",
                bootstrap,
                "topics",
                "create",
                "copy",
                "--partitions",
                parts,
            ],
            check=True,
            capture_output=True,
        )
        rows = files.select("key", "value", "partition")

        def writer(df: Any) -> None:
            df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option(
                "topic", "copy"
            ).save()

        warm_rows = [(b"warm-%d" % i, b"x" * 84, i % args.partitions) for i in range(1000)]
        writer(spark.createDataFrame(warm_rows, "key binary, value binary, partition int"))
        started = time.perf_counter()
        writer(rows)
        seconds = time.perf_counter() - started
        written = sum(
            os.path.getsize(path) for path in glob.glob(os.path.join(data, "copy-*", "*.log"))
        )
        emit(
            "kafka_connector_write",
            built.records / seconds,
            "records/s",
            mb_s=round(written / MB / seconds, 1),
            seconds=round(seconds, 3),
            records=built.records,
            limit={"what": "cores of the machine (other jobs share them)", "value": os.cpu_count()},
        )
        spark.stop()
    finally:
        broker.terminate()
        broker.wait(timeout=60)
    emit("load_average_at_end", os.getloadavg()[0], "load", load_average=list(os.getloadavg()))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
        if made_parent:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(root))
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
