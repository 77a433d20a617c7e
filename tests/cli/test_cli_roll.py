"""``compactlog roll``: on a stopped data directory through the store, and on a running broker
through its admin routes (``--admin-url``); the rolled data becomes cleanable."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import Cli, check_one_line_failure
from click.testing import CliRunner

from compactlog.broker.server import BrokerThread
from compactlog.cli.main import main
from compactlog.storage.store import Store


def _segments(data: Path, partition_dir: str) -> list[str]:
    return sorted(n for n in os.listdir(data / partition_dir) if n.endswith(".log"))


def _topic(data: Path, name: str = "fruit", partitions: int = 2, records: int = 3) -> None:
    with Store.open(data) as store:
        store.create_topic(name, partitions, {"cleanup.policy": "compact"})
        store.append(name, 0, [(b"k%d" % (i % 2), b"v%d" % i, ()) for i in range(records)])


def test_roll_a_stopped_directory_then_the_cleaner_has_work(cli: Cli) -> None:
    _topic(cli.data_dir)
    status = cli.ok("cleaner-status").stdout
    waiting = cli.ok("clean", "fruit", "-p", "0").stdout
    assert waiting.splitlines()[1].startswith(
        "fruit-0: offsets 0 to 2 are in the active segment, which is never cleaned; to make them "
        "cleanable, roll it ('compactlog roll fruit -p 0'; add --admin-url while a broker runs)"
    )
    result = cli.ok("roll", "fruit")
    assert result.stdout.splitlines() == [
        "fruit-0: rolled; the new active segment starts at 3",
        "fruit-1: not rolled; the active segment is empty (it starts at the log end offset 0)",
    ]
    assert _segments(cli.data_dir, "fruit-0") == [
        "00000000000000000000.log",
        "00000000000000000003.log",
    ]
    assert cli.ok("cleaner-status").stdout != status  # the rolled segment is now cleanable
    again = cli.ok("roll", "fruit", "-p", "0")
    assert again.stdout == (
        "fruit-0: not rolled; the active segment is empty (it starts at the log end offset 3)\n"
    )
    cli.ok("clean", "fruit")
    assert "in the active segment" not in cli.ok("clean", "fruit", "-p", "0").stdout
    with Store.open(cli.data_dir) as store:
        assert [(r.offset, r.value) for r in store.read("fruit", 0)] == [(1, b"v1"), (2, b"v2")]


def test_roll_refuses_unknown_topics_and_partitions(cli: Cli) -> None:
    _topic(cli.data_dir)
    line = check_one_line_failure(cli("roll", "fruits"), [2])
    assert line == "Error: unknown topic 'fruits' (UNKNOWN_TOPIC_OR_PARTITION)"
    line = check_one_line_failure(cli("roll", "fruit", "-p", "5"), [2])
    assert "has no partition 5 (it has 2)" in line
    check_one_line_failure(cli("roll", "bad/name"), [2])
    check_one_line_failure(cli("roll", "fruit", "-p", "-1"), [2])


def test_roll_creates_nothing_where_there_is_no_directory(cli: Cli) -> None:
    line = check_one_line_failure(cli("roll", "fruit"), [2])
    assert "does not exist" in line
    assert not cli.data_dir.exists()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[BrokerThread]:
    data = tmp_path / "data"
    _topic(data)
    broker = BrokerThread(data, metrics_listen=("127.0.0.1", 0)).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.mark.broker
def test_roll_a_running_broker_through_its_admin_url(served: BrokerThread, cli: Cli) -> None:
    line = check_one_line_failure(cli("roll", "fruit"), [3])
    assert "is in use by another process" in line and "--admin-url http://HOST:PORT" in line
    url = f"http://127.0.0.1:{served.broker.metrics_port}"
    result = cli.ok("roll", "fruit", "-p", "0", "--admin-url", url)
    assert result.stdout == "fruit-0: rolled; the new active segment starts at 3\n"
    assert _segments(cli.data_dir, "fruit-0")[-1] == "00000000000000000003.log"
    result = cli.ok("roll", "fruit", "--admin-url", url + "/")
    assert result.stdout.count("not rolled") == 2
    line = check_one_line_failure(cli("roll", "nope", "--admin-url", url), [2])
    assert line == "Error: unknown topic 'nope' (UNKNOWN_TOPIC_OR_PARTITION)"
    line = check_one_line_failure(cli("roll", "fruit", "-p", "9", "--admin-url", url), [2])
    assert "has no partition 9" in line


@pytest.mark.broker
def test_roll_admin_url_errors_are_one_line(cli: Cli) -> None:
    line = check_one_line_failure(cli("roll", "fruit", "--admin-url", "127.0.0.1:9"), [2])
    assert "expected http://HOST:PORT" in line
    # A port nothing listens on (the discard port on loopback): refused at once.
    line = check_one_line_failure(cli("roll", "fruit", "--admin-url", "http://127.0.0.1:9"), [3])
    assert "cannot reach the broker's admin routes at http://127.0.0.1:9" in line


def test_roll_through_bootstrap_server_names_the_admin_url(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["roll", "fruit", "--bootstrap-server", "127.0.0.1:9092"], catch_exceptions=False
    )
    assert result.exit_code == 2
    assert "Kafka has no request to roll a segment" in result.output
    assert "--admin-url" in result.output
