"""Read-only inspection of log files and data directories: Kafka's ``DumpLogSegments`` and a
``verify`` that checks everything a reader relies on.

The code lives in :mod:`compactlog.storage.dump` (:func:`dump_log_file`) and
:mod:`compactlog.storage.verify` (:func:`verify_data_dir` and its theory of operation); this
module re-exports their public names, so ``from compactlog.storage.inspect import ...`` keeps
working, and what the CLI's ``log-dirs`` needs to read a live directory.
"""

from __future__ import annotations

from compactlog.errors import UnsupportedFileError
from compactlog.storage._file_checks import LIVE_ATTEMPTS, live_retry_delay, lock_holder
from compactlog.storage.dump import dump_log_file
from compactlog.storage.log import Log
from compactlog.storage.segment import LOG_SUFFIX
from compactlog.storage.topic_names import partition_dir_name
from compactlog.storage.verify import Problem, VerifyReport, verify_data_dir

__all__ = [
    "LIVE_ATTEMPTS",
    "LOG_SUFFIX",
    "Log",
    "Problem",
    "UnsupportedFileError",
    "VerifyReport",
    "dump_log_file",
    "live_retry_delay",
    "lock_holder",
    "partition_dir_name",
    "verify_data_dir",
]
