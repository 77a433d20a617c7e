"""The filesystem seam: every byte the storage layer reads or writes goes through here.

Kafka's storage code talks to ``FileChannel``s and ``Files``; compactlog's talks to a
:class:`FileSystem` and the :class:`FileHandle` objects it opens. The real implementation is a thin
layer over ``os`` (``pread``/``pwrite``/``fdatasync``/``os.replace``). Tests swap in
``tests.support.faultfs.FaultInjectingFileSystem``, which numbers every mutating call so a
test can crash, or fail with ENOSPC/EIO, at exactly call *k*.

Mutating calls (the ones that are numbered): ``open`` with ``create=True`` when the file did not
exist, ``FileHandle.write_at``/``append``/``truncate``/``sync``, ``rename``, ``remove``,
``makedirs``, ``rmdir``, ``sync_dir`` and ``set_mtime_ms``.

An ``OSError`` from the operating system is wrapped in :class:`~compactlog.errors.StorageError`
(chained), naming the operation and the path, so callers handle one error type.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from typing import Protocol

from compactlog.errors import StorageError


class FileHandle(Protocol):
    """An open file: positional reads and writes, no shared file position."""

    @property
    def path(self) -> str: ...

    def read_at(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``position`` (fewer at the end of the file)."""
        ...

    def readinto_at(self, position: int, buffer: bytearray | memoryview) -> int:
        """Fill ``buffer`` from ``position``; returns the byte count read (short at EOF)."""
        ...

    def map_read(self, size: int) -> memoryview:
        """A read-only memory map of the file's first ``size`` bytes (empty for 0).

        For bulk readers (the cleaner) that hand the bytes to compiled loops without copying
        them. The caller must not map past the end of the file, and the file must not shrink
        below ``size`` while the view is alive (reading a page past the end raises SIGBUS).
        """
        ...

    def write_at(self, position: int, data: bytes | bytearray | memoryview) -> None: ...

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write at the end of the file; returns the position the data starts at."""
        ...

    def truncate(self, size: int) -> None:
        """Set the file length (shrinks, or extends with zeros as a sparse file)."""
        ...

    def size(self) -> int: ...

    def sync(self) -> None:
        """Make the file's data durable (``fdatasync``)."""
        ...

    def close(self) -> None: ...


class FileSystem(Protocol):
    """The operations the storage layer needs, and nothing else."""

    def open(self, path: str, *, create: bool = False) -> FileHandle: ...

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def listdir(self, path: str) -> list[str]: ...

    def file_size(self, path: str) -> int: ...

    def read_file(self, path: str) -> bytes: ...

    def rename(self, src: str, dst: str) -> None:
        """Atomic rename, replacing ``dst`` if it exists (``os.replace``)."""
        ...

    def remove(self, path: str) -> None:
        """Delete a file; a missing file is not an error."""
        ...

    def makedirs(self, path: str) -> None: ...

    def rmdir(self, path: str) -> None: ...

    def sync_dir(self, path: str) -> None:
        """fsync a directory so creations, renames and deletions in it are durable."""
        ...

    def mtime_ms(self, path: str) -> int: ...

    def set_mtime_ms(self, path: str, mtime_ms: int) -> None: ...


def _storage_error(op: str, path: str, exc: OSError) -> StorageError:
    reason = errno.errorcode.get(exc.errno or 0, "") or type(exc).__name__
    return StorageError(f"{op} {path!r} failed: {reason} ({exc.strerror or exc})")


class OsFileHandle:
    """A :class:`FileHandle` over an ``os`` file descriptor."""

    __slots__ = ("_fd", "_path", "_size")

    def __init__(self, path: str, fd: int) -> None:
        self._path = path
        self._fd = fd
        try:
            self._size = os.fstat(fd).st_size
        except OSError as exc:
            os.close(fd)
            raise _storage_error("stat", path, exc) from exc

    @property
    def path(self) -> str:
        return self._path

    def read_at(self, position: int, size: int) -> bytes:
        try:
            return os.pread(self._fd, size, position)
        except OSError as exc:
            raise _storage_error("read", self._path, exc) from exc

    def readinto_at(self, position: int, buffer: bytearray | memoryview) -> int:
        try:
            return os.preadv(self._fd, [buffer], position)
        except OSError as exc:
            raise _storage_error("read", self._path, exc) from exc

    def map_read(self, size: int) -> memoryview:
        if size <= 0:
            return memoryview(b"")
        try:
            actual = os.fstat(self._fd).st_size
            if actual < size:  # mapping past the end would fault (SIGBUS) on first touch
                raise StorageError(
                    f"mmap {self._path!r} failed: the file has {actual} bytes, not {size}"
                )
            mapped = mmap.mmap(self._fd, size, prot=mmap.PROT_READ)
        except (OSError, ValueError) as exc:
            if isinstance(exc, OSError):
                raise _storage_error("mmap", self._path, exc) from exc
            raise StorageError(f"mmap {self._path!r} failed: {exc}") from exc
        return memoryview(mapped)

    def write_at(self, position: int, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.pwrite(self._fd, view, position)
                view = view[written:]
                position += written
        except OSError as exc:
            raise _storage_error("write", self._path, exc) from exc
        finally:
            self._size = max(self._size, position)

    def append(self, data: bytes | bytearray | memoryview) -> int:
        start = self._size
        self.write_at(start, data)
        return start

    def truncate(self, size: int) -> None:
        try:
            os.ftruncate(self._fd, size)
        except OSError as exc:
            raise _storage_error("truncate", self._path, exc) from exc
        self._size = size

    def size(self) -> int:
        return self._size

    def sync(self) -> None:
        try:
            os.fdatasync(self._fd)
        except OSError as exc:
            raise _storage_error("fsync", self._path, exc) from exc

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                os.close(fd)
            except OSError as exc:
                raise _storage_error("close", self._path, exc) from exc


class OsFileSystem:
    """The real filesystem."""

    def open(self, path: str, *, create: bool = False) -> FileHandle:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise _storage_error("open", path, exc) from exc
        return OsFileHandle(path, fd)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except OSError as exc:
            raise _storage_error("listdir", path, exc) from exc

    def file_size(self, path: str) -> int:
        try:
            return os.stat(path).st_size
        except OSError as exc:
            raise _storage_error("stat", path, exc) from exc

    def read_file(self, path: str) -> bytes:
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as exc:
            raise _storage_error("read", path, exc) from exc

    def rename(self, src: str, dst: str) -> None:
        try:
            os.replace(src, dst)
        except OSError as exc:
            raise _storage_error("rename", f"{src} -> {dst}", exc) from exc

    def remove(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _storage_error("remove", path, exc) from exc

    def makedirs(self, path: str) -> None:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise _storage_error("mkdir", path, exc) from exc

    def rmdir(self, path: str) -> None:
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _storage_error("rmdir", path, exc) from exc

    def sync_dir(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise _storage_error("fsync directory", path, exc) from exc

    def mtime_ms(self, path: str) -> int:
        try:
            return os.stat(path).st_mtime_ns // 1_000_000
        except OSError as exc:
            raise _storage_error("stat", path, exc) from exc

    def set_mtime_ms(self, path: str, mtime_ms: int) -> None:
        ns = mtime_ms * 1_000_000
        try:
            os.utime(path, ns=(ns, ns))
        except OSError as exc:
            raise _storage_error("utime", path, exc) from exc


class ReadOnlyFileSystem(OsFileSystem):
    """The real filesystem, opened ``O_RDONLY``: a write through a handle fails (``EBADF``) and
    every operation that would change the directory raises :class:`StorageError`. For files
    compactlog only looks at (a report's view of a data directory, Kafka's metadata log)."""

    def open(self, path: str, *, create: bool = False) -> FileHandle:
        if create and not os.path.exists(path):
            raise _refused("create", path)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise _storage_error("open", path, exc) from exc
        return OsFileHandle(path, fd)

    def rename(self, src: str, dst: str) -> None:
        raise _refused("rename", f"{src} -> {dst}")

    def remove(self, path: str) -> None:
        raise _refused("remove", path)

    def makedirs(self, path: str) -> None:
        raise _refused("mkdir", path)

    def rmdir(self, path: str) -> None:
        raise _refused("rmdir", path)

    def sync_dir(self, path: str) -> None:
        raise _refused("fsync", path)

    def set_mtime_ms(self, path: str, mtime_ms: int) -> None:
        raise _refused("utime", path)


def refuse_uri(
    path: str | os.PathLike[str],
    what: str,
    why: str = "it renames, fsyncs and locks files, which object stores and HDFS do not offer "
    "as a filesystem does",
) -> None:
    """Raise :class:`StorageError` if ``path`` is a URI (``s3://...``): ``what`` ("a data
    directory store", ...) changes files in place, which needs local or mounted storage, and a
    URI taken as a local path would create a directory named ``s3:`` instead."""
    text = os.fspath(path)
    if "://" in text:
        raise StorageError(
            f"{what} needs a local or mounted data directory, not {text}: {why} (s3://, "
            "hdfs:// and file:// locations are for reading: the Spark source, batch or "
            "streaming, and the report)"
        )


def _refused(op: str, path: str) -> StorageError:
    return StorageError(f"{op} {path!r} refused: the files are opened read-only")


def write_file_atomically(fs: FileSystem, path: str, data: bytes) -> None:
    """Kafka's checkpoint discipline: write ``<path>.tmp``, fsync it, rename, fsync the directory.

    A crash at any point leaves either the old file or the new one, never a mixture. An I/O
    error (disk full) before the rename leaves the old file as it was, removes the ``.tmp`` if
    it can, and raises the :class:`StorageError`, which names the file and the errno.
    """
    tmp = path + ".tmp"
    try:
        handle = fs.open(tmp, create=True)
        try:
            handle.truncate(0)
            handle.write_at(0, data)
            handle.sync()
        finally:
            handle.close()
        fs.rename(tmp, path)
    except StorageError:
        # A stale .tmp that cannot be removed is harmless: the next write truncates it.
        with contextlib.suppress(StorageError):
            fs.remove(tmp)
        raise
    try:
        fs.sync_dir(os.path.dirname(path) or ".")
    except StorageError as exc:
        raise StorageError(f"{path} was replaced, but the rename is not durable: {exc}") from exc
