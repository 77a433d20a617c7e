"""Starting the broker for a test: in-process (:class:`Brokers`, over ``BrokerThread``), as a
``compactlog serve`` child process (:class:`CliBroker`, for the tests that kill it), or forked
from a warmed-up zygote (:class:`ForkedBroker`, for the tests that kill it hundreds of times).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.broker.helpers.clients import wait_until

#: Broker settings of every test broker: a new group waits 3 s for more members by default
#: (Kafka's ``group.initial.rebalance.delay.ms``); 100 ms keeps group tests short.
BROKER_CONFIG: dict[str, Any] = {"group.initial.rebalance.delay.ms": 100}


class Brokers:
    """Starts BrokerThreads over ``data_dir`` (the test's own) and stops them after the test."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.running: list[Any] = []

    def start(
        self, data_dir: Path | None = None, config: Mapping[str, Any] | None = None, **kw: Any
    ) -> Any:
        from compactlog.broker.server import BrokerThread

        thread = BrokerThread(
            data_dir or self.data_dir, config={**BROKER_CONFIG, **(config or {})}, **kw
        )
        started = thread.start()
        self.running.append(started)
        return started

    def stop(self, broker: Any) -> None:
        self.running.remove(broker)
        broker.stop()

    def restart(self, broker: Any, config: Mapping[str, Any] | None = None) -> Any:
        """Stop ``broker`` and start a new one on the same data directory (a new port)."""
        self.stop(broker)
        return self.start(Path(broker.broker.store.path), config)

    def stop_all(self) -> None:
        while self.running:
            self.stop(self.running[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class CliBroker:
    """``compactlog --data-dir DIR serve --listen 127.0.0.1:PORT`` as a child process.

    The port stays the same across restarts, so clients reconnect as to a restarted Kafka."""

    def __init__(
        self,
        data_dir: Path,
        config: Mapping[str, Any],
        log_path: Path,
        clock_file: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.config = {**BROKER_CONFIG, **config}
        #: With a file, the broker's wall clock is skewed by the milliseconds written in it
        #: (tests/broker/stepped_clock.py).
        self.clock_file = clock_file
        self.port = free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        exe = [os.path.join(os.path.dirname(sys.executable), "compactlog")]
        if self.clock_file is not None:
            exe = [sys.executable, "-m", "tests.broker.stepped_clock", str(self.clock_file)]
        cmd = [*exe, "--data-dir", str(self.data_dir), "serve", "--listen", self.bootstrap]
        for name, value in self.config.items():
            cmd += ["--config", f"{name}={value}"]
        return cmd

    def start(self, timeout: float = 60.0) -> CliBroker:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts}: {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"compactlog serve exited with {self.proc.returncode} on start "
                    f"{self.starts}:\n{self.log_tail()}"
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                return self
            if time.monotonic() > deadline:
                raise AssertionError(f"compactlog serve not listening after {timeout} s")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, as a process crash."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, a clean stop; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def status(self, field: str) -> int:
        """A ``/proc/<pid>/status`` figure in KiB (``VmRSS``, ``VmHWM``)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise KeyError(field)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# A "zygote" process imports compactlog and starts and stops one broker, once, then forks a broker
# per request: a restart then costs the store's recovery (milliseconds), not an interpreter start
# and the first start's lazy loading (about a second together), so R1 can restart it 200 times.
_ZYGOTE = r"""
import asyncio, json, os, signal, sys, tempfile
from compactlog.broker.server import Broker

async def serve(data_dir, port, config, warm_up=False):
    broker = Broker(data_dir, listen=("127.0.0.1", port), config=config)
    await broker.start()
    if warm_up:
        broker.store.create_topic("warm", 1)
        broker.store.append("warm", 0, [(b"k", b"v")])
        list(broker.store.read("warm", 0))
        await broker.stop()
        return
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: loop.create_task(broker.stop()))
    await broker.serve_forever()

with tempfile.TemporaryDirectory() as warm:
    asyncio.run(serve(warm, 0, {}, warm_up=True))
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # a killed broker is reaped at once
print("ready", flush=True)
for line in sys.stdin:
    data_dir, port, config = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            asyncio.run(serve(data_dir, port, config))
        finally:
            os._exit(0)
    print(pid, flush=True)
"""


class ForkedBroker:
    """The broker as a process forked from a warmed-up zygote (see above); the same port across
    restarts, as :class:`CliBroker`."""

    def __init__(self, data_dir: Path, config: Mapping[str, Any]) -> None:
        self.data_dir = data_dir
        self.config = {**BROKER_CONFIG, **config}
        self.port = free_port()
        self.pid: int | None = None
        self.zygote = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.zygote.stdout is not None
        ready = self.zygote.stdout.readline()
        assert ready == b"ready\n", f"the zygote did not start: {ready!r}"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def start(self, timeout: float = 60.0) -> ForkedBroker:
        assert not self.alive(), "already running"
        assert self.zygote.stdin is not None and self.zygote.stdout is not None
        request = [str(self.data_dir), self.port, self.config]
        self.zygote.stdin.write(json.dumps(request).encode() + b"\n")
        self.zygote.stdin.flush()
        self.pid = int(self.zygote.stdout.readline())
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise AssertionError("the forked broker exited while starting")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                return self
            if time.monotonic() > deadline:
                raise AssertionError(f"the forked broker was not listening after {timeout} s")
            time.sleep(0.005)

    def _signal_and_wait(self, sig: int, timeout: float) -> None:
        assert self.pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)
        wait_until(lambda: not self.alive(), f"broker pid {self.pid} to exit", timeout)

    def kill(self) -> None:
        """SIGKILL, as a process crash."""
        self._signal_and_wait(signal.SIGKILL, 30)

    def terminate(self) -> None:
        """SIGTERM: a clean stop."""
        self._signal_and_wait(signal.SIGTERM, 60)

    def stop(self) -> None:
        """Stop the broker (cleanly when it can) and the zygote."""
        if self.alive():
            try:
                self.terminate()
            except AssertionError:
                self.kill()
        if self.zygote.poll() is None:
            assert self.zygote.stdin is not None
            self.zygote.stdin.close()
            self.zygote.wait(30)
        if self.zygote.stdout is not None:
            self.zygote.stdout.close()
