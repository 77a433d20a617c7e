"""The main job, until the Spark pipeline exists: a guided run of the store.

1. The seed example through the CLI: topic ``fruit-prices`` (compact) with grape=$2.69,
   lime=$0.49, grape=null (a tombstone), lime=$1.59 at offsets 0-3, consumed back with a kcat
   format and shown batch by batch with ``dump-log``.
2. A generated workload: customer addresses keyed by customer id on a compacted topic, and an
   event stream on a ``delete`` topic with size retention, appended with progress shown.
3. Retention: the event topic is cut back to ``retention.bytes``, whole segments, oldest first.
   Compaction: the address topic is cleaned as Kafka's cleaner would, round by round, with its
   summary lines; the latest address of every customer is the same before and after.
4. A crash: the store is dropped without a clean shutdown and a torn write is left at the end of
   one partition; reopening recovers it to the last whole batch.
5. Everything is read back, the latest address per customer is rebuilt, and ``verify`` checks
   every CRC, offset and index in the data directory.

Run: ``python -m compactlog.demo --data-dir demo-data`` (``scripts/main.sh`` does this).
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import subprocess
import sys
import time

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from compactlog.log_manager import LogManager
from compactlog.storage.partitioner import partition_for_key
from compactlog.storage.store import Store
from compactlog.storage.topic_catalog import TOPICS_FILE

console = Console()

SEED_LINES = b"grape=$2.69\nlime=$0.49\ngrape=null\nlime=$1.59\n"
STREETS = ["Elm St", "Oak Ave", "Pine Rd", "Maple Dr", "Cedar Ln", "Birch Way", "Ash Ct"]
CITIES = ["Lisbon", "Oslo", "Austin", "Kyoto", "Nairobi", "Lyon", "Quito", "Perth"]


def _cli(data_dir: str, *args: str, stdin: bytes | None = None) -> str:
    shown = " ".join(["compactlog", "--data-dir", data_dir, *(shlex.quote(a) for a in args)])
    console.print(f"[bold cyan]$ {shown}[/]")
    result = subprocess.run(
        [sys.executable, "-m", "compactlog.cli.main", "--data-dir", data_dir, *args],
        input=stdin,
        capture_output=True,
        check=False,
    )
    out = result.stdout.decode("utf-8", "replace")
    if out:
        console.print(out.rstrip("\n"), markup=False, highlight=False)
    if result.returncode != 0:
        raise SystemExit(f"command failed ({result.returncode}): {result.stderr.decode().strip()}")
    return out


def _fresh_dir(path: str) -> None:
    if os.path.exists(path):
        if os.listdir(path) and not os.path.exists(os.path.join(path, TOPICS_FILE)):
            raise SystemExit(f"{path} exists and is not a compactlog data directory; pick another")
        shutil.rmtree(path)
    os.makedirs(path)


def seed_example(data_dir: str) -> None:
    console.rule("[bold]1. The seed example: fruit prices on a compacted topic")
    _cli(
        data_dir,
        "topics",
        "create",
        "fruit-prices",
        "--partitions",
        "1",
        "--config",
        "cleanup.policy=compact",
    )
    _cli(
        data_dir,
        "produce",
        "fruit-prices",
        "--partition",
        "0",
        "--key-separator",
        "=",
        "--null-marker",
        "null",
        stdin=SEED_LINES,
    )
    _cli(data_dir, "consume", "fruit-prices", "--format", r"%o\t%k\t%s\n")
    log = os.path.join(data_dir, "fruit-prices-0", "00000000000000000000.log")
    _cli(data_dir, "dump-log", log)


def _address(rng: random.Random) -> bytes:
    return (
        f'{{"street":"{rng.randint(1, 9999)} {rng.choice(STREETS)}",'
        f'"city":"{rng.choice(CITIES)}","zip":"{rng.randint(10000, 99999)}",'
        f'"since":{rng.randint(1990, 2026)}}}'
    ).encode()


def workload(
    store: Store, records: int, keys: int, partitions: int, seed: int
) -> dict[bytes, bytes | None]:
    console.rule(
        f"[bold]2. A generated workload: {records:,} address updates over {keys:,} customers"
    )
    store.create_topic(
        "customer-addresses",
        partitions,
        {"cleanup.policy": "compact", "segment.bytes": 1 << 20},
    )
    store.create_topic(
        "customer-events",
        2,
        {"cleanup.policy": "delete", "segment.bytes": 256 << 10, "retention.bytes": 1 << 20},
    )
    rng = random.Random(seed)
    latest: dict[bytes, bytes | None] = {}
    pending: dict[int, list[tuple[bytes, bytes | None]]] = {p: [] for p in range(partitions)}
    batch = 200
    started = time.perf_counter()
    appended_bytes = 0
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,} records"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("appending", total=records)
        for i in range(records):
            key = f"customer-{rng.randrange(keys):07d}".encode()
            value = None if rng.random() < 0.02 else _address(rng)
            latest[key] = value
            part = partition_for_key(key, partitions)
            pending[part].append((key, value))
            appended_bytes += len(key) + (len(value) if value else 0)
            if len(pending[part]) >= batch:
                store.append("customer-addresses", part, pending[part])
                pending[part] = []
            if i % 10 == 0:
                store.produce("customer-events", key, b"address-changed")
            if i % 5000 == 0:
                progress.update(task, completed=i)
        for part, rest in pending.items():
            if rest:
                store.append("customer-addresses", part, rest)
        progress.update(task, completed=records)
    elapsed = time.perf_counter() - started
    console.print(
        f"appended {records:,} records ({appended_bytes / 1e6:.1f} MB of keys and values) in "
        f"{elapsed:.1f} s: {records / elapsed:,.0f} records/s"
    )
    return latest


def retention(store: Store) -> None:
    console.rule("[bold]3. Retention of the delete topic (retention.bytes = 1 MiB)")
    before = {p: len(store.segments("customer-events", p)) for p in range(2)}
    deleted = store.run_retention()
    for p in range(2):
        segs = store.segments("customer-events", p)
        console.print(
            f"customer-events-{p}: {before[p]} segments -> {len(segs)}, "
            f"{sum(s.size for s in segs):,} bytes, log start offset "
            f"{store.log_start_offset('customer-events', p):,}"
        )
    console.print(f"{deleted} whole segments deleted, oldest first")


def compaction(logs: LogManager, partitions: int) -> None:
    store = logs.store
    console.rule("[bold]3b. Compaction of the address topic (Kafka's log cleaner)")

    def latest() -> dict[bytes | None, bytes | None]:
        return {
            r.key: r.value for p in range(partitions) for r in store.read("customer-addresses", p)
        }

    before = latest()
    size_before = sum(
        s.size for p in range(partitions) for s in store.segments("customer-addresses", p)
    )
    for p in range(partitions):
        store.roll("customer-addresses", p)  # so the newest segment is cleanable too
    rounds = 0
    while rounds < 20:
        result = logs.clean()
        if result.cleaned is None:
            break
        rounds += 1
        if rounds == 1:
            console.print(result.summary.strip("\n"), markup=False, highlight=False)
        else:
            console.print(f"cleaned {result.cleaned[0]}-{result.cleaned[1]}")
    size_after = sum(
        s.size for p in range(partitions) for s in store.segments("customer-addresses", p)
    )
    after = latest()
    same = sum(1 for k, v in before.items() if after.get(k) == v or (v is None and k not in after))
    console.print(
        f"{rounds} cleaning round(s): {size_before:,} bytes -> {size_after:,} bytes "
        f"({100 * (1 - size_after / size_before):.1f}% smaller); the latest value of "
        f"{same:,} of {len(before):,} keys is unchanged"
    )


def crash_and_recover(data_dir: str, logs: LogManager) -> Store:
    store = logs.store
    console.rule("[bold]4. A crash with a torn write, then recovery")
    end = store.log_end_offset("customer-addresses", 0)
    active = store.segments("customer-addresses", 0)[-1].path
    logs.abandon()  # no flush, no clean-shutdown marker: what a killed process leaves
    with open(active, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x99\x99\x00\x00\x10\x00torn")  # half a batch
    console.print(f"left 16 bytes of a half-written batch at the end of {os.path.relpath(active)}")
    reopened = Store.open(data_dir)
    stats = reopened.load_stats[("customer-addresses", 0)]
    console.print(
        f"reopened after an unclean stop: {stats.segments_recovered} segment(s) re-checked, "
        f"{stats.bytes_truncated} bytes truncated; log end offset {end:,} -> "
        f"{reopened.log_end_offset('customer-addresses', 0):,}"
    )
    return reopened


def read_back(store: Store, latest: dict[bytes, bytes | None], partitions: int) -> None:
    console.rule("[bold]5. Reading everything back")
    table = Table("partition", "segments", "bytes", "log start", "log end", "records read")
    rebuilt: dict[bytes, bytes | None] = {}
    started = time.perf_counter()
    total = 0
    for p in range(partitions):
        count = 0
        for record in store.read("customer-addresses", p):
            assert record.key is not None
            rebuilt[record.key] = record.value
            count += 1
        total += count
        segs = store.segments("customer-addresses", p)
        table.add_row(
            str(p),
            str(len(segs)),
            f"{sum(s.size for s in segs):,}",
            f"{store.log_start_offset('customer-addresses', p):,}",
            f"{store.log_end_offset('customer-addresses', p):,}",
            f"{count:,}",
        )
    elapsed = time.perf_counter() - started
    console.print(table)
    live = sum(1 for v in rebuilt.values() if v is not None)
    same = sum(1 for k, v in latest.items() if rebuilt.get(k) == v)
    console.print(
        f"read {total:,} records in {elapsed:.2f} s ({total / elapsed:,.0f} records/s); "
        f"latest address rebuilt for {live:,} customers ({len(rebuilt) - live:,} deleted); "
        f"{same:,} of {len(latest):,} keys match what was written"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="demo-data")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--keys", type=int, default=30_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    data_dir = args.data_dir
    _fresh_dir(data_dir)
    seed_example(data_dir)
    logs = LogManager.open(data_dir)
    store = logs.store
    latest = workload(store, args.records, args.keys, args.partitions, args.seed)
    retention(store)
    compaction(logs, args.partitions)
    with crash_and_recover(data_dir, logs) as reopened:
        read_back(reopened, latest, args.partitions)
    console.rule("[bold]6. verify: every CRC, offset and index of the data directory")
    _cli(data_dir, "verify")
    console.print(f"[green]done[/]: the data directory is {os.path.abspath(data_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
