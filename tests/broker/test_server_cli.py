"""``compactlog serve`` as a process: it logs where it listens, serves, and stops cleanly on
SIGTERM and SIGINT; bad settings and a busy address are one-line errors with exit code 2."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compactlog import errors as c
from compactlog.protocol.messages import ApiVersionsRequest
from tests.broker.test_server_basics import API_VERSIONS, Client, metadata

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]

COMPACTLOG = os.path.join(os.path.dirname(sys.executable), "compactlog")
LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+) .*metrics on port (\d+)")


def serve(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    cmd = [COMPACTLOG, "--data-dir", str(data_dir), "serve", "--listen", "127.0.0.1:0", *args]
    return subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)


def wait_listening(proc: subprocess.Popen[str]) -> tuple[int, int, list[str]]:
    assert proc.stderr is not None
    lines = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        found = LISTENING.search(line)
        if found:
            return int(found.group(1)), int(found.group(2)), lines
    proc.kill()
    raise AssertionError(f"no 'listening' line; stderr: {''.join(lines)}")


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_serve_starts_serves_and_stops_cleanly_on_a_signal(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    data_dir = tmp_path / "data"
    proc = serve(
        data_dir,
        "--metrics",
        "127.0.0.1:0",
        "--advertise",
        "localhost:0",
        "--config",
        "offsets.topic.num.partitions=1",
        "--config",
        "num.partitions=2",
    )
    try:
        port, metrics_port, _ = wait_listening(proc)
        with Client(port) as client:
            assert client.call(API_VERSIONS, 0, ApiVersionsRequest()).error_code == c.NONE
            response = metadata(client, ["auto"])
            assert [(b.host, b.port) for b in response.brokers] == [("localhost", port)]
            assert len(response.topics[0].partitions) == 2
        with socket.create_connection(("127.0.0.1", metrics_port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            assert s.recv(20).startswith(b"HTTP/1.0 200")
        proc.send_signal(stop_signal)
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None
        rest = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    assert "stopped; the data directory" in rest and "closed cleanly" in rest
    assert (data_dir / ".kafka_cleanshutdown").exists()
    assert (data_dir / "auto-1").is_dir()


def test_serve_refuses_an_unknown_setting(tmp_path: Path) -> None:
    done = subprocess.run(
        [COMPACTLOG, "--data-dir", str(tmp_path / "d"), "serve", "--config", "bogus.name=1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("Error: Unknown broker config name: bogus.name")
    )
    assert "Traceback" not in done.stderr


def test_serve_refuses_a_busy_address(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                COMPACTLOG,
                "--data-dir",
                str(tmp_path / "d"),
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert f"Error: cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("bad", ["nohost", "host:port", "h:70000"])
def test_serve_refuses_a_bad_address(tmp_path: Path, bad: str) -> None:
    done = subprocess.run(
        [COMPACTLOG, "--data-dir", str(tmp_path / "d"), "serve", "--listen", bad],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "expected HOST:PORT" in done.stderr
