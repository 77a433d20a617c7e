"""R1: SIGKILL a process that appends, at random times, and restart it (CI tier: 200 kill points
under each durability policy).

The child (a fork, so no interpreter start-up per kill point) appends batches of consecutive
integers and reports each acknowledged offset through a pipe. The parent kills it at a uniformly
random moment, reopens the store (which recovers it), and checks: no acknowledged record lost,
every record's value equals its offset (the log is a prefix of the written sequence: no hole, no
duplicate), restart always succeeds, and appends resume at the recovered log end offset.
"""

from __future__ import annotations

import os
import random
import signal
import struct
import time
import warnings
from pathlib import Path

import pytest

from compactlog.storage.store import Store

POLICIES = {
    "P-sync": {"flush.messages": 1},  # fsync before every acknowledgement
    "P-kafka": {},  # Kafka's defaults: no forced fsync
}


def _child(data: Path, seed: int, ack_fd: int) -> None:
    rng = random.Random(seed)
    store = Store.open(data)
    next_value = store.log_end_offset("t", 0)
    while True:
        count = rng.randint(1, 20)
        records = [(b"k", b"%d" % (next_value + i)) for i in range(count)]
        base = store.append("t", 0, records)
        assert base == next_value
        next_value += count
        os.write(ack_fd, struct.pack(">q", next_value - 1))


def _acked(read_fd: int) -> int:
    last = -1
    while True:
        chunk = os.read(read_fd, 1 << 16)
        if not chunk:
            return last
        usable = len(chunk) - len(chunk) % 8
        if usable:
            (last,) = struct.unpack_from(">q", chunk, usable - 8)


@pytest.mark.slow
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_r1_kill_during_append(tmp_path: Path, policy: str) -> None:
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    data = tmp_path / "data"
    with Store.open(data) as store:
        store.create_topic("t", 1, {"segment.bytes": 20_000, **POLICIES[policy]})
    verified = 0
    max_acked = -1
    for kill in range(200):
        read_fd, write_fd = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            pid = os.fork()
        if pid == 0:  # the child: append until killed
            os.close(read_fd)
            try:
                _child(data, seed + kill, write_fd)
            finally:
                os._exit(1)
        os.close(write_fd)
        time.sleep(rng.uniform(0.0, 0.03))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        max_acked = max(max_acked, _acked(read_fd))
        os.close(read_fd)
        context = f"seed {seed}, kill point {kill}, policy {policy}"
        with Store.open(data) as store:  # restart must succeed every time
            end = store.log_end_offset("t", 0)
            assert end > max_acked, f"acknowledged offset {max_acked} lost ({context})"
            tail = [(r.offset, r.value) for r in store.read("t", 0, verified)]
            assert tail == [(o, b"%d" % o) for o in range(verified, end)], context
            verified = end
            assert store.append("t", 0, [(b"k", b"%d" % end)]) == end, context
            verified = end + 1
    with Store.open(data) as store:
        values = [r.value for r in store.read("t", 0)]
        assert values == [b"%d" % i for i in range(len(values))], f"seed {seed}"
        assert len(values) > 200
