"""Pack the Python environment a cluster's executors need: compactlog and its run-time
dependencies, without PySpark.

Spark gives every Python worker of a cluster its own ``pyspark.zip`` and ``py4j`` (from the
workers' Spark installation), so the 460 MB of jars and PySpark's own Python code need not
travel. What the workers lack is compactlog and the libraries it imports (numpy, numba and its
llvmlite, pyarrow, pandas, crc32c, cramjam...). This module writes them as a virtual
environment in an archive for ``spark.archives`` (``--archives env.tar.gz#env``), the layout
venv-pack writes, but taken from the running interpreter's environment, package by package
(from each distribution's ``RECORD``), walking compactlog's requirements:

    python -m compactlog.spark.pack env.tar.gz
    spark-submit --master spark://HOST:7077 --archives env.tar.gz#env \\
        --conf spark.pyspark.python=./env/bin/python job.py ...

The archive holds no Python installation: its ``bin/python`` is a copy of the launcher of the
base interpreter (as ``python -m venv --copies`` makes), which finds the standard library (and,
for a shared build, ``libpython``) at the base installation's path, so every node needs that
same Python at the same path (venv-pack's rule too).

Spark unpacks ``.tar.gz``/``.tgz`` and ``.zip`` with their files' modes, a plain ``.tar``
without them (measured with Spark 4.3: ``bin/python`` loses its execute bit), so ``.tar`` is
refused. Compression is gzip's level 1: a third of the size in a quarter of level 6's time.
"""

from __future__ import annotations

import os
import sys
import tarfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from compactlog.errors import ConfigError

#: Provided to every Python worker by the cluster's Spark installation.
PROVIDED = frozenset({"pyspark", "py4j"})
#: The distribution packed from the imported package's directory rather than its ``RECORD``
#: (an editable install's ``RECORD`` names only a ``.pth`` file pointing at a source tree).
SELF = "compactlog"
SUFFIXES = (".tar.gz", ".tgz", ".zip")
NUMBA_CACHE = (".nbi", ".nbc")  # numba's cache index and compiled kernels
GZIP_LEVEL = 1  # 702 MB -> 251 MB in 14 s; level 6: 223 MB in 52 s (measured)


@dataclass
class Packed:
    path: str
    distributions: list[str]
    files: int = 0
    bytes_in: int = 0
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)

    @property
    def archive_bytes(self) -> int:
        return os.path.getsize(self.path)


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name  # noqa: PLC0415 - only when packing

    return str(canonicalize_name(name))


def runtime_distributions(extras: Sequence[str] = ("spark",)) -> list[metadata.Distribution]:
    """compactlog's distribution and every distribution it needs at run time with ``extras``,
    transitively, except those Spark provides (:data:`PROVIDED`)."""
    from packaging.requirements import Requirement  # noqa: PLC0415

    try:
        root = metadata.distribution(SELF)
    except metadata.PackageNotFoundError as exc:
        raise ConfigError(
            "compactlog is not installed in this environment (pip install 'compactlog[spark]'), "
            "so its dependencies cannot be found"
        ) from exc
    found: dict[str, metadata.Distribution] = {SELF: root}
    pending: list[tuple[metadata.Distribution, tuple[str, ...]]] = [(root, tuple(extras))]
    while pending:
        dist, wanted = pending.pop()
        requires = dist.requires or []
        if dist is root:
            requires = _source_requires(extras) or requires
        for line in requires:
            req = Requirement(line)
            if req.marker is not None and not any(
                req.marker.evaluate({"extra": extra}) for extra in (*wanted, "")
            ):
                continue
            name = _canonical(req.name)
            if name in PROVIDED or name in found:
                continue
            try:
                found[name] = metadata.distribution(req.name)
            except metadata.PackageNotFoundError as exc:
                raise ConfigError(
                    f"{req.name} (required by {dist.metadata['Name']}) is not installed"
                ) from exc
            pending.append((found[name], tuple(req.extras)))
    return [found[name] for name in sorted(found)]


def _source_requires(extras: Sequence[str]) -> list[str] | None:
    """compactlog's requirements from the ``pyproject.toml`` of the source tree it was imported
    from (an editable install or ``PYTHONPATH=src``), whose installed metadata may be older than
    the code; None when it was imported from an installed package."""
    import tomllib  # noqa: PLC0415

    import compactlog  # noqa: PLC0415

    pyproject = Path(compactlog.__file__).resolve().parents[2] / "pyproject.toml"
    if not pyproject.is_file():
        return None
    project = tomllib.loads(pyproject.read_text()).get("project", {})
    if project.get("name") != SELF:
        return None
    optional = project.get("optional-dependencies", {})
    return [*project.get("dependencies", []), *(r for e in extras for r in optional.get(e, []))]


def _site_packages() -> str:
    return f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


def _dist_files(dist: metadata.Distribution) -> Iterable[tuple[Path, str]]:
    """(file on disk, path inside site-packages) of an installed distribution's files."""
    if dist.files is None:
        raise ConfigError(f"{dist.metadata['Name']} has no RECORD of its files: cannot pack it")
    for entry in dist.files:
        relative = entry.as_posix()
        if relative.startswith("../") or relative.startswith("/"):
            continue  # console scripts and data outside site-packages: not imported by workers
        yield Path(str(dist.locate_file(entry))), relative


def _self_files() -> Iterable[tuple[Path, str]]:
    """compactlog's package: its sources and data, and the numba kernels already compiled from
    these sources (``__pycache__/*.nbi``, ``*.nbc``), not its bytecode. numba loads a cached
    kernel only while the source file's modification time and size are the ones it was
    compiled from, which ``.tar.gz`` keeps (``.zip`` does not, as Spark unpacks it), so an
    executor skips compiling them (about 10 s per Python worker with one core); on a CPU unlike
    the packing machine's numba compiles them again."""
    import compactlog  # noqa: PLC0415

    package = Path(compactlog.__file__).parent
    for directory, dirs, names in os.walk(package):
        dirs.sort()
        cache = os.path.basename(directory) == "__pycache__"
        for name in sorted(names):
            if cache and not name.endswith(NUMBA_CACHE):
                continue
            path = Path(directory) / name
            yield path, (Path(SELF) / path.relative_to(package)).as_posix()


def pyvenv_cfg() -> str:
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    version = ".".join(str(n) for n in sys.version_info[:3])
    return f"home = {base.parent}\ninclude-system-site-packages = false\nversion = {version}\n"


def pack(out: str, extras: Sequence[str] = ("spark",)) -> Packed:
    """Write compactlog and its run-time dependencies (not PySpark) to ``out`` (``.tar.gz``,
    ``.tgz`` or ``.zip``) as a virtual environment whose ``bin/python`` is a copy of the
    running interpreter's base launcher. Written to a temporary name, then renamed."""
    if not out.endswith(SUFFIXES):
        raise ConfigError(
            f"{out}: the archive's name must end with {', '.join(SUFFIXES)} (Spark unpacks a "
            "plain .tar without the files' modes, so bin/python would not be executable)"
        )
    started = time.monotonic()
    dists = runtime_distributions(extras)
    packed = Packed(out, [f"{d.metadata['Name']}=={d.version}" for d in dists])
    site = _site_packages()
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    entries: list[tuple[Path, str]] = [(base, "bin/python")]
    for dist in dists:
        own = _canonical(dist.metadata["Name"]) == SELF
        for path, relative in _self_files() if own else _dist_files(dist):
            if path.is_file():
                entries.append((path, f"{site}/{relative}"))
            else:
                packed.skipped.append(relative)  # a RECORD line whose file is gone
    tmp = f"{out}.tmp-{os.getpid()}"
    try:
        if out.endswith(".zip"):
            _write_zip(tmp, entries)
        else:
            _write_tar(tmp, entries)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    packed.files = len(entries)
    packed.bytes_in = sum(path.stat().st_size for path, _ in entries)
    packed.seconds = time.monotonic() - started
    return packed


def _write_tar(path: str, entries: Sequence[tuple[Path, str]]) -> None:
    # Names without a leading "./": Hadoop's untar refuses a "./" entry.
    with tarfile.open(path, "w:gz", compresslevel=GZIP_LEVEL) as tar:
        _add_text(tar, "pyvenv.cfg", pyvenv_cfg())
        for source, name in entries:
            tar.add(source, name, recursive=False)


def _write_zip(path: str, entries: Sequence[tuple[Path, str]]) -> None:
    import zipfile  # noqa: PLC0415

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=GZIP_LEVEL) as archive:
        archive.writestr("pyvenv.cfg", pyvenv_cfg())
        for source, name in entries:
            archive.write(source, name)


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    import io  # noqa: PLC0415

    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print(
            "usage: python -m compactlog.spark.pack OUT.tar.gz|OUT.tgz|OUT.zip\n"
            "  e.g. python -m compactlog.spark.pack env.tar.gz && spark-submit --archives "
            "env.tar.gz#env --conf spark.pyspark.python=./env/bin/python job.py",
            file=sys.stderr,
        )
        return 2
    try:
        packed = pack(args[0])
    except ConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 3
    print(
        f"{packed.path}: {len(packed.distributions)} distributions, {packed.files:,} files, "
        f"{packed.bytes_in / 1e6:,.1f} MB -> {packed.archive_bytes / 1e6:,.1f} MB "
        f"in {packed.seconds:.1f} s (interpreter: {pyvenv_cfg().split(chr(10))[0][7:]})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
