"""A data directory as a whole: its lock, the job handshake, the clean-shutdown marker.

Layout of a data directory, as Kafka's log dir::

    <data-dir>/
      .lock                                  exclusive while a Store has it open
      .kafka_cleanshutdown                   present only between a clean close and the next open
      .compaction-jobs/                      the handshake with a job that rewrites partitions
      compactlog-topics.json                 topics, partition counts, topic configs
      recovery-point-offset-checkpoint       Kafka's text format, one line per partition
      log-start-offset-checkpoint
      cleaner-offset-checkpoint              written by the cleaner
      <topic>-<partition>/                   00000000000000000000.log, .index, .timeindex, ...

This module owns the files that belong to the directory rather than to a topic or a partition:
the ``flock`` a :class:`~compactlog.storage.store.Store` holds while it is open
(:class:`DataDirLock`), the handshake with a job that rewrites partitions with no store open
(:class:`PartitionJobs`), and the clean-shutdown marker (:func:`clean_shutdown_marker`,
:func:`read_broker_epoch`). The topics file has one parser, in
:mod:`compactlog.storage.topic_catalog`; the checkpoint files have theirs in
:mod:`compactlog.storage.checkpoint`.

The marker is written as Kafka 3.8+ writes it, ``{"version":0,"brokerEpoch":N}``: its presence
means a clean shutdown (to Kafka and to compactlog alike), and Kafka 4.x also reads the broker
epoch in it when the broker registers, telling the controller that the broker's last incarnation
stopped cleanly; an empty or unreadable marker makes the controller treat every partition of the
broker as after an unclean shutdown (it bumps their leader epochs). A store carries the epoch of
the marker it found at open over to the marker it writes at close; without one (compactlog's own
directory, or a Kafka directory after a crash) it writes Kafka's "unknown" epoch, -1.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator

from compactlog.errors import StorageError
from compactlog.storage.fs import OsFileSystem, refuse_uri, write_file_atomically

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
#: Kafka's "unknown broker epoch", written in the clean-shutdown marker when none is known.
NO_BROKER_EPOCH = -1


def read_broker_epoch(marker: bytes) -> int:
    """The broker epoch of a clean-shutdown marker (Kafka's ``CleanShutdownFileHandler``
    content); :data:`NO_BROKER_EPOCH` for an empty or unreadable one."""
    try:
        epoch = json.loads(marker.decode("utf-8"))["brokerEpoch"]
    except (ValueError, KeyError, TypeError):
        return NO_BROKER_EPOCH
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else NO_BROKER_EPOCH


def clean_shutdown_marker(broker_epoch: int) -> bytes:
    """The clean-shutdown marker's content, byte for byte as Kafka writes it."""
    return json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode()


class DataDirLock:
    """The exclusive lock on a data directory: ``flock`` and a POSIX record lock on ``.lock``.

    The flock keeps two stores of one process apart (record locks belong to the process);
    the record lock is the one a Kafka broker takes (``FileChannel.tryLock``), so neither opens
    a directory the other holds. Nothing else in a process that holds the lock may open and
    close ``.lock``: closing any descriptor of the file drops the process's record locks.

    A :class:`Store` takes it for as long as it is open. A job that works on the files without
    a store open (the Spark compaction) holds it itself, so that no store (a broker, the CLI,
    the in-process cleaner) opens the directory meanwhile. Both locks die with the process: a
    killed job leaves no stale lock behind.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        refuse_uri(path, "locking a data directory (to write, compact or serve it)")
        self.path = os.path.abspath(os.fspath(path))
        self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def acquire(self) -> DataDirLock:
        """Take the lock; raises :class:`StorageError` at once if another holder has it."""
        if self._fd >= 0:
            return self
        lock_path = os.path.join(self.path, LOCK_FILE)
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot open {lock_path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise StorageError(
                f"the data directory {self.path} is in use by another process"
            ) from exc
        try:
            # Kafka locks the same file with Java's FileChannel.tryLock, a POSIX record lock
            # (fcntl F_SETLK), which Linux keeps apart from flock: without this second lock a
            # live Kafka broker's log dir would open here as if it were free.
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)  # drops the flock too
            raise StorageError(
                f"the data directory {self.path} is in use by another process "
                f"(a record lock on {lock_path}, as a Kafka broker holds)"
            ) from (exc if isinstance(exc, BlockingIOError) else BlockingIOError(*exc.args))
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.lockf(self._fd, fcntl.LOCK_UN)
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> DataDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class PartitionJobs:
    """The handshake between a store and a job that rewrites partitions with no store open
    (a Spark compaction): its tasks may run in processes the job's driver does not own, and
    outlive it (a killed driver leaves Python workers finishing their task).

    * The driver holds the :class:`DataDirLock` and names the running job in
      ``.compaction-jobs/current`` (:meth:`begin`).
    * A task takes its partition's lock, ``.compaction-jobs/locks/<topic>-<partition>``, and
      then checks that its job is still the current one (:meth:`task`); otherwise it stops.
    * A store, once it holds the directory lock, first forgets the current job, then refuses to
      open while any partition lock is held (:meth:`check_idle`).

    Whatever the interleaving, a task that passed its check holds its lock before the store
    looks at the locks, and a task that checks after the store forgot the job stops: a store
    and a task never work on the files at once.
    """

    DIR = ".compaction-jobs"

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(os.path.abspath(data_dir), self.DIR)
        self._current = os.path.join(self.path, "current")
        self._locks = os.path.join(self.path, "locks")

    def begin(self, job_id: str) -> None:
        """Name ``job_id`` the running job (the caller holds the directory lock, no store is
        open). The clean-shutdown marker goes first: a crash while the job owns the files must
        not look like a clean shutdown to the next store."""
        fs = OsFileSystem()
        data_dir = os.path.dirname(self.path)
        marker = os.path.join(data_dir, CLEAN_SHUTDOWN_FILE)
        if fs.exists(marker):
            fs.remove(marker)
            fs.sync_dir(data_dir)
        os.makedirs(self._locks, exist_ok=True)
        write_file_atomically(fs, self._current, job_id.encode())

    def end(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._current)

    def check_idle(self) -> None:
        """Forget the current job; raise :class:`StorageError` while a task holds a lock."""
        self.end()
        try:
            names = sorted(os.listdir(self._locks))
        except FileNotFoundError:
            return
        for name in names:
            fd = os.open(os.path.join(self._locks, name), os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                raise StorageError(
                    f"partition {name} of {os.path.dirname(self.path)} is still being rewritten "
                    "by a task of a compaction job (its driver may be gone); open the store "
                    "again once that task has finished"
                ) from exc
            finally:
                os.close(fd)

    @contextlib.contextmanager
    def task(self, job_id: str, partition_dir_name: str) -> Iterator[None]:
        """Hold the partition's lock (waiting for another attempt of the same task) while the
        job ``job_id`` is the current one; raises :class:`StorageError` when it is not."""
        os.makedirs(self._locks, exist_ok=True)
        fd = os.open(os.path.join(self._locks, partition_dir_name), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                with open(self._current, "rb") as f:
                    current = f.read().decode()
            except FileNotFoundError:
                current = ""
            if current != job_id:
                raise StorageError(
                    f"compaction job {job_id} is no longer running on "
                    f"{os.path.dirname(self.path)} (its driver is gone); not touching "
                    f"{partition_dir_name}"
                )
            yield
        finally:
            os.close(fd)
