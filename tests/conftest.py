"""Fixtures shared by every test tier."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog.storage.store import Store


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
    """``open_store(**kwargs)`` opens a Store on ``tmp_path/data`` with the manual clock."""
    opened: list[Store] = []

    def factory(path: Path | None = None, **kwargs: Any) -> Store:
        kwargs.setdefault("clock", clock)
        store = Store.open(path or tmp_path / "data", **kwargs)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()
