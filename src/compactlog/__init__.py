"""compactlog: Kafka's log storage and log compaction, byte for byte, in Python.

Layers (each imports only the layers below it; ``lint-imports`` checks this contract):

=====================  ==================================================================
``compactlog.cli``     thin commands over the library
``compactlog.spark``   PySpark data source and jobs (optional extra ``compactlog[spark]``)
``compactlog.broker``  the asyncio Kafka-protocol server
``compactlog.cleaner`` offset map, selection of the filthiest log, the cleaning algorithm
``compactlog.storage`` filesystem seam, segments, indexes, the log, recovery, the store
``compactlog.protocol`` the Kafka wire format, sans-I/O
``compactlog.records`` the record format: varints, RecordBatch v2, compression
``compactlog.errors``  the one error hierarchy
=====================  ==================================================================

The entry point is :class:`compactlog.storage.store.Store`, re-exported here.
"""

from compactlog.cleaner.service import install as _install_cleaner
from compactlog.errors import CompactlogError
from compactlog.storage.store import Store

# The storage layer cannot import the cleaner (layers point downwards); it takes it from here.
_install_cleaner()

__all__ = ["CompactlogError", "Store"]
__version__ = "0.1.0"
