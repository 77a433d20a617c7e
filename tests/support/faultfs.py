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

1. **Crash** (:meth:`~FaultInjectingFileSystem.crash_at`,
   :meth:`~FaultInjectingFileSystem.crash_at_op`): the call is not performed and
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

Cut the power before the k-th fsync instead, keeping a random part of what was not synced::

    fs = PowerLossFileSystem()
    fs.crash_at_op(k)                            # the k-th sync or sync_dir never returns
    with pytest.raises(SimulatedCrash):
        do_operation(fs, directory)
    cut = fs.power_cut(random.Random(seed))      # the directory now holds what survived
    check_invariants(OsFileSystem(), directory)  # print cut.describe() and the seed on failure

Inject an I/O error instead with ``fs.fail_at(k, errno.EIO)`` or, by call site,
``fs.fail_when(lambda n, op, path: op == "sync", errno.EIO)``. ``fs.trace`` lists
``(number, op, path)`` for every numbered call, which is what to print when a crash point fails.

What is and is not simulated
----------------------------
Simulated: a process crash (SIGKILL) exactly before any mutating call, a torn ``write`` (a prefix
of the bytes reached the file, as when the process dies inside ``pwrite``), and ``OSError`` from
any mutating call (ENOSPC, EIO, EFBIG, ...), once or persistently.

After a simulated crash everything that was performed is in the page cache of the real
filesystem and stays there, as it does after a real process crash; unsynced data is never dropped,
and unsynced creations, renames and deletions are never undone. **Power loss** (spec R2) is the
subclass :class:`PowerLossFileSystem`: it journals every change that is not durable yet (file data
until the file's ``sync``, directory entries until the directory's ``sync_dir``), and its
:meth:`~PowerLossFileSystem.power_cut` rewrites the directory to what a chosen model lets survive
(dropped, a prefix, torn, reordered at page granularity; see its docstring). A test crashes it
first, usually before the k-th fsync (:meth:`~FaultInjectingFileSystem.crash_at_op`), then cuts
the power and reopens the directory with the real filesystem. Not simulated: errors from
non-mutating calls (reads, ``listdir``, ``close``), and short reads.

Subclasses see every performed mutation through :meth:`~FaultInjectingFileSystem._perform` (which
runs it) and :meth:`~FaultInjectingFileSystem._performed` (after it ran), with its arguments.

Numbering is deterministic for single-threaded code. Calls from several threads get unique
numbers (a lock protects the counter), but their order is then up to the scheduler: judge a
crashed run on its own :attr:`~FaultInjectingFileSystem.trace` (or :attr:`crashed`), and use
:meth:`~FaultInjectingFileSystem.crash_at_op` to name "the k-th fsync" of whichever thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, NamedTuple, NoReturn, TypeVar

from compactlog.storage.fs import FileHandle, FileSystem, OsFileSystem, _storage_error

__all__ = [
    "MUTATING_OPS",
    "FaultInjectingFileHandle",
    "FaultInjectingFileSystem",
    "FaultPredicate",
    "MutatingCall",
    "PowerCut",
    "PowerLossFileSystem",
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
        # (k, ops): crash at the k-th call whose op is in ops; _op_calls counts those calls.
        self._crash_at_op: tuple[int, frozenset[str]] | None = None
        self._op_calls = 0
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

    def crash_at_op(
        self,
        k: int,
        ops: tuple[str, ...] = ("sync", "sync_dir"),
        *,
        partial_write: bool | random.Random = False,
    ) -> None:
        """Crash when the ``k``-th call (from now, counting from 1) whose op is in ``ops`` is
        about to run, without performing it; by default the k-th fsync of a file or directory.

        Counted on this run's own calls, so it names the same *kind* of point in every run even
        when a background thread makes the overall numbering vary; :attr:`crashed` says which
        call it was. ``partial_write`` as for :meth:`crash_at`.
        """
        if k < 1:
            raise ValueError(f"calls are counted from 1, got {k}")
        unknown = set(ops) - set(MUTATING_OPS)
        if unknown:
            raise ValueError(f"not mutating calls: {sorted(unknown)}")
        with self._lock:
            self._crash_at_op = (k, frozenset(ops))
            self._op_calls = 0
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
        self._crash_at_op = None
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
        handle: FaultInjectingFileHandle | None = None,
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
            if self._crash_at_op is not None and op in self._crash_at_op[1]:
                self._op_calls += 1
                crash_now = crash_now or self._op_calls == self._crash_at_op[0]
            if crash_now:
                # Dead from this moment on, before the tear runs (other threads included).
                self._crash = SimulatedCrash(f"simulated crash at call #{call.number}", call)
        if crash_now:
            self._die(call, tear, size, args, handle)
        errno_code = self._failure_for(call)
        if errno_code is not None:
            exc = OSError(errno_code, os.strerror(errno_code), path)
            shown = f"{path} -> {args[0]}" if op == "rename" else path
            raise _storage_error(_ERROR_LABEL[op], shown, exc) from exc
        return self._perform(call, args, perform, handle)

    def _perform(
        self,
        call: MutatingCall,
        args: tuple[object, ...],
        perform: Callable[[], _T],
        handle: FaultInjectingFileHandle | None,
    ) -> _T:
        """Run a call that neither crashes nor fails; :class:`PowerLossFileSystem` journals it.

        ``handle`` is the handle a ``write_at``/``append``/``truncate``/``sync`` goes through.
        """
        result = perform()
        self._performed(call, args)
        return result

    def _die(
        self,
        call: MutatingCall,
        tear: Callable[[int], None] | None,
        size: int,
        args: tuple[object, ...] = (),
        via: FaultInjectingFileHandle | None = None,
    ) -> NoReturn:
        torn_length: int | None = None
        try:
            partial = self._partial_write
            if tear is not None and partial is not False and size > 0:
                torn_length = size // 2 if partial is True else partial.randrange(size)
                if torn_length > 0:
                    n = torn_length
                    position, data = args
                    torn = memoryview(data)[:n]  # type: ignore[arg-type]
                    self._perform(call, (position, torn), lambda: tear(n), via)
        finally:
            self._close_handles()
        message = f"simulated crash at call #{call.number} ({call.op} {call.path!r})"
        if torn_length is not None:
            message += f", torn after {torn_length} of {size} bytes"
        crash = SimulatedCrash(message, call, torn_length)
        self._crash = crash
        raise crash

    def _close_handles(self) -> None:
        """Close every inner handle, as the kernel closes a dead process's descriptors."""
        with self._lock:
            handles, self._handles = list(self._handles), set()
        for handle in handles:
            handle._close_inner_quietly()

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

    __slots__ = ("_fs", "_inner", "_node")

    def __init__(self, fs: FaultInjectingFileSystem, inner: FileHandle) -> None:
        self._fs = fs
        self._inner = inner
        #: The file this handle writes, for :class:`PowerLossFileSystem` (which sets it).
        self._node: _Node | None = None

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
            handle=self,
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
            handle=self,
        )

    def truncate(self, size: int) -> None:
        self._fs._mutate(
            "truncate", self._inner.path, lambda: self._inner.truncate(size), (size,), handle=self
        )

    def size(self) -> int:
        self._fs._check_alive()
        return self._inner.size()

    def sync(self) -> None:
        self._fs._mutate("sync", self._inner.path, self._inner.sync, (), handle=self)

    def close(self) -> None:
        self._fs._check_alive()
        self._fs._forget_handle(self)
        self._inner.close()

    def _close_inner_quietly(self) -> None:
        """Release the descriptor after a crash; errors are irrelevant to a dead process."""
        with contextlib.suppress(Exception):
            self._inner.close()


# --- power loss ---------------------------------------------------------------------------------

#: What survives of one file's unsynced data at a power cut (see :class:`PowerLossFileSystem`).
FILE_MODES: Final[tuple[str, ...]] = ("drop", "keep", "prefix", "torn", "reorder")
#: What survives of one directory's unsynced entry changes at a power cut.
DIR_MODES: Final[tuple[str, ...]] = ("drop", "keep", "prefix")
#: The granularity at which the ``reorder`` model lets one file's unsynced writes land.
PAGE: Final[int] = 4096


@dataclass(eq=False)
class _DataOp:
    """One unsynced change of a file's data: ``write`` of ``data`` at ``position``, or
    ``truncate`` to ``size``. ``old_size`` and ``old`` (the bytes the change overwrote or cut,
    from ``position`` for a write and from ``size`` for a truncate) undo it."""

    kind: str
    position: int
    data: bytes
    size: int
    old_size: int
    old: bytes


@dataclass(eq=False)
class _Node:
    """A file (an inode): its path while linked, its content once it is not, and its data
    changes since its last fsync."""

    ident: int
    path: str | None
    detached: bytearray | None = None
    ops: list[_DataOp] = field(default_factory=list)
    is_dir: bool = False


@dataclass(eq=False)
class _EntryOp:
    """One unsynced change of a directory: ``create``/``remove`` of file ``name``, ``mkdir`` of
    subdirectory ``name``, or ``rename`` of ``name`` to ``target`` (replacing ``replaced``, or
    nothing)."""

    kind: str
    name: str
    node: _Node
    target: str = ""
    replaced: _Node | None = None


class PowerCut(NamedTuple):
    """What a :meth:`PowerLossFileSystem.power_cut` left: per file path and per directory
    path, the model applied and how many of the unsynced changes survived, e.g.
    ``"prefix 2/5"`` or ``"torn 3/5 +17B"``. For a failure message (with the seed)."""

    files: dict[str, str]
    dirs: dict[str, str]

    def describe(self) -> str:
        parts = [f"{os.path.basename(p)}: {m}" for p, m in sorted(self.files.items())]
        parts += [f"dir {os.path.basename(p)}: {m}" for p, m in sorted(self.dirs.items())]
        return "; ".join(parts) or "nothing was unsynced"


ModeChoice = str | Callable[[str, random.Random], str]


class PowerLossFileSystem(FaultInjectingFileSystem):
    """A :class:`FaultInjectingFileSystem` that can also cut the power (spec R2).

    Every call still goes to the real filesystem at once, so the code under test sees ordinary
    POSIX behaviour while it runs (the page cache). Beside that, a journal remembers what is not
    durable yet:

    * per file (per inode: a handle keeps writing the same file across renames), every
      ``write_at``/``append``/``truncate`` since the file's last successful ``sync``, with the
      bytes it overwrote, so it can be undone;
    * per directory, every ``create``, ``rename`` and ``remove`` of a file in it since its last
      successful ``sync_dir``. A removed or replaced file's content is kept in memory, so the
      removal can be undone.

    Files that exist when the filesystem is first used count as durable: start it on a directory
    a store closed cleanly (or that was written with a plain :class:`OsFileSystem`).

    :meth:`power_cut` kills the filesystem (as a crash does) and then rewrites the directories on
    disk so that exactly what the model lets survive is there; a test then reopens them with the
    real filesystem. The model, per file (``FILE_MODES``), chosen independently for each file,
    which is how writes to *different* files reorder (any subset of files may have reached the
    disk, whatever order they were written in):

    ``drop``
        every unsynced change is lost: the file holds what it held at its last fsync;
    ``keep``
        every unsynced change survived (what a process crash leaves);
    ``prefix``
        the first *j* unsynced changes survived, *j* uniform in ``0..n``;
    ``torn``
        the first *j* survived, *j* uniform in ``0..n-1``, and change *j+1*, if a write, reached
        the disk up to a random byte (a strict prefix of its bytes, possibly none); ``j = n-1``
        tears the last write;
    ``reorder``
        writes to one file land out of order at page granularity: each write is cut at the
        4096-byte page boundaries of the file, and each piece, and each truncate, survives
        independently with probability 1/2; the survivors are applied in the order they were
        made (so a later piece may land while an earlier one did not, leaving old bytes, or
        zeros past the old end, in between). The file's length is whatever the surviving pieces
        and truncates make it.

    Per directory (``DIR_MODES``): ``drop`` undoes every unsynced create, rename and remove (a
    created file vanishes with its data even if that was fsynced, a renamed file is back under
    its old name, a removed or replaced file is back with its content as of its last fsync
    plus what its own model keeps), ``keep`` keeps them all, ``prefix`` keeps the first *j* in
    order. Entry changes are never reordered within a directory, as journaling filesystems
    commit metadata in order.

    A directory created by ``makedirs`` is an entry of its parent like a file: until the parent
    is fsynced its creation may be undone, and then it vanishes with everything in it, fsynced
    or not.

    Not modelled (and not needed by the storage layer, which checks its own calls): renames
    between directories (refused with ``ValueError``), renaming or removing *directories*
    (durable at once), ``set_mtime_ms`` (not journaled), hard links, and file-size metadata
    separate from data (``fdatasync`` is treated as making the file's length durable too, as it
    does for a length the data needs).
    """

    def __init__(self, inner: FileSystem | None = None, *, trace: bool = True) -> None:
        super().__init__(inner, trace=trace)
        self._journal_lock = threading.RLock()
        self._nodes: dict[str, _Node] = {}  # absolute path -> the file linked there
        self._dir_ops: dict[str, list[_EntryOp]] = {}  # absolute directory -> unsynced entries
        self._dirs: dict[str, _Node] = {}  # absolute path -> a directory created through us
        self._next_ident = 0
        self._cut: PowerCut | None = None

    # -- inspection ------------------------------------------------------------------------------

    def unsynced(self) -> dict[str, int]:
        """Path (or ``<removed #n>``) -> how many unsynced data changes each file has, and
        directory -> how many unsynced entry changes; only non-zero counts."""
        with self._journal_lock:
            out: dict[str, int] = {}
            for node in self._all_nodes():
                if node.ops:
                    out[node.path or f"<removed #{node.ident}>"] = len(node.ops)
            for directory, ops in self._dir_ops.items():
                if ops:
                    out[directory + os.sep] = len(ops)
            return out

    @property
    def cut(self) -> PowerCut | None:
        """What the power cut left, once :meth:`power_cut` has run."""
        return self._cut

    # -- the FileSystem protocol -----------------------------------------------------------------

    def open(self, path: str, *, create: bool = False) -> FileHandle:
        handle = super().open(path, create=create)
        assert isinstance(handle, FaultInjectingFileHandle)
        with self._journal_lock:
            handle._node = self._node_at(_key(path))
        return handle

    # -- the journal -----------------------------------------------------------------------------

    def _new_node(self, path: str | None) -> _Node:
        self._next_ident += 1
        node = _Node(self._next_ident, path)
        if path is not None:
            self._nodes[path] = node
        return node

    def _node_at(self, path: str) -> _Node:
        """The file linked at ``path`` now (one that predates the journal counts as durable)."""
        node = self._nodes.get(path)
        return node if node is not None else self._new_node(path)

    def _all_nodes(self) -> list[_Node]:
        seen: dict[int, _Node] = {n.ident: n for n in self._nodes.values()}
        for ops in self._dir_ops.values():
            for e in ops:
                seen.setdefault(e.node.ident, e.node)
                if e.replaced is not None:
                    seen.setdefault(e.replaced.ident, e.replaced)
        return list(seen.values())

    def _detach(self, node: _Node, content: bytes) -> None:
        """``node`` lost its name; ``content`` is what it held (read before it went)."""
        assert node.path is not None
        node.detached = bytearray(content)
        del self._nodes[node.path]
        node.path = None

    def _perform(
        self,
        call: MutatingCall,
        args: tuple[object, ...],
        perform: Callable[[], _T],
        handle: FaultInjectingFileHandle | None,
    ) -> _T:
        with self._journal_lock:
            crash = self._crash
            if crash is not None and crash.call.number != call.number:
                # Another thread died while this call waited for the lock: it never happens
                # (and its descriptor is closed already).
                self._check_alive()
            op = call.op
            path = _key(call.path)
            if op in ("write_at", "append", "truncate"):
                assert handle is not None and handle._node is not None
                node = handle._node
                inner = handle._inner
                old_size = inner.size()
                if op == "truncate":
                    (size,) = args
                    assert isinstance(size, int)
                    old = inner.read_at(size, old_size - size) if size < old_size else b""
                    change = _DataOp("truncate", size, b"", size, old_size, old)
                else:
                    position, data = args
                    assert isinstance(position, int)
                    raw = bytes(data)  # type: ignore[call-overload]
                    old = inner.read_at(position, len(raw)) if position < old_size else b""
                    change = _DataOp("write", position, raw, 0, old_size, old)
                try:
                    result = perform()
                except BaseException:
                    # A real I/O error may leave part of a write in the page cache: journal
                    # what is there now, so that undoing it stays exact.
                    if change.kind == "write":
                        change.data = inner.read_at(change.position, len(change.data))
                        node.ops.append(change)
                    raise
                node.ops.append(change)
                if node.detached is not None:  # written after its name went: keep up
                    _apply(node.detached, change)
                self._performed(call, args)
                return result
            if op == "sync":
                assert handle is not None and handle._node is not None
                result = perform()
                handle._node.ops.clear()
                self._performed(call, args)
                return result
            if op == "sync_dir":
                result = perform()
                self._dir_ops.pop(path, None)
                self._performed(call, args)
                return result
            if op == "create":
                result = perform()
                node = self._new_node(path)
                self._entry(path, _EntryOp("create", os.path.basename(path), node))
                self._performed(call, args)
                return result
            if op == "remove":
                content = _read(path) if os.path.isfile(path) else None
                result = perform()
                if content is not None:
                    gone = self._node_at(path)
                    self._detach(gone, content)
                    self._entry(path, _EntryOp("remove", os.path.basename(path), gone))
                self._performed(call, args)
                return result
            if op == "rename":
                (target,) = args
                assert isinstance(target, str)
                dst = _key(target)
                if os.path.isdir(path):  # directories are not journaled: durable at once
                    result = perform()
                    self._move_tree(path, dst)
                    self._performed(call, args)
                    return result
                if os.path.dirname(path) != os.path.dirname(dst):
                    raise ValueError(
                        f"the power-loss journal models renames within one directory only: "
                        f"{call.path} -> {target}"
                    )
                content = _read(dst) if dst != path and os.path.isfile(dst) else None
                result = perform()
                node = self._node_at(path)
                replaced: _Node | None = None
                if content is not None:
                    replaced = self._node_at(dst)
                    self._detach(replaced, content)
                if dst != path:
                    del self._nodes[path]
                    node.path = dst
                    self._nodes[dst] = node
                    self._entry(
                        path,
                        _EntryOp(
                            "rename",
                            os.path.basename(path),
                            node,
                            os.path.basename(dst),
                            replaced,
                        ),
                    )
                self._performed(call, args)
                return result
            if op == "rmdir":
                result = perform()
                prefix = path + os.sep
                for p in [p for p in self._nodes if p.startswith(prefix)]:
                    del self._nodes[p]
                self._dir_ops.pop(path, None)
                # Removing a directory is durable at once, so its creation no longer matters.
                gone_dir = self._dirs.pop(path, None)
                parent_ops = self._dir_ops.get(os.path.dirname(path), [])
                parent_ops[:] = [e for e in parent_ops if e.node is not gone_dir]
                self._performed(call, args)
                return result
            if op == "makedirs":
                missing = []
                parent = path
                while not os.path.exists(parent) and os.path.dirname(parent) != parent:
                    missing.append(parent)
                    parent = os.path.dirname(parent)
                result = perform()
                for created in reversed(missing):  # the outermost first
                    self._next_ident += 1
                    node = _Node(self._next_ident, created, is_dir=True)
                    self._dirs[created] = node
                    self._entry(created, _EntryOp("mkdir", os.path.basename(created), node))
                self._performed(call, args)
                return result
            return super()._perform(call, args, perform, handle)  # set_mtime_ms

    def _close_handles(self) -> None:
        # Not while another thread is inside a call: it would write to a closed descriptor.
        with self._journal_lock:
            super()._close_handles()

    def _entry(self, path: str, change: _EntryOp) -> None:
        self._dir_ops.setdefault(os.path.dirname(path), []).append(change)

    def _move_tree(self, src: str, dst: str) -> None:
        prefix = src + os.sep
        for p in [p for p in self._nodes if p.startswith(prefix)]:
            node = self._nodes.pop(p)
            node.path = dst + p[len(src) :]
            self._nodes[node.path] = node
        for d in [d for d in self._dir_ops if d == src or d.startswith(prefix)]:
            self._dir_ops[dst + d[len(src) :]] = self._dir_ops.pop(d)
        for d in [d for d in self._dirs if d == src or d.startswith(prefix)]:
            node = self._dirs.pop(d)
            node.path = dst + d[len(src) :]
            self._dirs[node.path] = node

    # -- the cut ---------------------------------------------------------------------------------

    def power_cut(
        self,
        rng: random.Random,
        *,
        files: ModeChoice = "random",
        dirs: ModeChoice = "random",
    ) -> PowerCut:
        """Cut the power now: the filesystem dies (if a crash has not killed it already) and the
        directories on disk are rewritten to what survives (see the class docstring).

        ``files`` and ``dirs`` name the model (one of ``FILE_MODES`` / ``DIR_MODES``) for every
        file / directory, ``"random"`` for a uniform choice each, or are a function
        ``(path, rng) -> mode``. Every random choice comes from ``rng``, so a seed replays a cut.
        """
        with self._lock:
            if self._crash is None:
                call = MutatingCall(self._calls, "power_cut", "")
                self._crash = SimulatedCrash(f"power cut after call #{self._calls}", call)
        self._close_handles()
        with self._journal_lock:
            self._cut = self._cut_now(rng, files, dirs)
            self._nodes.clear()
            self._dir_ops.clear()
        return self._cut

    def _cut_now(self, rng: random.Random, files: ModeChoice, dirs: ModeChoice) -> PowerCut:
        report = PowerCut({}, {})
        # 1. The names that survive in every directory with unsynced entry changes.
        names: dict[str, dict[str, _Node]] = {}
        for directory, ops in sorted(self._dir_ops.items()):
            if not ops:
                continue
            now: dict[str, _Node] = {}
            for n in sorted(os.listdir(directory)):
                path = os.path.join(directory, n)
                if os.path.isfile(path):
                    now[n] = self._node_at(path)
                elif os.path.isdir(path):
                    now[n] = self._dirs.get(path) or _Node(-1, path, is_dir=True)
            namespace = dict(now)
            for change in reversed(ops):
                _undo_entry(namespace, change)
            mode = _choose(dirs, DIR_MODES, directory, rng)
            keep = {"drop": 0, "keep": len(ops)}.get(mode, rng.randint(0, len(ops)))
            for change in ops[:keep]:
                _redo_entry(namespace, change)
            names[directory] = namespace
            report.dirs[directory] = f"{mode} {keep}/{len(ops)}"
        # Directories whose creation did not survive vanish with everything in them.
        vanished = sorted(
            os.path.join(directory, n)
            for directory, namespace in names.items()
            for n in os.listdir(directory)
            if os.path.isdir(os.path.join(directory, n)) and n not in namespace
        )

        def gone(path: str) -> bool:
            return any(path == v or path.startswith(v + os.sep) for v in vanished)

        for v in vanished:
            report.dirs[v] = "vanished: its creation was not durable"
        names = {d: ns for d, ns in names.items() if not gone(d)}
        # 2. The content that survives of every file that is linked somewhere afterwards.
        linked: dict[int, tuple[_Node, list[str]]] = {}
        for directory, namespace in names.items():
            for name, node in namespace.items():
                if not node.is_dir:
                    path = os.path.join(directory, name)
                    linked.setdefault(node.ident, (node, []))[1].append(path)
        for node in list(self._nodes.values()):
            at = node.path
            if at is not None and os.path.dirname(at) not in names and not gone(at):
                linked.setdefault(node.ident, (node, []))[1].append(at)
        contents: dict[int, bytes | None] = {}  # None: unchanged on disk, in place
        for ident, (node, paths) in linked.items():
            if not node.ops and node.path is not None and paths == [node.path]:
                contents[ident] = None
                continue
            current = node.detached if node.path is None else _read(node.path)
            assert current is not None
            data = bytearray(current)
            for undone in reversed(node.ops):
                _undo(data, undone)
            if node.ops:
                shown = paths[0]
                mode = _choose(files, FILE_MODES, shown, rng)
                report.files[shown] = _replay(data, node.ops, mode, rng)
            contents[ident] = bytes(data)
        # 3. Rewrite the disk: first read everything (done), then remove and write.
        for v in vanished:
            shutil.rmtree(v)
        for directory, namespace in names.items():
            for name in os.listdir(directory):
                path = os.path.join(directory, name)
                entry = namespace.get(name)
                keep_in_place = (
                    entry is not None and entry.path == path and contents.get(entry.ident) is None
                )
                if os.path.isfile(path) and not keep_in_place:
                    os.unlink(path)
        for ident, (_node, paths) in linked.items():
            content = contents[ident]
            if content is None:
                continue
            for path in paths:
                with open(path, "wb") as f:
                    f.write(content)
        return report


def _key(path: str) -> str:
    return os.path.abspath(path)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _choose(choice: ModeChoice, modes: tuple[str, ...], path: str, rng: random.Random) -> str:
    mode = rng.choice(modes) if choice == "random" else choice
    if callable(mode):
        mode = mode(path, rng)
    if mode not in modes:
        raise ValueError(f"unknown power-cut model {mode!r} for {path}; one of {modes}")
    return mode


def _set_size(data: bytearray, size: int) -> None:
    if size < len(data):
        del data[size:]
    else:
        data.extend(bytes(size - len(data)))


def _put(data: bytearray, position: int, raw: bytes) -> None:
    if position > len(data):
        _set_size(data, position)
    data[position : position + len(raw)] = raw


def _apply(data: bytearray, change: _DataOp) -> None:
    if change.kind == "truncate":
        _set_size(data, change.size)
    else:
        _put(data, change.position, change.data)


def _undo(data: bytearray, change: _DataOp) -> None:
    start = change.size if change.kind == "truncate" else change.position
    _set_size(data, max(len(data), change.old_size))
    _put(data, start, change.old)
    _set_size(data, change.old_size)


def _replay(data: bytearray, ops: list[_DataOp], mode: str, rng: random.Random) -> str:
    """Apply what ``mode`` keeps of ``ops`` to the durable ``data``; describe it."""
    n = len(ops)
    if mode == "reorder":
        kept = total = 0
        for change in ops:
            if change.kind == "truncate":
                pieces = [change]
            else:
                pieces = []
                start, end = change.position, change.position + len(change.data)
                while start < end:
                    stop = min(end, (start // PAGE + 1) * PAGE)
                    chunk = change.data[start - change.position : stop - change.position]
                    pieces.append(_DataOp("write", start, chunk, 0, 0, b""))
                    start = stop
            for piece in pieces:
                total += 1
                if rng.random() < 0.5:
                    kept += 1
                    _apply(data, piece)
        return f"reorder {kept}/{total} pieces of {n} changes"
    if mode == "drop":
        keep = 0
    elif mode == "keep":
        keep = n
    elif mode == "prefix":
        keep = rng.randint(0, n)
    else:  # torn
        keep = rng.randint(0, n - 1)
    for change in ops[:keep]:
        _apply(data, change)
    if mode != "torn":
        return f"{mode} {keep}/{n}"
    torn = ops[keep]
    if torn.kind != "write" or not torn.data:
        return f"torn {keep}/{n} (a truncate was next)"
    length = rng.randrange(len(torn.data))
    _put(data, torn.position, torn.data[:length])
    return f"torn {keep}/{n} +{length}/{len(torn.data)}B"


def _undo_entry(namespace: dict[str, _Node], change: _EntryOp) -> None:
    if change.kind in ("create", "mkdir"):
        del namespace[change.name]
    elif change.kind == "remove":
        namespace[change.name] = change.node
    else:
        del namespace[change.target]
        namespace[change.name] = change.node
        if change.replaced is not None:
            namespace[change.target] = change.replaced


def _redo_entry(namespace: dict[str, _Node], change: _EntryOp) -> None:
    if change.kind in ("create", "mkdir"):
        namespace[change.name] = change.node
    elif change.kind == "remove":
        del namespace[change.name]
    else:
        del namespace[change.name]
        namespace[change.target] = change.node


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
