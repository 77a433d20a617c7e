"""Data directories on storage every executor reaches: ``s3://``, ``hdfs://`` and ``file://``.

The Spark side of compactlog reads a data directory (the source, the report) through the
storage layer's filesystem seam (:class:`~compactlog.storage.fs.FileSystem`). A plain path is
the local filesystem, as always; a URI is read through :mod:`pyarrow.fs`, which ships S3 and
HDFS clients in the pyarrow wheel the Spark extra already installs (fsspec would need s3fs,
aiobotocore and botocore for S3, and pyarrow's HDFS client underneath for HDFS anyway).

    spark.read.format("compactlog")
        .option("fs.s3.endpoint", "http://minio:9000")     # else AWS_ENDPOINT_URL_S3, or AWS
        .load("s3://backups/broker-1/data")

Theory of operation:

* **Read-only.** :class:`ArrowReadOnlyFileSystem` implements the seam's reads (``open`` gives a
  handle with ranged reads: one ``GET`` with a ``Range`` per ``read_at``, never the whole
  object) and refuses every change with a :class:`~compactlog.errors.StorageError` naming the
  location: writing, compacting and serving need rename, fsync and a directory lock, which an
  object store does not give (see :func:`~compactlog.storage.fs.refuse_uri`).
* **Options, not objects.** A live pyarrow filesystem is never shipped to an executor. The
  ``fs.*`` options (:data:`FS_OPTIONS`, small strings) travel with the reader;
  :func:`configure` records them for their location in the process (the driver when the reader
  is made, each executor when a task starts), and :func:`filesystem` builds, once per process
  and per location and options, the pyarrow filesystem of a URI. Without options, pyarrow's
  standard sources apply (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
  ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL_S3``, ``~/.aws``, instance
  metadata; for HDFS ``HADOOP_HOME``, ``CLASSPATH``, ``ARROW_LIBHDFS_DIR``).
* **Paths stay URIs.** Directory and file names are joined with :func:`os.path.join` as for
  local paths (``s3://bucket/data/orders-0/00000000000000000000.log``), so every message names
  the object as the user would; only the adapter turns one into pyarrow's path.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from compactlog.errors import ConfigError, StorageError
from compactlog.storage.fs import FileHandle, FileSystem, ReadOnlyFileSystem, refuse_uri

__all__ = ["configure", "filesystem", "fs_options", "is_uri", "refuse_uri"]

#: The schemes a data directory may be read from; ``s3a`` (Hadoop's name) is read as ``s3``.
SCHEMES = ("s3", "s3a", "hdfs", "viewfs", "file")
#: The storage options, as Spark options (names compared lower-cased, as Spark passes them).
FS_OPTIONS = (
    "fs.s3.endpoint",
    "fs.s3.region",
    "fs.s3.accessKey",
    "fs.s3.secretKey",
    "fs.s3.sessionToken",
    "fs.s3.anonymous",
    "fs.s3.checksums",
    "fs.hdfs.user",
    "fs.hdfs.kerberosTicketCache",
)
_LOWER = {name.lower(): name for name in FS_OPTIONS}
#: ``fs.s3.checksums``: the AWS SDK's ``AWS_REQUEST_CHECKSUM_CALCULATION`` and
#: ``AWS_RESPONSE_CHECKSUM_VALIDATION``. Since 2025 the SDK asks for checksums by default, and
#: S3-compatible servers that do not implement them (s3proxy, older MinIO and Ceph) then fail
#: every ranged read ("Failed to flush response stream"); ``when_required`` turns that off.
CHECKSUM_MODES = ("when_supported", "when_required")

_lock = threading.Lock()
#: Per process: the options recorded for a location ("s3://bucket").
_configured: dict[str, tuple[tuple[str, str], ...]] = {}
#: Per process: pyarrow filesystems built, by location and options.
_built: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}


def is_uri(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a URI (``scheme://...``) rather than a local path; a scheme that
    compactlog cannot read raises :class:`ConfigError` naming the ones it can."""
    text = os.fspath(path)
    if "://" not in text:
        return False
    scheme = text.split("://", 1)[0].lower()
    if scheme not in SCHEMES:
        raise ConfigError(
            f"cannot read {text!r}: the scheme {scheme}:// is not supported (use a local path "
            "or one of " + ", ".join(f"{s}://" for s in SCHEMES) + ")"
        )
    return True


def location(path: str) -> str:
    """``scheme://authority`` of a URI (the bucket of an S3 URI, the namenode of an HDFS one)."""
    parts = urlsplit(path)
    return f"{parts.scheme.lower()}://{parts.netloc}"


def fs_options(options: Mapping[str, str]) -> dict[str, str]:
    """The ``fs.*`` options of ``options`` by their canonical names; an unknown ``fs.*`` name
    raises, naming the known ones (a misspelt endpoint must not fall back to AWS silently)."""
    found = {}
    for key, value in options.items():
        name = str(key).lower()
        if not name.startswith("fs."):
            continue
        if name not in _LOWER:
            raise ConfigError(
                f"unknown storage option {key}; the storage options are: " + ", ".join(FS_OPTIONS)
            )
        found[_LOWER[name]] = str(value)
    mode = found.get("fs.s3.checksums")
    if mode is not None and mode.lower() not in CHECKSUM_MODES:
        raise ConfigError(
            f"option fs.s3.checksums must be one of {', '.join(CHECKSUM_MODES)}, not {mode!r}"
        )
    anonymous = found.get("fs.s3.anonymous")
    if anonymous is not None and anonymous.lower() not in ("true", "false"):
        raise ConfigError(f"option fs.s3.anonymous must be true or false, not {anonymous!r}")
    return found


def configure(path: str, options: Mapping[str, str]) -> None:
    """Record the ``fs.*`` options of ``options`` for ``path``'s location in this process (a
    local path: nothing to record). The reader calls it on the driver and in each task."""
    if not is_uri(path):
        return
    chosen = tuple(sorted(fs_options(options).items()))
    with _lock:
        _configured[location(path)] = chosen


def filesystem(path: str) -> FileSystem:
    """The read-only filesystem that reads ``path``: the local one for a plain path, pyarrow's
    for a URI (with the options :func:`configure` recorded for its location)."""
    if not is_uri(path):
        return ReadOnlyFileSystem()
    where = location(path)
    with _lock:
        chosen = _configured.get(where, ())
        built = _built.get((where, chosen))
        if built is None:
            built = _build(path, dict(chosen))
            _built[(where, chosen)] = built
    return ArrowReadOnlyFileSystem(built, path.split("://", 1)[0].lower())


def _build(path: str, options: dict[str, str]) -> Any:
    from pyarrow import fs as pafs  # noqa: PLC0415 - the Spark extra's, loaded on use

    scheme = path.split("://", 1)[0].lower()
    try:
        if scheme in ("s3", "s3a"):
            mode = options.get("fs.s3.checksums")
            if mode is not None:  # the SDK reads these when a client is made
                os.environ["AWS_REQUEST_CHECKSUM_CALCULATION"] = mode.lower()
                os.environ["AWS_RESPONSE_CHECKSUM_VALIDATION"] = mode.lower()
            kwargs: dict[str, Any] = {}
            endpoint = options.get("fs.s3.endpoint")
            if endpoint:
                kwargs["endpoint_override"] = endpoint
                if endpoint.startswith("http://"):
                    kwargs["scheme"] = "http"
            for option, arg in (
                ("fs.s3.region", "region"),
                ("fs.s3.accessKey", "access_key"),
                ("fs.s3.secretKey", "secret_key"),
                ("fs.s3.sessionToken", "session_token"),
            ):
                if options.get(option):
                    kwargs[arg] = options[option]
            if options.get("fs.s3.anonymous", "false").lower() == "true":
                kwargs["anonymous"] = True
            if "endpoint_override" not in kwargs and "region" not in kwargs:
                # pyarrow's own URI parsing honours AWS_ENDPOINT_URL_S3 and friends.
                return pafs.FileSystem.from_uri("s3://" + path.split("://", 1)[1])[0]
            return pafs.S3FileSystem(**kwargs)
        if scheme in ("hdfs", "viewfs"):
            parts = urlsplit(path)
            host = f"{parts.scheme}://{parts.hostname}" if parts.hostname else "default"
            return pafs.HadoopFileSystem(
                host,
                parts.port or 0,
                user=options.get("fs.hdfs.user"),
                kerb_ticket=options.get("fs.hdfs.kerberosTicketCache"),
            )
        return pafs.LocalFileSystem()
    except (OSError, ValueError, TypeError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        hint = ""
        if scheme in ("hdfs", "viewfs"):
            hint = (
                " (pyarrow's HDFS client needs JAVA_HOME, HADOOP_HOME and "
                "CLASSPATH=$(hadoop classpath --glob) on the driver and every executor)"
            )
        raise StorageError(f"cannot open the filesystem of {path}: {first}{hint}") from exc


def _arrow_path(uri: str) -> str:
    """pyarrow's path of ``uri``: ``bucket/key`` for S3, the absolute path for HDFS and file."""
    scheme, rest = uri.split("://", 1)
    if scheme.lower() in ("s3", "s3a"):
        return rest.rstrip("/")
    parts = urlsplit(uri)
    return parts.path.rstrip("/") or "/"


class ArrowFileHandle:
    """A file read through pyarrow: ranged reads, no writes."""

    def __init__(self, path: str, file: Any) -> None:
        self._path = path
        self._file = file
        self._size = int(file.size())

    @property
    def path(self) -> str:
        return self._path

    def read_at(self, position: int, size: int) -> bytes:
        size = max(0, min(size, self._size - position))
        if size == 0:
            return b""
        try:
            return bytes(self._file.read_at(size, position))
        except OSError as exc:
            raise StorageError(f"cannot read {self._path} at position {position}: {exc}") from exc

    def readinto_at(self, position: int, buffer: bytearray | memoryview) -> int:
        data = self.read_at(position, len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)

    def map_read(self, size: int) -> memoryview:
        return memoryview(self.read_at(0, size))

    def write_at(self, position: int, data: bytes | bytearray | memoryview) -> None:
        raise _refused("write", self._path)

    def append(self, data: bytes | bytearray | memoryview) -> int:
        raise _refused("append to", self._path)

    def truncate(self, size: int) -> None:
        raise _refused("truncate", self._path)

    def size(self) -> int:
        return self._size

    def sync(self) -> None:
        raise _refused("sync", self._path)

    def close(self) -> None:
        self._file.close()


class ArrowReadOnlyFileSystem:
    """The storage layer's :class:`~compactlog.storage.fs.FileSystem` over a pyarrow
    filesystem, for reading only. Paths are URIs."""

    def __init__(self, fs: Any, scheme: str) -> None:
        self._fs = fs
        self._scheme = scheme

    def _info(self, path: str) -> Any:
        try:
            return self._fs.get_file_info(_arrow_path(path))
        except OSError as exc:
            raise StorageError(f"cannot look up {path}: {exc}") from exc

    def open(self, path: str, *, create: bool = False) -> FileHandle:
        try:
            file = self._fs.open_input_file(_arrow_path(path))
        except FileNotFoundError as exc:
            if create:
                raise _refused("create", path) from exc
            raise StorageError(f"cannot open {path}: no such file") from exc
        except OSError as exc:
            raise StorageError(f"cannot open {path}: {exc}") from exc
        return ArrowFileHandle(path, file)

    def exists(self, path: str) -> bool:
        from pyarrow.fs import FileType  # noqa: PLC0415

        return bool(self._info(path).type != FileType.NotFound)

    def is_dir(self, path: str) -> bool:
        from pyarrow.fs import FileType  # noqa: PLC0415

        return bool(self._info(path).type == FileType.Directory)

    def listdir(self, path: str) -> list[str]:
        from pyarrow.fs import FileSelector  # noqa: PLC0415

        try:
            infos = self._fs.get_file_info(FileSelector(_arrow_path(path)))
        except OSError as exc:
            raise StorageError(f"cannot list {path}: {exc}") from exc
        return sorted(info.base_name for info in infos)

    def list_objects(self, path: str) -> dict[str, tuple[int, int]]:
        """``{name: (size, modification time in whole seconds)}`` of the files directly under
        ``path``, from one listing (one ``ListObjects`` on S3). Objects are replaced, never
        changed in place, so the pair tells a replaced object from the one listed before (whole
        seconds: S3 gives a listing milliseconds and a ``HEAD`` seconds). A missing directory
        raises :class:`FileNotFoundError`, as :func:`os.listdir` does."""
        from pyarrow.fs import FileSelector, FileType  # noqa: PLC0415

        try:
            infos = self._fs.get_file_info(FileSelector(_arrow_path(path)))
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot list {path}: {exc}") from exc
        return {info.base_name: _object_id(info) for info in infos if info.type == FileType.File}

    def object_id(self, path: str) -> tuple[int, int] | None:
        """``(size, modification time in whole seconds)`` of the file at ``path`` (as
        :meth:`list_objects` gives it), or ``None`` if there is none."""
        from pyarrow.fs import FileType  # noqa: PLC0415

        info = self._info(path)
        return _object_id(info) if info.type == FileType.File else None

    def file_size(self, path: str) -> int:
        info = self._info(path)
        if info.size is None:
            raise StorageError(f"cannot stat {path}: no such file")
        return int(info.size)

    def read_file(self, path: str) -> bytes:
        handle = self.open(path)
        try:
            return handle.read_at(0, handle.size())
        finally:
            handle.close()

    def mtime_ms(self, path: str) -> int:
        info = self._info(path)
        if info.mtime_ns is None:
            raise StorageError(f"cannot stat {path}: no modification time")
        return int(info.mtime_ns) // 1_000_000

    def rename(self, src: str, dst: str) -> None:
        raise _refused("rename", src)

    def remove(self, path: str) -> None:
        raise _refused("remove", path)

    def makedirs(self, path: str) -> None:
        raise _refused("create the directory", path)

    def rmdir(self, path: str) -> None:
        raise _refused("remove the directory", path)

    def sync_dir(self, path: str) -> None:
        raise _refused("sync", path)

    def set_mtime_ms(self, path: str, mtime_ms: int) -> None:
        raise _refused("touch", path)


def _object_id(info: Any) -> tuple[int, int]:
    mtime = -1 if info.mtime_ns is None else int(info.mtime_ns) // 1_000_000_000
    return int(info.size or 0), mtime


def _refused(op: str, path: str) -> StorageError:
    return StorageError(
        f"cannot {op} {path}: compactlog only reads from s3://, hdfs:// and file:// locations"
    )
