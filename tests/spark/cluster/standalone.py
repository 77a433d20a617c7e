"""A Spark standalone cluster on 127.0.0.1: a master and workers, each its own JVM.

Started from the jars PySpark ships (``$SPARK_HOME`` is pyspark's package directory, whose
``bin/spark-class`` runs ``org.apache.spark.deploy.master.Master`` and ``...worker.Worker``),
the way ``sbin/start-master.sh`` and ``start-worker.sh`` do but in the foreground, so that each
JVM is a child process of the test run, in its own process group, with its log in the
cluster's directory. A worker starts executors as its own children (same process group), and
each executor its Python workers; :meth:`SparkCluster.stop` kills the groups and then every
process still running in the cluster's directory, so no JVM or Python worker outlives a test.

Nothing here sees the test's Python: the JVMs get a minimal ``PATH`` (no virtual environment)
and no ``PYTHONPATH``, so an executor runs Python only as the application's configuration
says (``spark.pyspark.python`` and ``spark.archives``), as on a real cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

#: The JVMs' PATH: the system's directories only (java is found there), never a venv's ``bin``.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Heap of the master's and each worker's own JVM (Spark's scripts default to 1 GiB).
DAEMON_MEMORY = "256m"
#: What each worker offers its executors: one core (the machine has two) and 512 MiB.
WORKER_CORES = 1
WORKER_MEMORY = "512m"
START_TIMEOUT = 120.0


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def jvm_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the cluster's processes and of a driver: Spark's, without the
    test's Python (no PYTHONPATH, no venv on PATH, no PYSPARK_* choice of interpreter)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYSPARK_", "SPARK_", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(
        PATH=SYSTEM_PATH,
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
        SPARK_NO_DAEMONIZE="1",
    )
    env.update(extra or {})
    return env


class SparkCluster:
    """A master and ``workers`` workers under ``root`` (logs, work directories)."""

    def __init__(self, root: Path, workers: int = 2, worker_memory: str = WORKER_MEMORY) -> None:
        self.root = root
        self.workers = workers
        self.worker_memory = worker_memory
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.started_secs = 0.0

    # --- starting ---------------------------------------------------------------------------

    def _spawn(self, name: str, args: Sequence[str]) -> None:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the child keeps it
        with log:
            process = subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=jvm_env(),
                cwd=self.root,
                start_new_session=True,  # its own process group: killed whole at the end
            )
        self.processes.append((name, process))

    def start(self) -> None:
        started = time.monotonic()
        self.root.mkdir(parents=True, exist_ok=True)
        self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1",
                "--port", str(self.port),
                "--webui-port", str(self.ui_port),
            ],
        )  # fmt: skip
        for n in range(self.workers):
            work = self.root / f"worker-{n}"
            work.mkdir(exist_ok=True)
            self._spawn(
                f"worker-{n}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1",
                    "--webui-port", str(free_port()),
                    "--cores", str(WORKER_CORES),
                    "--memory", self.worker_memory,
                    "--work-dir", str(work),
                    self.url,
                ],
            )  # fmt: skip
        self._wait_for_workers()
        self.started_secs = time.monotonic() - started

    def state(self) -> dict[str, object]:
        """The master's own view (its web UI's ``/json``)."""
        url = f"http://127.0.0.1:{self.ui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as response:
            state: dict[str, object] = json.load(response)
            return state

    def _wait_for_workers(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        alive = 0
        while time.monotonic() < deadline:
            for name, process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"the cluster's {name} exited ({process.returncode})")
            with contextlib.suppress(OSError, ValueError):
                alive = int(self.state().get("aliveworkers", 0))  # type: ignore[call-overload]
                if alive == self.workers:
                    return
            time.sleep(0.5)
        raise RuntimeError(f"{alive} of {self.workers} workers registered in {START_TIMEOUT} s")

    # --- stopping ---------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Kill every process of the cluster; the processes that had to be killed after the
        JVMs were gone (orphans: there should be none), as ``pid cmdline`` lines."""
        for _, process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for _, process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=15)
        # Executors are the workers' children (their group), Python workers the executors'; a
        # PySpark daemon leaves its group but exits when its executor's pipe closes. Wait for
        # that, then kill what is left in the cluster's directories.
        deadline = time.monotonic() + 15
        while (left := self.leftovers()) and time.monotonic() < deadline:
            time.sleep(0.5)
        orphans = []
        for pid, cmdline in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                orphans.append(f"{pid} {cmdline}")
        return orphans

    def leftovers(self) -> list[tuple[int, str]]:
        """Live processes whose working directory is inside the cluster's directory."""
        root = str(self.root.resolve())
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                cwd = os.readlink(f"/proc/{entry.name}/cwd")
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    zombie = f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
            except OSError:
                continue
            if not zombie and (cwd == root or cwd.startswith(root + os.sep)):
                found.append((int(entry.name), cmdline))
        return found

    # --- diagnosis --------------------------------------------------------------------------

    def logs(self, tail: int = 60) -> Iterator[str]:
        """The last ``tail`` lines of every log of the cluster: the daemons' and each
        executor's (``worker-N/app-*/ID/stderr``)."""
        paths = sorted(self.root.glob("*.log")) + sorted(self.root.glob("worker-*/app-*/*/std*"))
        for path in paths:
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            yield f"===== {path.relative_to(self.root)} (last {len(lines)} lines)"
            yield from lines
