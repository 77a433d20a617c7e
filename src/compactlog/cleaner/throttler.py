"""The cleaner's I/O throttler (spec 5.12): one per cleaner, shared by its threads.

Every chunk read (while building the map and while copying) and every chunk written is
reported. Once more than ``check_interval_ms`` have passed since the period began and the
observed rate is above the limit, the caller sleeps just long enough to bring the rate down,
and a new period starts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

CHECK_INTERVAL_MS = 300
UNLIMITED = 1.7976931348623157e308


class Throttler:
    def __init__(
        self,
        bytes_per_second: float = UNLIMITED,
        *,
        check_interval_ms: int = CHECK_INTERVAL_MS,
        monotonic_ms: Callable[[], float] = lambda: time.monotonic() * 1000.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self.check_interval_ms = check_interval_ms
        self._now = monotonic_ms
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = monotonic_ms()
        self._observed = 0.0
        self.slept_ms = 0.0

    def maybe_throttle(self, observed: float) -> None:
        if self.bytes_per_second >= UNLIMITED:
            return
        with self._lock:
            self._observed += observed
            now = self._now()
            elapsed = now - self._period_start
            if elapsed <= self.check_interval_ms:
                return
            rate = self._observed / elapsed * 1000.0
            if rate > self.bytes_per_second:
                sleep_ms = round(self._observed / (self.bytes_per_second / 1000.0) - elapsed)
                if sleep_ms > 0:
                    self._sleep(sleep_ms / 1000.0)
                    self.slept_ms += sleep_ms
            self._period_start = self._now()
            self._observed = 0.0
