"""The operator's surface of a running broker: ``compactlog serve``'s log (refused requests with
Kafka's error names, the cleaner's summaries, ``--log-file``) and the HTTP admin routes (roll),
loopback-only unless ``--admin-allow-remote-unauthenticated``."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compactlog import errors as c
from compactlog.broker.admin import AdminRoutes, is_loopback
from compactlog.broker.server import BrokerThread
from compactlog.cli.main import main
from compactlog.storage.store import Store
from tests.broker.helpers.clients import wait_until
from tests.broker.helpers.server import free_port
from tests.broker.helpers.wire import (
    CREATE_TOPICS,
    PRODUCE,
    Wire,
    create_topics_body,
    parse_create_topics_response,
    parse_produce_response,
    produce_body,
)
from tests.broker.test_server_basics import batch, create_topic, start_broker

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

COMPACTLOG = os.path.join(os.path.dirname(sys.executable), "compactlog")
#: Kafka's log4j layout: ``[time] LEVEL message (logger)``.
LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] (DEBUG|INFO|WARNING|ERROR) ")


def _post(url: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


class _Serve:
    """``compactlog serve`` with --metrics and --log-file; stderr goes to its own file."""

    def __init__(self, tmp_path: Path, *extra: str, metrics_host: str = "127.0.0.1") -> None:
        self.port, self.metrics_port = free_port(), free_port()
        self.log_file = tmp_path / "server.log"
        self.stderr_path = tmp_path / "stderr.txt"
        self.log_file.write_text("a line from before\n")  # to be appended to, never truncated
        cmd = [
            COMPACTLOG, "--data-dir", str(tmp_path / "data"), "serve",
            "--listen", f"127.0.0.1:{self.port}",
            "--metrics", f"{metrics_host}:{self.metrics_port}",
            "--log-file", str(self.log_file),
            "--config", "log.cleaner.backoff.ms=100", *extra,
        ]  # fmt: skip
        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        wait_until(lambda: "listening on" in self.stderr(), "compactlog serve to listen", 60)

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout=30)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[_Serve]:
    s = _Serve(tmp_path)
    try:
        yield s
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(timeout=30)


def test_serve_logs_refusals_and_cleaner_summaries_to_stderr_and_the_log_file(
    served: _Serve,
) -> None:
    """A produce refused with RECORD_LIST_TOO_LARGE leaves a line naming the partition, the
    client and the error; a refused CreateTopics too; the cleaner's summary block is logged;
    stderr and --log-file get the same lines, in Kafka's layout."""
    compacted = {"cleanup.policy": "compact", "segment.bytes": "1024"}
    with Wire(f"127.0.0.1:{served.port}") as wire:
        created = parse_create_topics_response(
            wire.request(CREATE_TOPICS, 2, create_topics_body([("t", 1)], compacted))
        )
        assert created == {"t": c.NONE}
        again = parse_create_topics_response(
            wire.request(CREATE_TOPICS, 2, create_topics_body([("t", 1)], compacted))
        )
        assert again == {"t": c.TOPIC_ALREADY_EXISTS}
        big = batch([(b"k", b"x" * 2000)])  # larger than segment.bytes
        refused = parse_produce_response(wire.request(PRODUCE, 7, produce_body({("t", 0): big})))
        assert refused[("t", 0)][0] == c.RECORD_LIST_TOO_LARGE
        for round_ in range(12):  # ~170-byte batches: a segment rolls every few of them
            records = [(b"key-%d" % i, b"value-%d-%d" % (round_, i)) for i in range(4)]
            sent = produce_body({("t", 0): batch(records)})
            assert parse_produce_response(wire.request(PRODUCE, 7, sent))[("t", 0)][0] == 0
    wait_until(lambda: "Log cleaner thread 0 cleaned log t-0" in served.stderr(),
               "the cleaner's summary in the broker's log", 60)  # fmt: skip
    assert served.stop() == 0
    stderr = served.stderr()
    logged = served.log_file.read_text()
    assert logged.startswith("a line from before\n")
    assert logged.removeprefix("a line from before\n") == stderr
    produce_line = next(line for line in stderr.splitlines() if "RECORD_LIST_TOO_LARGE" in line)
    assert LOG_LINE.match(produce_line), produce_line
    assert " INFO Produce request with correlation id 3 from client 'raw-wire' (127.0.0.1:" in (
        produce_line
    )
    assert "on partition t-0 failed due to RECORD_LIST_TOO_LARGE: " in produce_line
    assert "segment.bytes=1024" in produce_line and produce_line.endswith("(compactlog.broker)")
    assert re.search(
        r"INFO CreateTopics request with correlation id 2 from client 'raw-wire' "
        r"\(127\.0\.0\.1:\d+\) for topic t failed due to TOPIC_ALREADY_EXISTS",
        stderr,
    ), stderr
    # Kafka's LogCleaner INFO block, continuation lines and all.
    assert re.search(r"INFO \n\tLog cleaner thread 0 cleaned log t-0 \(dirty section = ", stderr)
    assert "\tIndexed " in stderr and "(compactlog.cleaner)" in stderr
    for line in stderr.splitlines():
        assert not line.startswith(("warning: ", "info: ")), f"a line logged twice: {line}"


def test_serve_refuses_a_log_file_it_cannot_open(tmp_path: Path) -> None:
    done = subprocess.run(
        [COMPACTLOG, "--data-dir", str(tmp_path / "data"), "serve", "--listen", "127.0.0.1:0",
         "--log-file", str(tmp_path / "no-such-dir" / "server.log")],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("Error: cannot open the log file ")
    assert "No such file or directory" in done.stderr and "Traceback" not in done.stderr


def test_admin_roll_route_on_a_running_serve(served: _Serve, tmp_path: Path) -> None:
    admin = f"http://127.0.0.1:{served.metrics_port}"
    with Wire(f"127.0.0.1:{served.port}") as wire:
        body = create_topics_body([("r", 2)], {"cleanup.policy": "compact"})
        assert parse_create_topics_response(wire.request(CREATE_TOPICS, 2, body)) == {"r": 0}
        sent = produce_body({("r", 0): batch([(b"a", b"1"), (b"b", b"2")])})
        assert parse_produce_response(wire.request(PRODUCE, 7, sent))[("r", 0)][0] == 0
    status, doc = _post(f"{admin}/v1/topics/r/partitions/0/roll")
    assert (status, doc) == (
        200,
        {"partitions": [{"topic": "r", "partition": 0, "rolled": True, "log_end_offset": 2}]},
    )
    assert sorted(os.listdir(tmp_path / "data" / "r-0")).count("00000000000000000002.log") == 1
    status, doc = _post(f"{admin}/v1/topics/r/roll")  # every partition; both active are empty
    assert status == 200
    assert [(p["partition"], p["rolled"]) for p in doc["partitions"]] == [(0, False), (1, False)]
    status, doc = _post(f"{admin}/v1/topics/nope/partitions/0/roll")
    assert status == 404 and doc["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    status, doc = _post(f"{admin}/v1/topics/r/partitions/7/roll")
    assert status == 404 and "has no partition 7" in doc["message"]
    with pytest.raises(urllib.error.HTTPError) as get:
        urllib.request.urlopen(f"{admin}/v1/topics/r/roll", timeout=10)
    assert get.value.code == 405
    get.value.close()
    with urllib.request.urlopen(f"{admin}/metrics", timeout=10) as response:
        assert b'kafka_log_log_numlogsegments{partition="0",topic="r"} 2.0' in response.read()
    verified = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), "verify"])
    assert verified.exit_code == 0, verified.output
    assert f"note: {tmp_path / 'data'}: held by process {served.proc.pid} " in verified.output
    assert served.stop() == 0
    assert "INFO admin: rolled r-0; the new active segment starts at offset 2" in served.stderr()
    assert "INFO admin: r-1 not rolled: its active segment (offset 0) is empty" in served.stderr()


def test_admin_routes_answer_loopback_clients_only_unless_allowed(tmp_path: Path) -> None:
    with Store.open(tmp_path / "data") as store:
        store.create_topic("t", 1)
        store.append("t", 0, [(b"k", b"v", ())])
        closed = AdminRoutes(lambda: store)
        refused = closed.answer("POST", "/v1/topics/t/partitions/0/roll", "192.0.2.7")
        assert refused.status == "403 Forbidden"
        assert json.loads(refused.body)["error"] == "CLUSTER_AUTHORIZATION_FAILED"
        assert b"--admin-allow-remote-unauthenticated" in refused.body
        assert len(store.segments("t", 0)) == 1
        opened = AdminRoutes(lambda: store, allow_remote=True)
        assert opened.answer("POST", "/v1/topics/t/partitions/0/roll", "192.0.2.7").status == (
            "200 OK"
        )
        assert len(store.segments("t", 0)) == 2
    assert is_loopback("127.0.0.1") and is_loopback("127.3.2.1") and is_loopback("::1")
    assert is_loopback("::ffff:127.0.0.1")
    assert not is_loopback("10.0.0.1") and not is_loopback("localhost") and not is_loopback("")


def test_refusals_of_other_apis_are_logged_with_kafka_error_names(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server: BrokerThread = start_broker(tmp_path / "data")
    try:
        with caplog.at_level(logging.INFO, logger="compactlog.broker"):
            with Wire(server.bootstrap) as wire:
                for _ in range(2):
                    wire.request(CREATE_TOPICS, 2, create_topics_body([("dup", 1)]))
                refused = produce_body({("missing", 0): batch([(b"k", b"v")])})
                result = parse_produce_response(wire.request(PRODUCE, 7, refused))
                assert result[("missing", 0)][0] == c.UNKNOWN_TOPIC_OR_PARTITION
            deadline = time.monotonic() + 5
            while "UNKNOWN_TOPIC_OR_PARTITION" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        server.stop()
    lines = [r for r in caplog.records if "failed due to" in r.getMessage()]
    assert [
        (r.levelname, r.getMessage().split(" failed due to ")[1].split(":")[0]) for r in lines
    ] == [
        ("INFO", "TOPIC_ALREADY_EXISTS"),
        ("INFO", "UNKNOWN_TOPIC_OR_PARTITION"),
    ]
    assert "on partition missing-0" in lines[1].getMessage()


def test_response_errors_name_where_each_error_is() -> None:
    from compactlog.broker.refusals import response_errors
    from compactlog.protocol.messages import (
        DescribeGroupsResponse,
        FetchResponse,
        OffsetCommitResponse,
    )

    fetch = FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            {
                "topic": "t",
                "partitions": [
                    {"partition_index": 0, "error_code": 0},
                    {"partition_index": 1, "error_code": c.OFFSET_OUT_OF_RANGE},
                ],
            }
        ],
    )
    assert list(response_errors(fetch)) == [(" on partition t-1", c.OFFSET_OUT_OF_RANGE, None)]
    commit = OffsetCommitResponse(
        topics=[{"name": "u", "partitions": [{"partition_index": 3, "error_code": 25}]}]
    )
    assert list(response_errors(commit)) == [(" on partition u-3", 25, None)]
    groups = DescribeGroupsResponse(groups=[{"group_id": "g", "error_code": c.NOT_COORDINATOR}])
    assert list(response_errors(groups)) == [(" for group g", c.NOT_COORDINATOR, None)]


def _non_loopback_address() -> str | None:
    """An IPv4 address of this host other than loopback (None if it has none)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the source address
        except OSError:
            return None
        address = str(s.getsockname()[0])
    return None if is_loopback(address) or address == "0.0.0.0" else address


def test_admin_routes_refuse_a_remote_client_unless_the_flag_names_the_risk(
    tmp_path: Path,
) -> None:
    remote = _non_loopback_address()
    if remote is None:
        pytest.skip("this host has no address other than loopback")
    server = start_broker(tmp_path / "data", metrics_listen=("0.0.0.0", 0))
    try:
        create_topic(server, "t")
        port = server.broker.metrics_port
        status, doc = _post(f"http://{remote}:{port}/v1/topics/t/partitions/0/roll")
        assert status == 403 and doc["error"] == "CLUSTER_AUTHORIZATION_FAILED"
        status, _ = _post(f"http://127.0.0.1:{port}/v1/topics/t/partitions/0/roll")
        assert status == 200
        with urllib.request.urlopen(f"http://{remote}:{port}/metrics", timeout=10) as response:
            assert response.status == 200  # the metrics stay open to every scraper
    finally:
        server.stop()
    served = _Serve(tmp_path, "--admin-allow-remote-unauthenticated", metrics_host="0.0.0.0")
    try:
        assert "answer every client (--admin-allow-remote-unauthenticated" in served.stderr()
        with Wire(f"127.0.0.1:{served.port}") as wire:
            body = create_topics_body([("t2", 1)])
            assert parse_create_topics_response(wire.request(CREATE_TOPICS, 2, body)) == {"t2": 0}
        status, _ = _post(f"http://{remote}:{served.metrics_port}/v1/topics/t2/roll")
        assert status == 200
    finally:
        assert served.stop() == 0


def test_a_client_cannot_forge_log_lines(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Topic names, client ids and messages come from the client: control characters are
    escaped, so a newline cannot start a line of its own in the broker's log."""
    server: BrokerThread = start_broker(tmp_path / "data")
    try:
        with caplog.at_level(logging.INFO, logger="compactlog.broker"):
            with Wire(server.bootstrap) as wire:
                forged = "x\n[2026-01-01 00:00:00,000] ERROR forged"
                body = produce_body({(forged, 0): batch([(b"k", b"v")])})
                result = parse_produce_response(wire.request(PRODUCE, 7, body))
                assert result[(forged, 0)][0] == c.INVALID_TOPIC_EXCEPTION
            wait_until(lambda: "forged" in caplog.text, "the refusal's line", 5)
    finally:
        server.stop()
    (line,) = [r.getMessage() for r in caplog.records if "forged" in r.getMessage()]
    assert "\n" not in line and "on partition x\\n[2026-01-01 00:00:00,000] ERROR forged-0" in line


def test_the_remote_admin_flag_needs_the_metrics_listener(tmp_path: Path) -> None:
    done = subprocess.run(
        [COMPACTLOG, "--data-dir", str(tmp_path / "data"), "serve", "--listen", "127.0.0.1:0",
         "--admin-allow-remote-unauthenticated"],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "needs --metrics HOST:PORT" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()


def test_the_log_file_is_reopened_after_logrotate_moves_it(served: _Serve) -> None:
    rotated = served.log_file.with_suffix(".log.1")
    served.log_file.rename(rotated)
    with Wire(f"127.0.0.1:{served.port}") as wire:
        body = create_topics_body([("after-rotation", 1)])
        assert parse_create_topics_response(wire.request(CREATE_TOPICS, 2, body)) == {
            "after-rotation": 0
        }
    wait_until(served.log_file.exists, "a new log file", 10)
    assert served.stop() == 0
    assert "created topic after-rotation" in served.log_file.read_text()
    assert "listening on" in rotated.read_text()
    assert "after-rotation" not in rotated.read_text()
