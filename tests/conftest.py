"""Fixtures shared by every test tier."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog.storage.store import Store
from tests.managed import close_managed, open_managed


class ManualClock:
    """An injected clock (epoch ms) that only moves when a test moves it."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def open_store(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., Store]]:
    """``open_store(**kwargs)`` opens a Store on ``tmp_path/data`` with the manual clock, under a
    :class:`LogManager` (:func:`manager_of` gives it: cleaning goes through the manager)."""
    opened: list[Store] = []

    def factory(path: Path | None = None, **kwargs: Any) -> Store:
        kwargs.setdefault("clock", clock)
        store = open_managed(path or tmp_path / "data", **kwargs)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        close_managed(store)


def open_files_under(path: Path) -> list[str]:
    """Files under ``path`` this process holds open (Linux ``/proc/self/fd``; else none)."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return []
    held = []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed while we looked (the listing's own descriptor)
        if target.startswith(str(path) + os.sep):
            held.append(target)
    return held


@pytest.fixture(autouse=True)
def _no_file_left_open(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test's files are all closed once its fixtures are torn down. Leaked descriptors pile
    up in the one pytest process; past 1024, ``select()``-based servers die (py4j's callback
    server did, and a Spark stream hung in the suite)."""
    # Requested before the test runs, so tmp_path is torn down after this check.
    path = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if path is not None and open_files_under(path):
        # Handles that only a reference cycle keeps (an exception's traceback, say) go with the
        # next collection: they do not pile up. What survives it does.
        gc.collect()
        left = open_files_under(path)
        assert not left, f"{len(left)} files left open, e.g. {left[:3]}"
