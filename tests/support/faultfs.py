"""A fault-injecting :class:`~compactlog.storage.fs.FileSystem` for crash and I/O-error tests.

Theory of operation
-------------------
:class:`FaultInjectingFileSystem` wraps a real filesystem (by default
:class:`~compactlog.storage.fs.OsFileSystem`) and implements the same protocol; the handles it opens
wrap the inner handles. Every *mutating* call gets the next number, starting at 1, in the order
the calls are made. The mutating calls are the ones ``fs.py`` lists, recorded in the trace under
these names:

=================  ==============================================  ===========================
trace name         call                                            label in the StorageError
=================  ==============================================  ===========================
``create``         ``open(path, create=True)``, file did not exist  ``open``
``write_at``       ``FileHandle.write_at``                          ``write``
``append``         ``FileHandle.append``                            ``write``
``truncate``       ``FileHandle.truncate``                          ``truncate``
``sync``           ``FileHandle.sync``                              ``fsync``
``rename``         ``rename(src, dst)`` (path = ``src``)            ``rename``
``remove``         ``remove``                                       ``remove``
``makedirs``       ``makedirs``                                     ``mkdir``
``rmdir``          ``rmdir``                                        ``rmdir``
``sync_dir``       ``sync_dir``                                     ``fsync directory``
``set_mtime_ms``   ``set_mtime_ms``                                 ``utime``
=================  ==============================================  ===========================

Every mutating call is numbered whether or not it then succeeds: ``remove`` of a missing file and
``makedirs`` of an existing directory are numbered too, so the numbering depends only on the
sequence of calls the code makes, never on timing. Reads (``exists``, ``listdir``, ``read_file``,
``FileHandle.read_at``, ``size``, ``close``, ``open`` of an existing file...) are not numbered.

Before call *k* runs, the filesystem decides its fate, in this order:

1. **Crash** (:meth:`~FaultInjectingFileSystem.crash_at`): the call is not performed and
   :class:`SimulatedCrash` is raised. With ``partial_write`` a ``write_at``/``append`` is *torn*:
   a strict prefix of its bytes is written first. From then on the filesystem is dead: every call
   on it or on a handle it opened, mutating or not, raises :class:`SimulatedCrash`, so code that
   unwinds through ``finally`` blocks cannot write anything more. The inner handles are closed at
   the crash, as the kernel closes a killed process's descriptors.
2. **Failure** (:meth:`~FaultInjectingFileSystem.fail_at`,
   :meth:`~FaultInjectingFileSystem.fail_when`): the call is not performed and the
   :class:`~compactlog.errors.StorageError` that ``fs.py`` would raise for that ``OSError`` is
   raised instead (same message, chained to an ``OSError`` carrying the errno). A *persistent*
   failure keeps failing every later call of the same kind (``write_at`` and ``append`` are one
   kind, ``write(2)``) on the same path, like a disk that stays full.
3. Otherwise the call is passed to the inner filesystem.

:class:`SimulatedCrash` derives from ``BaseException``, not ``Exception``, so storage code's
``except Exception`` handlers do not swallow it, just as they cannot catch a SIGKILL.

How tests use it
----------------
Enumerate every crash point of an operation, restarting from a fresh filesystem each time::

    n = count_mutations(lambda fs: do_operation(fs, directory))
    for k in range(1, n + 1):
        prepare(directory)                       # the same starting state every time
        fs = FaultInjectingFileSystem()
        fs.crash_at(k, partial_write=random.Random(seed))
        with pytest.raises(SimulatedCrash):
            do_operation(fs, directory)
        check_invariants(OsFileSystem(), directory)   # "restart"

Inject an I/O error instead with ``fs.fail_at(k, errno.EIO)`` or, by call site,
``fs.fail_when(lambda n, op, path: op == "sync", errno.EIO)``. ``fs.trace`` lists
``(number, op, path)`` for every numbered call, which is what to print when a crash point fails.

What is and is not simulated
----------------------------
Simulated: a process crash (SIGKILL) exactly before any mutating call, a torn ``write`` (a prefix
of the bytes reached the file, as when the process dies inside ``pwrite``), and ``OSError`` from
any mutating call (ENOSPC, EIO, EFBIG, ...), once or persistently.

Not simulated: **power loss**. After a simulated crash everything that was performed is in the
page cache of the real filesystem and stays there, as it does after a real process crash; unsynced
data is never dropped, and unsynced creations, renames and deletions are never undone. Also not
simulated: errors from non-mutating calls (reads, ``listdir``, ``close``), and short reads.

Power loss (spec R2) is meant to be added as a subclass: every performed mutation is reported to
:meth:`~FaultInjectingFileSystem._performed` with its arguments, which is where a journal of
unsynced file data and unsynced directory entries (cleared by ``sync``/``sync_dir``) would be kept
and later replayed, dropped or torn.

Numbering is deterministic for single-threaded code. Calls from several threads get unique
numbers (a lock protects the counter), but their order is then up to the scheduler.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NamedTuple, NoReturn, TypeVar

from compactlog.storage.fs import FileHandle, FileSystem, OsFileSystem, _storage_error

__all__ = [
    "MUTATING_OPS",
    "FaultInjectingFileHandle",
    "FaultInjectingFileSystem",
    "FaultPredicate",
    "MutatingCall",
    "SimulatedCrash",
    "count_mutations",
]

_T = TypeVar("_T")

#: The label ``fs.py`` puts in its StorageError message, for each numbered operation.
_ERROR_LABEL: Final[dict[str, str]] = {
    "create": "open",
    "write_at": "write",
    "append": "write",
    "truncate": "truncate",
    "sync": "fsync",
    "rename": "rename",
    "remove": "remove",
    "makedirs": "mkdir",
    "rmdir": "rmdir",
    "sync_dir": "fsync directory",
    "set_mtime_ms": "utime",
}

#: The names under which mutating calls appear in the trace and are passed to predicates.
MUTATING_OPS: Final[tuple[str, ...]] = tuple(_ERROR_LABEL)

#: ``predicate(number, op, path) -> bool``: whether the numbered call should fail.
FaultPredicate = Callable[[int, str, str], bool]


class MutatingCall(NamedTuple):
    """One numbered call: ``(number, op, path)``; for ``rename`` the path is the source."""

    number: int
    op: str
    path: str


class SimulatedCrash(BaseException):
    """The simulated process died. A ``BaseException``, so ``except Exception`` does not catch it.

    ``call`` is the numbered call at which the crash happened (also set on the errors raised by a
    dead filesystem afterwards); ``torn_length`` is how many bytes of a torn write reached the file
    (``None`` when the write was not torn or the call was not a write).
    """

    def __init__(self, message: str, call: MutatingCall, torn_length: int | None = None) -> None:
        super().__init__(message)
        self.call = call
        self.torn_length = torn_length


class FaultInjectingFileSystem:
    """A :class:`~compactlog.storage.fs.FileSystem` that numbers mutating calls and injects faults.

    See the module docstring for the numbering, the order in which faults apply, and what is not
    simulated.
    """

    def __init__(self, inner: FileSystem | None = None, *, trace: bool = True) -> None:
        self.inner: FileSystem = inner if inner is not None else OsFileSystem()
        self._lock = threading.Lock()
        self._calls = 0
        self._trace: list[MutatingCall] | None = [] if trace else None
        self._crash_at: int | None = None
        self._partial_write: bool | random.Random = False
        self._fail_at: dict[int, tuple[int, bool]] = {}
        self._fail_when: list[tuple[FaultPredicate, int]] = []
        # (error label, path) -> errno, for persistent failures that have fired.
        self._persistent: dict[tuple[str, str], int] = {}
        self._crash: SimulatedCrash | None = None
        self._handles: set[FaultInjectingFileHandle] = set()

    # -- inspection ------------------------------------------------------------------------------

    @property
    def calls(self) -> int:
        """How many mutating calls have been numbered so far (including a failed or crashed one)."""
        return self._calls

    @property
    def trace(self) -> list[MutatingCall] | None:
        """``(number, op, path)`` of every numbered call, or ``None`` if tracing is off."""
        return self._trace

    @property
    def crashed(self) -> SimulatedCrash | None:
        """The crash that killed this filesystem, or ``None`` while it is alive."""
        return self._crash

    # -- configuring faults ----------------------------------------------------------------------

    def crash_at(self, k: int, *, partial_write: bool | random.Random = False) -> None:
        """Crash when mutating call ``k`` is about to run, without performing it.

        ``partial_write`` tears the call if it is a ``write_at`` or ``append``: a strict prefix of
        its bytes is written before the crash. ``True`` writes the first half (``len // 2``); a
        ``random.Random`` picks a length in ``[0, len)`` from that generator, so a seeded generator
        replays the same tear. Other operations ignore it.
        """
        self._check_future_call(k)
        self._crash_at = k
        self._partial_write = partial_write

    def fail_at(self, k: int, errno_code: int = errno.ENOSPC, *, persistent: bool = False) -> None:
        """Make mutating call ``k`` raise the StorageError for ``errno_code`` instead of running.

        With ``persistent``, every later call of the same kind on the same path fails the same way
        (until :meth:`clear_faults`).
        """
        self._check_future_call(k)
        self._fail_at[k] = (errno_code, persistent)

    def fail_when(self, predicate: FaultPredicate, errno_code: int = errno.ENOSPC) -> None:
        """Make every later mutating call for which ``predicate(number, op, path)`` holds fail.

        The predicate runs before the call is performed; it must not call this filesystem.
        """
        self._fail_when.append((predicate, errno_code))

    def clear_faults(self) -> None:
        """Forget every pending crash and failure, persistent ones included ("space was freed").

        A filesystem that has already crashed stays dead.
        """
        self._crash_at = None
        self._partial_write = False
        self._fail_at.clear()
        self._fail_when.clear()
        self._persistent.clear()

    def _check_future_call(self, k: int) -> None:
        if k < 1:
            raise ValueError(f"mutating calls are numbered from 1, got {k}")
        if k <= self._calls:
            raise ValueError(f"call #{k} has already happened ({self._calls} calls so far)")

    # -- the FileSystem protocol -----------------------------------------------------------------

    def open(self, path: str, *, create: bool = False) -> FileHandle:
        self._check_alive()
        if create and not self.inner.exists(path):
            handle = self._mutate("create", path, lambda: self.inner.open(path, create=True), ())
        else:
            handle = self.inner.open(path, create=create)
        wrapper = FaultInjectingFileHandle(self, handle)
        with self._lock:
            self._handles.add(wrapper)
        return wrapper

    def exists(self, path: str) -> bool:
        self._check_alive()
        return self.inner.exists(path)

    def is_dir(self, path: str) -> bool:
        self._check_alive()
        return self.inner.is_dir(path)

    def listdir(self, path: str) -> list[str]:
        self._check_alive()
        return self.inner.listdir(path)

    def file_size(self, path: str) -> int:
        self._check_alive()
        return self.inner.file_size(path)

    def read_file(self, path: str) -> bytes:
        self._check_alive()
        return self.inner.read_file(path)

    def rename(self, src: str, dst: str) -> None:
        self._mutate("rename", src, lambda: self.inner.rename(src, dst), (dst,))

    def remove(self, path: str) -> None:
        self._mutate("remove", path, lambda: self.inner.remove(path), ())

    def makedirs(self, path: str) -> None:
        self._mutate("makedirs", path, lambda: self.inner.makedirs(path), ())

    def rmdir(self, path: str) -> None:
        self._mutate("rmdir", path, lambda: self.inner.rmdir(path), ())

    def sync_dir(self, path: str) -> None:
        self._mutate("sync_dir", path, lambda: self.inner.sync_dir(path), ())

    def mtime_ms(self, path: str) -> int:
        self._check_alive()
        return self.inner.mtime_ms(path)

    def set_mtime_ms(self, path: str, mtime_ms: int) -> None:
        self._mutate(
            "set_mtime_ms", path, lambda: self.inner.set_mtime_ms(path, mtime_ms), (mtime_ms,)
        )

    # -- the machinery ---------------------------------------------------------------------------

    def _check_alive(self) -> None:
        crash = self._crash
        if crash is not None:
            raise SimulatedCrash(
                f"filesystem is dead since the simulated crash at call #{crash.call.number}",
                crash.call,
                crash.torn_length,
            )

    def _mutate(
        self,
        op: str,
        path: str,
        perform: Callable[[], _T],
        args: tuple[object, ...],
        *,
        tear: Callable[[int], None] | None = None,
        size: int = 0,
    ) -> _T:
        """Number one mutating call, then crash, fail, or perform it.

        ``tear(n)`` writes the first ``n`` of the call's ``size`` bytes; only writes pass it.
        """
        with self._lock:
            self._check_alive()
            self._calls += 1
            call = MutatingCall(self._calls, op, path)
            if self._trace is not None:
                self._trace.append(call)
            crash_now = self._crash_at == call.number
            if crash_now:
                # Dead from this moment on, before the tear runs (other threads included).
                self._crash = SimulatedCrash(f"simulated crash at call #{call.number}", call)
        if crash_now:
            self._die(call, tear, size)
        errno_code = self._failure_for(call)
        if errno_code is not None:
            exc = OSError(errno_code, os.strerror(errno_code), path)
            shown = f"{path} -> {args[0]}" if op == "rename" else path
            raise _storage_error(_ERROR_LABEL[op], shown, exc) from exc
        result = perform()
        self._performed(call, args)
        return result

    def _die(self, call: MutatingCall, tear: Callable[[int], None] | None, size: int) -> NoReturn:
        torn_length: int | None = None
        try:
            partial = self._partial_write
            if tear is not None and partial is not False and size > 0:
                torn_length = size // 2 if partial is True else partial.randrange(size)
                if torn_length > 0:
                    tear(torn_length)
        finally:
            with self._lock:
                handles, self._handles = list(self._handles), set()
            for handle in handles:
                handle._close_inner_quietly()
        message = f"simulated crash at call #{call.number} ({call.op} {call.path!r})"
        if torn_length is not None:
            message += f", torn after {torn_length} of {size} bytes"
        crash = SimulatedCrash(message, call, torn_length)
        self._crash = crash
        raise crash

    def _failure_for(self, call: MutatingCall) -> int | None:
        key = (_ERROR_LABEL[call.op], call.path)
        code = self._persistent.get(key)
        if code is not None:
            return code
        fail = self._fail_at.pop(call.number, None)
        if fail is not None:
            code, persistent = fail
            if persistent:
                self._persistent[key] = code
            return code
        for predicate, predicate_code in list(self._fail_when):
            if predicate(call.number, call.op, call.path):
                return predicate_code
        return None

    def _performed(self, call: MutatingCall, args: tuple[object, ...]) -> None:
        """Hook: ``call`` was performed on the inner filesystem. Does nothing here.

        ``args`` are the call's arguments after the path: ``(position, data)`` for ``write_at``,
        ``(start, data)`` for ``append`` (``data`` is the caller's object, not a copy),
        ``(size,)`` for ``truncate``, ``(dst,)`` for ``rename``, ``(mtime_ms,)`` for
        ``set_mtime_ms``, ``()`` otherwise. A power-loss simulation overrides this to journal
        unsynced changes.
        """

    def _forget_handle(self, handle: FaultInjectingFileHandle) -> None:
        with self._lock:
            self._handles.discard(handle)


class FaultInjectingFileHandle:
    """A :class:`~compactlog.storage.fs.FileHandle` whose mutations go through its filesystem."""

    __slots__ = ("_fs", "_inner")

    def __init__(self, fs: FaultInjectingFileSystem, inner: FileHandle) -> None:
        self._fs = fs
        self._inner = inner

    @property
    def path(self) -> str:
        # Not a filesystem call, so it keeps working after a crash (handy in error messages).
        return self._inner.path

    def read_at(self, position: int, size: int) -> bytes:
        self._fs._check_alive()
        return self._inner.read_at(position, size)

    def readinto_at(self, position: int, buffer: bytearray | memoryview) -> int:
        self._fs._check_alive()
        return self._inner.readinto_at(position, buffer)

    def map_read(self, size: int) -> memoryview:
        self._fs._check_alive()
        return self._inner.map_read(size)

    def write_at(self, position: int, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        self._fs._mutate(
            "write_at",
            self._inner.path,
            lambda: self._inner.write_at(position, view),
            (position, data),
            tear=lambda n: self._inner.write_at(position, view[:n]),
            size=view.nbytes,
        )

    def append(self, data: bytes | bytearray | memoryview) -> int:
        self._fs._check_alive()
        view = memoryview(data)
        start = self._inner.size()
        return self._fs._mutate(
            "append",
            self._inner.path,
            lambda: self._inner.append(view),
            (start, data),
            tear=lambda n: self._inner.write_at(start, view[:n]),
            size=view.nbytes,
        )

    def truncate(self, size: int) -> None:
        self._fs._mutate("truncate", self._inner.path, lambda: self._inner.truncate(size), (size,))

    def size(self) -> int:
        self._fs._check_alive()
        return self._inner.size()

    def sync(self) -> None:
        self._fs._mutate("sync", self._inner.path, self._inner.sync, ())

    def close(self) -> None:
        self._fs._check_alive()
        self._fs._forget_handle(self)
        self._inner.close()

    def _close_inner_quietly(self) -> None:
        """Release the descriptor after a crash; errors are irrelevant to a dead process."""
        with contextlib.suppress(Exception):
            self._inner.close()


def count_mutations(fn: Callable[[FileSystem], object], *, inner: FileSystem | None = None) -> int:
    """Run ``fn`` once against a fresh :class:`FaultInjectingFileSystem` and count its mutations.

    ``fn`` really runs (over ``inner``, by default the real filesystem), so reset the directory
    it works on before enumerating crash points ``1..n`` with the result.
    """
    fs = FaultInjectingFileSystem(inner, trace=False)
    fn(fs)
    return fs.calls


if TYPE_CHECKING:
    # mypy checks that the fault-injecting classes satisfy the protocols they stand in for.
    def _implements_protocols(fs: FaultInjectingFileSystem, h: FaultInjectingFileHandle) -> None:
        _fs: FileSystem = fs
        _handle: FileHandle = h
