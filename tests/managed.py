"""Stores opened under a :class:`~compactlog.log_manager.LogManager`, for tests.

Most tests write through the store and clean through its manager: :func:`open_managed` opens the
manager and hands out its store, :func:`manager_of` finds the manager of such a store again.
(The registry lives here, not in ``conftest.py``: pytest imports the conftest under its own
module name, and a test importing ``tests.conftest`` would get a second registry.)
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from compactlog.log_manager import LogManager
from compactlog.storage.store import Store

_MANAGERS: weakref.WeakKeyDictionary[Store, LogManager] = weakref.WeakKeyDictionary()


def open_managed(path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Store:
    """``LogManager.open(path, ...).store``: a store with its log cleaner (and, with
    ``background=True``, its periodic tasks); :func:`manager_of` gives the manager."""
    manager = LogManager.open(path, *args, **kwargs)
    _MANAGERS[manager.store] = manager
    return manager.store


def manager_of(store: Store) -> LogManager:
    """The log manager :func:`open_managed` opened ``store`` with."""
    return _MANAGERS[store]


def close_managed(store: Store) -> None:
    """Close ``store`` through its manager (the cleaner threads and the scheduler stop first)."""
    manager_of(store).close()
