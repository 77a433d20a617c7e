"""The data directory's lock keeps out every other holder: another compactlog store (flock) and
a Kafka broker, whose ``FileChannel.tryLock`` is a POSIX record lock that Linux keeps apart from
flock. The Kafka tier checks the same against a real Kafka broker
(tests/kafka/test_lock_vs_kafka.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from compactlog.errors import StorageError
from compactlog.storage.datadir import LOCK_FILE, DataDirLock
from compactlog.storage.store import Store

_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
(fcntl.lockf if sys.argv[2] == "record" else fcntl.flock)(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
sys.stdin.read()
"""


@contextmanager
def _held_by_another_process(data: Path, kind: str) -> Iterator[None]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(data / LOCK_FILE), kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.stdin.close()
        holder.wait(10)
        holder.stdout.close()


def _snapshot(data: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data)): p.read_bytes() for p in data.rglob("*") if p.is_file()}


@pytest.mark.parametrize("kind", ["record", "flock"])
def test_a_directory_locked_by_another_process_does_not_open(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    with Store.open(data) as store:
        store.create_topic("t", 1)
        store.append("t", 0, [(b"k", b"v")])
    before = _snapshot(data)
    with _held_by_another_process(data, kind):
        with pytest.raises(StorageError, match="in use by another process") as refused:
            Store.open(data)
        assert isinstance(refused.value.__cause__, BlockingIOError)
        if kind == "record":
            assert "record lock" in str(refused.value)
    assert _snapshot(data) == before
    with Store.open(data) as store:  # the holder is gone: free again
        assert [r.value for r in store.read("t", 0, 0)] == [b"v"]


def test_a_held_directory_refuses_a_second_holder_in_the_same_process(tmp_path: Path) -> None:
    with DataDirLock(tmp_path).acquire() as lock:
        assert lock.held
        with pytest.raises(StorageError, match="in use by another process"):
            DataDirLock(tmp_path).acquire()
    with DataDirLock(tmp_path) as again:
        assert again.held


def test_the_record_lock_is_taken_and_released(tmp_path: Path) -> None:
    """While a store is open another process cannot take the record lock Kafka would take."""
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "try:\n    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n"
        "    sys.exit(3)\n"
    )
    command = [sys.executable, "-c", probe, str(tmp_path / LOCK_FILE)]
    with Store.open(tmp_path):
        assert subprocess.run(command, check=False).returncode == 3
    assert subprocess.run(command, check=False).returncode == 0
