"""Read-only inspection of log files and data directories: Kafka's ``DumpLogSegments`` and a
``verify`` that checks everything a reader relies on.

The code lives in :mod:`compactlog.storage.dump` (:func:`dump_log_file`) and
:mod:`compactlog.storage.verify` (:func:`verify_data_dir` and its theory of operation); this
module re-exports their public names, so ``from compactlog.storage.inspect import ...`` keeps
working.
"""

from __future__ import annotations

from compactlog.errors import UnsupportedFileError
from compactlog.storage.dump import dump_log_file
from compactlog.storage.verify import Problem, VerifyReport, verify_data_dir

__all__ = [
    "Problem",
    "UnsupportedFileError",
    "VerifyReport",
    "dump_log_file",
    "verify_data_dir",
]
