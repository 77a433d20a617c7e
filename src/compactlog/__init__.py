"""compactlog: Kafka's log storage and log compaction, byte for byte, in Python.

Layers (each imports only the layers below it; ``lint-imports`` checks this contract, and
``docs/architecture.md`` says what each package owns):

=========================  ==============================================================
``compactlog.cli``         thin commands over the library
``compactlog.spark``       PySpark data source and jobs (optional extra ``compactlog[spark]``)
``compactlog.broker``      the asyncio Kafka-protocol server
``compactlog.log_manager`` a data directory's store, log cleaner and periodic tasks
``compactlog.cleaner``     offset map, selection of the filthiest log, the cleaning algorithm
``compactlog.storage``     filesystem seam, segments, indexes, the log, recovery, the store
``compactlog.protocol``    the Kafka wire format, sans-I/O
``compactlog.records``     the record format: varints, RecordBatch v2, compression
``compactlog.errors``      the one error hierarchy
=========================  ==============================================================

The entry points are :class:`compactlog.log_manager.LogManager` (a data directory with its
cleaner) and :class:`compactlog.storage.store.Store` (the topics and partitions alone), both
re-exported here. They load on first use, so that ``import compactlog.protocol`` or
``import compactlog.records`` loads neither the storage layer nor numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from compactlog.errors import CompactlogError

if TYPE_CHECKING:
    from compactlog.log_manager import LogManager
    from compactlog.storage.store import Store

__all__ = ["CompactlogError", "LogManager", "Store"]
__version__ = "0.1.0"


# PEP 562: the heavy entry points are imported when first asked for.
_LAZY = {"LogManager": "compactlog.log_manager", "Store": "compactlog.storage.store"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'compactlog' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
