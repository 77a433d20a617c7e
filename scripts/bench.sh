#!/usr/bin/env bash
# Set up .venv, then run the benchmarks; each prints JSON lines (figure, unit, machine limit).
# Extra arguments go to the storage benchmark, e.g. scripts/bench.sh --gib 0.25
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-env.sh
python benchmarks/bench_storage.py --dir bench-data "$@"
python benchmarks/bench_records.py
python -m pip install --quiet "rocksdict>=0.3" || echo "rocksdict not installed: the RocksDB comparison is skipped" >&2
python benchmarks/bench_cleaner.py
# Spark (needs Java): one-pass compaction of 20 M keys beside Kafka's passes, the data source's
# read throughput against Parquet, local[1] against local[2]. About 6 minutes on 2 cores.
python benchmarks/bench_spark.py
# Broker: confluent-kafka over loopback against the embedded append and read of the same
# records in the same run (about 15 s).
python benchmarks/bench_broker.py --dir bench-data
# Against Apache Kafka 4.4 itself (needs Java and the jars scripts/setup-env.sh fetches): the
# same 1 GiB log of 1 KiB records and 10 M records of 100 B through each broker and each
# cleaner. About 10 minutes on 2 cores.
python benchmarks/bench_vs_kafka.py --dir bench-data
# Security: produce/consume over SASL_SSL (SCRAM-SHA-512) beside PLAINTEXT in the same run,
# best of 2 rounds, with the ratio (about 30 s).
python benchmarks/bench_security.py
