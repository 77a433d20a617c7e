"""The cost of one Prometheus scrape of the broker's metrics, by the number of partitions.

    python benchmarks/bench_metrics.py [--partitions 1000] [--scrapes 20]

Prints one JSON line per figure, the median over ``--scrapes`` scrapes:

* ``metrics_read_ms``: reading the counters, every partition's log figures, the quarantine
  files and the cleaner's gauges as plain values (``read_figures``). This part runs on the
  broker's event loop (it touches the store), so every client waits behind it;
* ``metrics_exposition_ms``: ``prometheus_client``'s metric families and ``generate_latest``
  writing the text (``exposition``), which the broker runs in a worker thread;
* ``metrics_bytes``: the size of the text.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from compactlog.broker.metrics import BrokerMetrics, exposition, read_figures
from compactlog.log_manager import LogManager


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--scrapes", type=int, default=20)
    args = parser.parse_args()
    topics = max(1, args.partitions // 50)
    with tempfile.TemporaryDirectory() as data, LogManager.open(data) as manager:
        for t in range(topics):
            manager.store.create_topic(f"topic-{t}", args.partitions // topics)
        metrics = BrokerMetrics()
        for name in ("Produce", "Fetch", "Metadata"):
            metrics.record_request(name, 1.5)
        read_ms, exposition_ms = [], []
        text = b""
        for _ in range(args.scrapes):
            t0 = time.perf_counter()
            figures = read_figures(metrics, manager)
            t1 = time.perf_counter()
            text = exposition(figures)
            t2 = time.perf_counter()
            read_ms.append((t1 - t0) * 1000)
            exposition_ms.append((t2 - t1) * 1000)
    for figure, value in (
        ("metrics_read_ms", statistics.median(read_ms)),
        ("metrics_exposition_ms", statistics.median(exposition_ms)),
        ("metrics_bytes", len(text)),
    ):
        print(json.dumps({"figure": figure, "value": round(value, 2),
                          "partitions": topics * (args.partitions // topics)}))  # fmt: skip


if __name__ == "__main__":
    main()
