"""``compactlog serve`` with a wall clock that a test can step: R20's clock-jump nemesis.

Usage: ``python -m tests.broker.stepped_clock SKEW_FILE <compactlog arguments>``. The broker's
wall clock (every time decision of the store, the cleaner and the broker: timestamps, rolling,
retention, producer expiry) is the system's plus the milliseconds written in ``SKEW_FILE``,
re-read at most every 50 ms, as an NTP step would move it. The monotonic clock (timeouts, long
polls) is left alone, as a real clock step leaves it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from pathlib import Path

import compactlog.broker.server as broker_server
from compactlog.cli.main import main

REREAD_S = 0.05


class SteppedClock:
    """Epoch milliseconds, skewed by the integer in a file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.skew_ms = 0
        self._read_at = -REREAD_S
        self._lock = threading.Lock()

    def __call__(self) -> int:
        now = time.monotonic()
        with self._lock:
            if now - self._read_at >= REREAD_S:
                self._read_at = now
                # While the file is being rewritten, the last step stays.
                with contextlib.suppress(OSError, ValueError):
                    self.skew_ms = int(self.path.read_text().strip() or 0)
            skew = self.skew_ms
        return time.time_ns() // 1_000_000 + skew


if __name__ == "__main__":
    # The broker takes the store's system clock when it is given none.
    broker_server.system_clock = SteppedClock(Path(sys.argv[1]))
    main(sys.argv[2:])
