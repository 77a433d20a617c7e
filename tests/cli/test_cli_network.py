"""The CLI's network mode against a running ``compactlog serve``, and its local mode on the
directory that broker holds (read-only: no file changes) and on a stopped directory: the same
output for the same data, the same exit codes, one-line errors.

One ``compactlog serve`` serves the module (topics get names of their own per test); the tests
that stop a broker start their own.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_helpers import check_one_line_failure
from click.testing import CliRunner, Result
from confluent_kafka import Consumer

from compactlog.cli.main import hoist_global_options, main
from tests.broker.helpers.server import CliBroker

pytestmark = pytest.mark.broker

#: Nothing the broker does on a timer may change a file while a test hashes them.
QUIET = {
    "log.flush.offset.checkpoint.interval.ms": 3_600_000,
    "log.flush.start.offset.checkpoint.interval.ms": 3_600_000,
    "log.retention.check.interval.ms": 3_600_000,
    "log.cleaner.enable": "false",
    "log.initial.task.delay.ms": 3_600_000,
}
#: Record timestamps: recent, so that retention (7 days by default) keeps them.
T0 = (time.time_ns() // 1_000_000 // 1000) * 1000
TS, LATE = str(T0), str(T0 + 5000)


@dataclass
class Served:
    broker: CliBroker
    runner: CliRunner

    @property
    def data_dir(self) -> Path:
        return self.broker.data_dir

    def net(self, *args: str, input: bytes | str | None = None) -> Result:
        return self.runner.invoke(
            main, ["--bootstrap-server", self.broker.bootstrap, *args], input=input
        )

    def local(self, *args: str, input: bytes | str | None = None) -> Result:
        return self.runner.invoke(main, [*args, "--data-dir", str(self.data_dir)], input=input)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


def tree(path: Path) -> dict[str, object]:
    """Every file and directory under ``path``: a file's size, modification time (ns) and, up
    to 1 MiB, content hash; "dir" for a directory. (The pre-allocated 10 MiB index files of 50
    __consumer_offsets partitions are not hashed: a write would change their mtime.)"""
    found: dict[str, object] = {}
    for root, dirs, files in os.walk(path):
        for name in dirs:
            found[os.path.relpath(os.path.join(root, name), path)] = "dir"
        for name in files:
            full = os.path.join(root, name)
            st = os.stat(full)
            digest = ""
            if st.st_size <= 1 << 20:
                with open(full, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            found[os.path.relpath(full, path)] = (st.st_size, st.st_mtime_ns, digest)
    return found


def start_broker(tmp: Path) -> CliBroker:
    return CliBroker(tmp / "data", QUIET, tmp / "serve.log").start()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    broker = start_broker(tmp_path_factory.mktemp("served"))
    try:
        yield Served(broker, CliRunner())
    finally:
        broker.stop()


def fill(s: Served, topic: str, partitions: int = 2, *configs: str) -> None:
    """A topic made through the broker, with keyed records, a tombstone, headers, and bytes
    that are not UTF-8 or need JSON escapes."""
    args = [f"--config={c}" for c in configs]
    ok(s.net("topics", "create", topic, "--partitions", str(partitions), *args))
    lines = b'k1=v1\nk2=\xff\x01bin\nk3=quote"back\\slash\tTAB\nk1=NULL\nk4=v4\n'
    ok(s.net("produce", topic, "-K", "=", "-Z", "NULL", "-H", "h=x", "-H", "n",
             "--timestamp", TS, input=lines))  # fmt: skip
    ok(s.net("produce", topic, "-p", "0", "-K", "=", "--timestamp", LATE,
             input=b"k5=late\n"))  # fmt: skip


def same(s: Served, *args: str) -> Result:
    """The command gives the same stdout and exit code in both modes; no file under the data
    directory (the broker holds it) changes in local mode."""
    network = s.net(*args)
    before = tree(s.data_dir)
    local = s.local(*args)
    assert tree(s.data_dir) == before, args
    assert (network.exit_code, network.stdout_bytes) == (local.exit_code, local.stdout_bytes), (
        args,
        network.stderr,
        local.stderr,
    )
    return network


# --------------------------------------------------------------------------------------------
# Options


def test_global_options_go_before_or_after_the_subcommand() -> None:
    assert hoist_global_options(["topics", "list", "--data-dir", "d"]) == [
        "--data-dir", "d", "topics", "list"
    ]  # fmt: skip
    assert hoist_global_options(["consume", "t", "--bootstrap-server=h:1", "-c", "1"]) == [
        "--bootstrap-server=h:1", "consume", "t", "-c", "1"
    ]  # fmt: skip
    assert hoist_global_options(["produce", "--", "--data-dir"]) == ["produce", "--", "--data-dir"]
    assert hoist_global_options(["groups", "list", "--timeout", "2"]) == [
        "--timeout", "2", "groups", "list"
    ]  # fmt: skip


def test_both_or_neither_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = CliRunner().invoke
    line = check_one_line_failure(
        run(main, ["topics", "list", "--data-dir", str(tmp_path), "--bootstrap-server", "h:1"]),
        [2],
    )
    assert "not both" in line
    line = check_one_line_failure(run(main, ["topics", "list"]), [2])
    assert "--data-dir" in line and "--bootstrap-server" in line
    monkeypatch.setenv("COMPACTLOG_BOOTSTRAP_SERVER", "h:1")
    line = check_one_line_failure(run(main, ["log-dirs"]), [2])
    assert "data directory only" in line
    # An option on the command line beats the other mode's environment variable ...
    assert ok(run(main, ["topics", "list", "--data-dir", str(tmp_path)])).stdout == ""
    monkeypatch.setenv("COMPACTLOG_DATA_DIR", str(tmp_path))
    # ... but two of a kind clash.
    line = check_one_line_failure(run(main, ["topics", "list"]), [2])
    assert "not both" in line
    line = check_one_line_failure(
        run(main, ["--bootstrap-server", "nohostport", "topics", "list"]), [2]
    )
    assert "HOST:PORT" in line


def test_an_unreachable_broker_is_one_line_and_exit_5_within_seconds() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    run = CliRunner().invoke
    for args in (["topics", "list"], ["consume", "t"], ["configs", "describe", "t"],
                 ["groups", "list"], ["produce", "t"], ["delete-records", "t", "-p", "0",
                 "--offset", "1"]):  # fmt: skip
        started = time.monotonic()
        result = run(main, ["--bootstrap-server", address, "--timeout", "3", *args], input="")
        line = check_one_line_failure(result, [5], " ".join(args))
        assert f"cannot reach the broker at {address} (connection refused)" in line
        assert time.monotonic() - started < 2  # a refused connection fails at once


# --------------------------------------------------------------------------------------------
# The same output in both modes, and no file changed by local mode while the broker runs


def test_topics_and_configs_read_the_same_in_both_modes(served: Served) -> None:
    fill(served, "fruit", 2, "cleanup.policy=compact", "retention.ms=100000")
    fill(served, "veg", 1)
    assert "fruit\n" in same(served, "topics", "list").stdout
    described = same(served, "topics", "describe", "fruit").stdout.splitlines()
    assert described[0].endswith(
        "\tPartitionCount: 2\tConfigs: cleanup.policy=compact,retention.ms=100000"
    )
    assert len(described) == 3 and "\tLogEndOffset: " in described[1]
    same(served, "topics", "describe")
    configs = same(served, "configs", "describe", "fruit").stdout.splitlines()
    assert configs[0] == "All configs for topic fruit are:"
    assert any(c.startswith("  cleanup.policy=compact ") and c.endswith("(override)")
               for c in configs)  # fmt: skip


def test_consume_reads_the_same_in_both_modes(served: Served) -> None:
    fill(served, "plums", 3)
    for args in (
        [],
        ["-f", "%t %p %o %T %k=%s (%K %S) [%h]\\n"],
        ["-J"],
        ["-J", "-p", "0"],
        ["-c", "3", "-f", "%o\\n"],
        ["-o", "-1", "-f", "%p %o\\n"],
        ["-o", "1", "-p", "0"],
        ["-o", "latest"],
        ["-o", "s@" + LATE, "-f", "%p %o %k\\n"],
        ["-o", "e@" + LATE, "-f", "%p %o %k\\n"],
        ["-Z", "NULL", "-f", "%k=%s\\n"],
    ):
        result = same(served, "consume", "plums", *args)
        assert result.exit_code == 0, (args, result.stderr)
    everything = served.net("consume", "plums", "-f", "%o\\n").stdout.split()
    assert len(everything) == 6
    assert served.net("consume", "plums", "-c", "2").stdout.count("\n") == 2
    ends = served.net("consume", "plums", "-o", "e@" + LATE, "-f", "%k\\n").stdout.split()
    assert "k5" not in ends and len(ends) == 5  # k5 is the one record at or after the end time
    starts = served.net("consume", "plums", "-o", "s@" + LATE, "-f", "%k\\n").stdout
    assert starts == "k5\n"


def test_consume_json_is_kcats(served: Served) -> None:
    fill(served, "kiwi", 1)
    kcat = subprocess.run(
        ["kcat", "-b", served.broker.bootstrap, "-C", "-J", "-t", "kiwi", "-o", "beginning",
         "-e", "-q"],
        capture_output=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert kcat.count(b"\n") == 6
    assert served.net("consume", "kiwi", "-J").stdout_bytes == kcat
    assert served.local("consume", "kiwi", "-J").stdout_bytes == kcat


def test_errors_name_kafkas_error_in_both_modes(served: Served) -> None:
    fill(served, "pears", 1)
    for args in (
        ["consume", "paers"],
        ["configs", "describe", "paers"],
        ["topics", "describe", "paers"],
    ):
        for result in (served.net(*args), served.local(*args)):
            line = check_one_line_failure(result, [3], " ".join(args))
            assert "unknown topic 'paers' (did you mean 'pears'?)" in line
            assert line.endswith("(UNKNOWN_TOPIC_OR_PARTITION)")
    for args in (
        ["produce", "paers"],
        ["configs", "alter", "paers", "--set", "retention.ms=1"],
        ["delete-records", "paers", "-p", "0", "--offset", "0"],
        ["topics", "delete", "paers"],
        ["groups", "reset-offsets", "g", "--topic", "paers", "--to-earliest"],
    ):
        line = check_one_line_failure(served.net(*args, input=""), [3], " ".join(args))
        assert "did you mean 'pears'?" in line
    line = check_one_line_failure(served.net("topics", "create", "pears"), [3])
    assert line.endswith("(TOPIC_ALREADY_EXISTS)")
    line = check_one_line_failure(
        served.net("configs", "alter", "pears", "--set", "retention.ms=soon"), [2]
    )
    assert line.endswith("(INVALID_CONFIG)")
    line = check_one_line_failure(served.net("consume", "pears", "-o", "99"), [3])
    assert line.endswith("(OFFSET_OUT_OF_RANGE)")
    line = check_one_line_failure(served.local("consume", "pears", "-o", "99"), [3])
    assert line.endswith("(OFFSET_OUT_OF_RANGE)")


def test_configs_alter_takes_kafkas_lists(served: Served) -> None:
    ok(served.net("topics", "create", "figs"))
    added = "cleanup.policy=[compact,delete],min.cleanable.dirty.ratio=0.1,segment.ms=1000"
    ok(served.net("configs", "alter", "figs", "--add-config", added))
    described = served.net("topics", "describe", "figs").stdout.splitlines()[0]
    assert described.endswith(
        "Configs: cleanup.policy=compact,delete,min.cleanable.dirty.ratio=0.1,segment.ms=1000"
    )
    ok(served.net("configs", "alter", "figs", "--delete-config", "segment.ms,cleanup.policy"))
    described = served.net("topics", "describe", "figs").stdout.splitlines()[0]
    assert described.endswith("Configs: min.cleanable.dirty.ratio=0.1")
    for bad in ("a", "x=[1,2", "=1"):
        check_one_line_failure(served.net("configs", "alter", "figs", "--add-config", bad), [2])


# --------------------------------------------------------------------------------------------
# Groups


def test_groups_describe_reset_and_delete(served: Served) -> None:
    fill(served, "limes", 2)
    consumer = Consumer({"bootstrap.servers": served.broker.bootstrap, "group.id": "juicers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "client.id": "juicer-1"})  # fmt: skip
    try:
        consumer.subscribe(["limes"])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
        for partition in ("0", "1"):  # one record more in each partition: a lag of 1
            ok(served.net("produce", "limes", "-p", partition, input="more\n"))
        assert "juicers\n" in ok(served.net("groups", "list")).stdout
        active = ok(served.net("groups", "describe", "juicers")).stdout.splitlines()
        assert active[0].split() == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID",
        ]  # fmt: skip
        assert len(active) == 3 and all("juicer-1" in row for row in active[1:])
        # The directory's copy: the membership the coordinator stored at the last rebalance.
        assert same(served, "groups", "describe", "juicers").stdout.splitlines() == active
        line = check_one_line_failure(
            served.net("groups", "reset-offsets", "juicers", "--topic", "limes",
                       "--to-earliest", "--execute"), [3])  # fmt: skip
        assert "inactive" in line and "Stable" in line
        line = check_one_line_failure(served.net("groups", "delete", "juicers"), [3])
        assert line.endswith("(NON_EMPTY_GROUP)")
    finally:
        consumer.close()
    described = same(served, "groups", "describe", "juicers").stdout.splitlines()
    assert described[0] == "Consumer group 'juicers' has no active members."
    rows = [row.split() for row in described[2:]]
    assert [(int(end) - int(current), lag) for _, _, _, current, end, lag, *_ in rows] == [
        (1, "1"),
        (1, "1"),
    ]
    assert [row[6:] for row in rows] == [["-", "-", "-"]] * 2
    same(served, "groups", "list")

    dry = ok(served.net("groups", "reset-offsets", "juicers", "--topic", "limes", "--to-latest"))
    assert [r.split()[-1] for r in dry.stdout.splitlines()[1:]] == [row[4] for row in rows]
    assert "dry run" in dry.stderr
    assert served.net("groups", "describe", "juicers").stdout == "\n".join(described) + "\n"
    ok(served.net("groups", "reset-offsets", "juicers", "--topic", "limes", "--to-offset", "1",
                  "--execute"))  # fmt: skip
    after = same(served, "groups", "describe", "juicers").stdout.splitlines()[2:]
    assert [row.split()[3] for row in after] == ["1", "1"]
    ok(served.net("groups", "reset-offsets", "juicers", "--topic", "limes", "--to-datetime",
                  "2099-01-01T00:00:00", "--execute"))  # fmt: skip
    after = served.net("groups", "describe", "juicers").stdout.splitlines()[2:]
    assert [row.split()[5] for row in after] == ["0", "0"]  # after the last record: the end
    line = check_one_line_failure(served.local("groups", "delete", "juicers"), [2])
    assert "--bootstrap-server" in line
    assert ok(served.net("groups", "delete", "juicers")).stdout == (
        "Deletion of requested consumer groups ('juicers') was successful.\n"
    )
    assert "juicers" not in served.net("groups", "list").stdout.split()
    line = check_one_line_failure(served.net("groups", "describe", "juicers"), [3])
    assert line.endswith("(GROUP_ID_NOT_FOUND)")
    line = check_one_line_failure(served.local("groups", "describe", "nobody"), [3])
    assert line.endswith("(GROUP_ID_NOT_FOUND)")
    # A group that does not exist yet: the reset creates it with those offsets, as in Kafka.
    ok(served.net("groups", "reset-offsets", "fresh", "--topic", "limes", "--to-earliest",
                  "--execute"))  # fmt: skip
    rows = [r.split() for r in same(served, "groups", "describe", "fresh").stdout.splitlines()[2:]]
    assert [(r[2], r[3]) for r in rows] == [("0", "0"), ("1", "0")]
    ok(served.net("groups", "reset-offsets", "fresh", "--topic", "limes:1", "--to-latest",
                  "--execute"))  # fmt: skip
    rows = [r.split() for r in served.net("groups", "describe", "fresh").stdout.splitlines()[2:]]
    ends = [r[4] for r in rows]
    assert [(r[2], r[3], r[5]) for r in rows] == [("0", "0", ends[0]), ("1", ends[1], "0")]
    for bad in ("limes:", "limes:x", "limes:-1"):
        check_one_line_failure(
            served.net("groups", "reset-offsets", "fresh", "--topic", bad, "--to-latest"), [2]
        )
    line = check_one_line_failure(
        served.net("groups", "reset-offsets", "fresh", "--topic", "limes:7", "--to-latest"), [3]
    )
    assert line.endswith("(UNKNOWN_TOPIC_OR_PARTITION)")


# --------------------------------------------------------------------------------------------
# Follow


def _follow(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "compactlog.cli.main", *args, "--follow", "-f", "%k\\n"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _read_lines(proc: subprocess.Popen[bytes], count: int, timeout: float = 30) -> list[bytes]:
    assert proc.stdout is not None
    lines: list[bytes] = []
    deadline = time.monotonic() + timeout
    os.set_blocking(proc.stdout.fileno(), False)
    buffer = b""
    while len(lines) < count and time.monotonic() < deadline:
        chunk = proc.stdout.read()
        if chunk:
            buffer += chunk
            *done, buffer = buffer.split(b"\n")
            lines += done
        time.sleep(0.05)
    return lines


@pytest.mark.parametrize(("mode", "stop"), [("network", signal.SIGTERM), ("local", signal.SIGINT)])
def test_follow_waits_for_new_records_until_stopped(served: Served, mode: str, stop: int) -> None:
    """--follow prints records as they come, and Ctrl-C (SIGINT) or SIGTERM ends it with 0."""
    topic = f"follow-{mode}"
    ok(served.net("topics", "create", topic))
    ok(served.net("produce", topic, "-K", "=", input="a=1\n"))
    target = (["--bootstrap-server", served.broker.bootstrap] if mode == "network"
              else ["--data-dir", str(served.data_dir)])  # fmt: skip
    proc = _follow([*target, "consume", topic])
    try:
        assert _read_lines(proc, 1) == [b"a"]
        ok(served.net("produce", topic, "-K", "=", input="b=2\nc=3\n"))
        assert _read_lines(proc, 2) == [b"b", b"c"]
        assert proc.poll() is None  # still following
        proc.send_signal(stop)
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None and proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


# --------------------------------------------------------------------------------------------
# A stopped directory; produce and delete-records in both modes


def test_a_stopped_directory_reads_as_the_broker_served_it(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    s = Served(broker, CliRunner())
    try:
        fill(s, "dates", 3, "cleanup.policy=compact,delete")
        ok(s.net("delete-records", "dates", "-p", "0", "--offset", "1"))
        commands = [
            ["consume", "dates", "-J"],
            ["consume", "dates", "-o", "-2", "-f", "%p %o %k %s\\n"],
            ["consume", "dates", "-p", "0", "-o", "0"],  # below the log start: refused
            # After a consume: librdkafka's consumer looks up a group coordinator (it needs a
            # group.id, even for assigned partitions), which creates __consumer_offsets.
            ["topics", "list"],
            ["topics", "describe"],
            ["configs", "describe", "dates"],
        ]
        served = [(r.exit_code, r.stdout_bytes) for r in (s.net(*c) for c in commands)]
    finally:
        broker.stop()
    before = tree(s.data_dir)
    stopped = [(r.exit_code, r.stdout_bytes) for r in (s.local(*c) for c in commands)]
    assert tree(s.data_dir) == before
    assert stopped == served
    assert served[2][0] == 3

    # delete-records on the stopped directory, through the store.
    line = ok(s.local("delete-records", "dates", "-p", "1", "--offset", "-1")).stdout
    end = s.local("topics", "describe", "dates").stdout.splitlines()[2].split("LogEndOffset: ")[1]
    assert line.endswith(f"partition: dates-1\tlow_watermark: {end}\n")
    assert s.local("consume", "dates", "-p", "1").stdout == ""


def test_delete_records_through_the_broker(served: Served) -> None:
    fill(served, "grapes", 1)
    result = ok(served.net("delete-records", "grapes", "-p", "0", "--offset", "2"))
    assert result.stdout == (
        "Executing records delete operation\nRecords delete operation completed:\n"
        "partition: grapes-0\tlow_watermark: 2\n"
    )
    assert served.net("consume", "grapes", "-f", "%o\\n").stdout.split() == ["2", "3", "4", "5"]
    line = check_one_line_failure(
        served.net("delete-records", "grapes", "-p", "0", "--offset", "99"), [3]
    )
    assert line.endswith("(OFFSET_OUT_OF_RANGE)")
    line = check_one_line_failure(
        served.net("delete-records", "grapes", "-p", "5", "--offset", "1"), [3]
    )
    assert line.endswith("(UNKNOWN_TOPIC_OR_PARTITION)")


def test_produce_partitions_keys_as_the_store_does(served: Served, tmp_path: Path) -> None:
    ok(served.net("topics", "create", "melons", "--partitions", "4"))
    lines = "".join(f"key-{i}=v{i}\n" for i in range(20))
    network = ok(served.net("produce", "melons", "-K", "=", "-v", input=lines)).stdout
    run = CliRunner().invoke
    local_dir = str(tmp_path / "local")
    ok(run(main, ["--data-dir", local_dir, "topics", "create", "melons", "--partitions", "4"]))
    local = ok(run(main, ["--data-dir", local_dir, "produce", "melons", "-K", "=", "-v"],
                   input=lines)).stdout  # fmt: skip
    assert network == local  # murmur2 of the key, offsets in input order
    assert len(network.splitlines()) == 20


# --------------------------------------------------------------------------------------------
# Read-only commands on a directory create nothing


def test_read_only_commands_create_and_change_nothing(tmp_path: Path) -> None:
    run = CliRunner().invoke
    missing = str(tmp_path / "missing")
    line = check_one_line_failure(run(main, ["topics", "list", "--data-dir", missing]), [2])
    assert "does not exist" in line
    assert not os.path.exists(missing)

    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (["topics", "list"], ["topics", "describe"], ["groups", "list"]):
        assert ok(run(main, [*args, "--data-dir", str(empty)])).stdout == ""
    assert list(empty.iterdir()) == []

    data = tmp_path / "data"
    ok(run(main, ["--data-dir", str(data), "topics", "create", "t", "--partitions", "2"]))
    ok(run(main, ["--data-dir", str(data), "produce", "t", "-p", "0"], input="a\nb\n"))
    for name in os.listdir(data):  # a partial directory: only the topics file and one log
        if name not in ("compactlog-topics.json", "t-0"):
            path = data / name
            if path.is_dir():
                for child in path.iterdir():
                    child.unlink()
                path.rmdir()
            else:
                path.unlink()
    before = tree(data)
    for args in (
        ["topics", "list"],
        ["topics", "describe"],
        ["configs", "describe", "t"],
        ["consume", "t"],
        ["consume", "t", "-J"],
        ["groups", "list"],
    ):
        ok(run(main, [*args, "--data-dir", str(data)]))
    assert tree(data) == before
    described = run(main, ["topics", "describe", "t", "--data-dir", str(data)]).stdout
    assert "Partition: 1\tLogStartOffset: 0\tLogEndOffset: 0" in described


def test_unknown_topics_get_a_did_you_mean_in_local_mode(tmp_path: Path) -> None:
    run = CliRunner().invoke
    data = str(tmp_path / "data")
    ok(run(main, ["--data-dir", data, "topics", "create", "orders"]))
    for args in (
        ["produce", "ordres"],
        ["consume", "ordres"],
        ["configs", "alter", "ordres", "--set", "retention.ms=1"],
        ["configs", "describe", "ordres"],
        ["topics", "describe", "ordres"],
        ["topics", "delete", "ordres"],
        ["delete-records", "ordres", "-p", "0", "--offset", "0"],
    ):
        line = check_one_line_failure(run(main, ["--data-dir", data, *args], input=""), [3])
        assert line == (
            "Error: unknown topic 'ordres' (did you mean 'orders'?) (UNKNOWN_TOPIC_OR_PARTITION)"
        ), args
