"""``dump-log``, ``log-dirs`` and ``verify`` on a directory a running broker holds: no lock, no
file created or changed (every file hashed before and after), and a live broker's pre-allocated
index space is not a problem. ``log-dirs`` creates nothing on an empty or missing directory."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import Cli, check_one_line_failure

from compactlog.broker.server import BrokerThread
from compactlog.storage._file_checks import DATA_DIR_LOCK_FILE, lock_holder
from compactlog.storage.datadir import LOCK_FILE
from compactlog.storage.store import Store


def _tree(root: Path) -> dict[str, str]:
    """Every directory and file under ``root``: files by the SHA-256 of their bytes."""
    out: dict[str, str] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.join(directory, name)] = "directory"
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                out[path] = hashlib.sha256(f.read()).hexdigest()
    return out


def _fill(store: Store) -> None:
    # Small segments and a dense index, so that there are rolled segments, index entries and a
    # pre-allocated active index; retention and cleaning off, so the broker has nothing to do.
    store.create_topic(
        "t",
        2,
        {"segment.bytes": "1500", "index.interval.bytes": "100", "retention.ms": "-1"},
    )
    for i in range(40):
        store.append("t", i % 2, [(b"k%d" % i, b"v" * 60, ())])


@pytest.fixture
def live(tmp_path: Path) -> Iterator[BrokerThread]:
    data = tmp_path / "data"
    with Store.open(data) as store:
        _fill(store)
    broker = BrokerThread(data, config={"log.cleaner.enable": "false"}).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.mark.broker
def test_inspecting_a_directory_a_broker_holds_changes_nothing(
    live: BrokerThread, cli: Cli
) -> None:
    assert lock_holder(str(cli.data_dir)) == os.getpid()  # the in-process broker holds it
    before = _tree(cli.data_dir)
    partition = cli.data_dir / "t-0"
    active = max(n for n in os.listdir(partition) if n.endswith(".log"))[:20]
    assert os.path.getsize(partition / f"{active}.index") > 1000  # pre-allocated, live

    verified = cli.ok("verify")
    assert verified.stdout.splitlines()[-1].startswith("OK: 2 partition(s), ")
    (note,) = [line for line in verified.stdout.splitlines() if line.startswith("note:")]
    assert f"held by process {os.getpid()} (a running broker" in note
    assert "pre-allocated index space" in note and "never trimmed" not in verified.stdout

    doc = json.loads(cli.ok("log-dirs", "--json").stdout)
    sizes = {p["partition"]: p["size"] for p in doc["brokers"][0]["logDirs"][0]["partitions"]}
    assert sizes["t-0"] == sizes["t-1"] > 1500
    assert "Total" in cli.ok("log-dirs").stdout

    kinds = (".log", ".index", ".timeindex", ".snapshot")
    files = sorted(str(partition / n) for n in os.listdir(partition) if n.endswith(kinds))
    files += [str(cli.data_dir / "recovery-point-offset-checkpoint")]
    dumped = cli.ok("dump-log", *files).stdout
    assert f"Dumping {partition / active}.index" in dumped
    assert "offset: " in dumped.split(f"Dumping {partition / active}.index")[1]

    assert _tree(cli.data_dir) == before


def test_verify_still_reports_a_zero_tail_after_a_clean_stop(cli: Cli) -> None:
    """Away from a live broker, an index's zero tail after a clean shutdown is still a problem
    (the store trims it at close)."""
    with Store.open(cli.data_dir) as store:
        _fill(store)
    assert lock_holder(str(cli.data_dir)) is None
    last = max(n for n in os.listdir(cli.data_dir / "t-0") if n.endswith(".index"))
    with open(cli.data_dir / "t-0" / last, "ab") as f:
        f.write(b"\0" * 80)
    result = cli("verify")
    assert result.exit_code == 1, result.stdout
    assert "are zero: pre-allocated space never trimmed" in result.stdout
    assert "held by process" not in result.stdout
    check_one_line_failure(cli("dump-log", str(cli.data_dir / "t-0" / last)), [3])


def test_log_dirs_creates_nothing_on_an_empty_or_missing_directory(cli: Cli) -> None:
    check_one_line_failure(cli("log-dirs"), [2])
    assert not cli.data_dir.exists()
    cli.data_dir.mkdir()
    doc = json.loads(cli.ok("log-dirs", "--json").stdout)
    assert doc["brokers"][0]["logDirs"][0]["partitions"] == []
    assert "Total" in cli.ok("log-dirs").stdout
    assert os.listdir(cli.data_dir) == []


def test_the_lock_file_name_is_the_data_directorys() -> None:
    assert DATA_DIR_LOCK_FILE == LOCK_FILE


@pytest.mark.broker
@pytest.mark.slow
def test_inspecting_while_a_broker_appends_rolls_and_cleans_reports_no_problem(
    tmp_path: Path, cli: Cli
) -> None:
    """Appends, rolls (a new segment's indexes sized, the old one's trimmed), index writes and
    the cleaner's swaps (segments replaced) happen while verify, log-dirs and dump-log read:
    what is only in passing is not reported, and no partition reads as empty."""
    import threading

    from tests.broker.test_server_basics import PRODUCE, Client, batch, produce_request

    config = {"log.cleaner.backoff.ms": "10", "log.cleaner.min.compaction.lag.ms": "0"}
    broker = BrokerThread(cli.data_dir, config=config).start()
    stop = threading.Event()
    sent = [0]

    def produce() -> None:
        with Client(broker.port) as client:
            while not stop.is_set():
                i = sent[0]
                data = batch([(b"k%d" % (i % 7), b"v" * 300)] * 5)
                client.call(PRODUCE, 7, produce_request({("t", 0): data, ("c", 0): data}))
                sent[0] += 1

    try:
        store = broker.broker.store
        assert store is not None
        plain = {"segment.bytes": "100000", "index.interval.bytes": "200"}
        compacted = {
            "cleanup.policy": "compact", "segment.bytes": "20000",
            "min.cleanable.dirty.ratio": "0.01", "index.interval.bytes": "200",
        }  # fmt: skip
        broker.call(lambda: store.create_topic("t", 1, plain))
        broker.call(lambda: store.create_topic("c", 1, compacted))
        writer = threading.Thread(target=produce)
        writer.start()
        try:
            for _ in range(25):
                result = cli("verify", "--no-notes")
                assert result.exit_code == 0, result.stdout
                doc = json.loads(cli.ok("log-dirs", "--json").stdout)
                sizes = [p["size"] for p in doc["brokers"][0]["logDirs"][0]["partitions"]]
                assert all(sizes), doc
                for name in ("t-0", "c-0"):
                    directory = cli.data_dir / name
                    files = [str(p) for p in sorted(directory.glob("*.*index"))[-4:]]
                    files += [str(p) for p in sorted(directory.glob("*.log"))[-2:]]
                    result = cli("dump-log", "--no-print-data-log", *files)
                    # A segment the cleaner deleted after the listing is gone: that is all.
                    said = result.stderr.lower()
                    gone = "does not exist" in said or "no such file" in said
                    assert result.exit_code == 0 or gone, result.stderr
        finally:
            stop.set()
            writer.join()
        segments = [n for n in os.listdir(cli.data_dir / "t-0") if n.endswith(".log")]
        assert len(segments) > 3, f"{sent[0]} batches made only {segments}"  # rolls happened
        assert "c 0 " in (cli.data_dir / "cleaner-offset-checkpoint").read_text()  # cleaned
    finally:
        broker.stop()
