"""What every command shares: exit codes, the one-line error, the data directory and its store."""

from __future__ import annotations

import contextlib
import difflib
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol, TypeVar

import click

from compactlog import errors
from compactlog.errors import (
    CompactlogError,
    ConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    UnsupportedFileError,
)
from compactlog.log_manager import LogManager
from compactlog.storage.readonly import ReadOnlyDataDir
from compactlog.storage.store import Store
from compactlog.storage.topic_names import validate_topic_name

EXIT_OK = 0
EXIT_PROBLEMS_FOUND = 1
EXIT_USAGE = 2
EXIT_DATA_ERROR = 3
EXIT_INTERNAL_ERROR = 4
EXIT_UNREACHABLE = 5
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """\b
Exit codes:
  0    success (also when stdout is closed early, as by "| head")
  1    verify found problems; clean --until-clean stopped at --max-rounds with dirty data left
  2    bad usage or invalid input (options, topic names, configs, --offset, format strings)
  3    a storage or data error (printed with its Kafka error name)
  4    an internal error (a bug: rerun with --verbose for the traceback)
  5    the broker of --bootstrap-server could not be reached (within --timeout seconds)
  130  interrupted"""

#: Library errors that mean "the input was wrong", as opposed to "the data or disk was".
USAGE_ERRORS: tuple[type[CompactlogError], ...] = (
    InvalidTopicError,
    ConfigError,
    InvalidPartitionsError,
    UnsupportedFileError,
)

#: Kafka's error names by code, from the constants in :mod:`compactlog.errors`.
KAFKA_ERROR_NAMES: dict[int, str] = {
    value: name
    for name, value in vars(errors).items()
    if name.isupper() and isinstance(value, int) and not isinstance(value, bool)
}

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")

# --------------------------------------------------------------------------------------------
# Errors: one line, a documented exit code


def one_line(text: str) -> str:
    return " ".join(text.split())


class CliError(Exception):
    """An error printed as ``Error: <message>`` on one line, with the given exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(one_line(message))
        self.message = one_line(message)
        self.exit_code = exit_code

    def show(self) -> None:
        click.echo(f"Error: {self.message}", err=True)


def library_error(exc: CompactlogError) -> CliError:
    """The one-line CLI error for a library error: the message and the Kafka error name."""
    name = KAFKA_ERROR_NAMES.get(exc.error_code, str(exc.error_code))
    code = EXIT_USAGE if isinstance(exc, USAGE_ERRORS) else EXIT_DATA_ERROR
    return CliError(f"{exc} ({name})", code)


@dataclass
class State:
    """What the group options leave for the commands: a data directory (local mode) or a
    broker's address (network mode), never both."""

    data_dir: str | None
    verbose: bool
    bootstrap_server: str | None = None
    timeout: float = 10.0

    def require_data_dir(self) -> str:
        if not self.data_dir:
            if self.bootstrap_server:
                raise CliError(
                    "this command works on a data directory only: give --data-dir DIR instead "
                    "of --bootstrap-server",
                    EXIT_USAGE,
                )
            raise CliError(
                "no data directory: give --data-dir DIR or set COMPACTLOG_DATA_DIR", EXIT_USAGE
            )
        return self.data_dir

    def require_target(self) -> None:
        """For the commands with both modes: one of --data-dir and --bootstrap-server."""
        if not self.data_dir and not self.bootstrap_server:
            raise CliError(
                "no data directory and no broker: give --data-dir DIR (or set "
                "COMPACTLOG_DATA_DIR) or --bootstrap-server HOST:PORT (or set "
                "COMPACTLOG_BOOTSTRAP_SERVER)",
                EXIT_USAGE,
            )


def state(ctx: click.Context) -> State:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, State) else State(None, False)


def unknown_topic(topic: str, known: Iterable[str]) -> CliError:
    """The error for a topic that does not exist, with the closest existing name (as click
    offers for an unknown command); the same in both modes."""
    close = difflib.get_close_matches(topic, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return CliError(f"unknown topic {topic!r}{hint} (UNKNOWN_TOPIC_OR_PARTITION)", EXIT_DATA_ERROR)


class _Closeable(Protocol):
    def close(self) -> None: ...


_Opened = TypeVar("_Opened", bound=_Closeable)


def _data_dir(ctx: click.Context, create: bool) -> str:
    path = state(ctx).require_data_dir()
    if not create and not os.path.isdir(path):
        raise CliError(
            f"the data directory {path} does not exist (topics create makes it)", EXIT_USAGE
        )
    return path


@contextlib.contextmanager
def _opened(path: str, opener: Callable[[str], _Opened]) -> Iterator[_Opened]:
    try:
        opened = opener(path)
    except USAGE_ERRORS as exc:
        # Opening takes no user input: a bad name or config here comes from the files.
        raise CliError(f"{path}: {library_error(exc).message}", EXIT_DATA_ERROR) from exc
    try:
        yield opened
    finally:
        opened.close()


def open_store(
    ctx: click.Context, *, create: bool = False
) -> contextlib.AbstractContextManager[Store]:
    """The store of ``--data-dir``, closed (cleanly) when the command ends."""
    return _opened(_data_dir(ctx, create), Store.open)


def open_files(ctx: click.Context) -> contextlib.AbstractContextManager[ReadOnlyDataDir]:
    """``--data-dir`` opened to look at: no lock, nothing written (a broker may hold it)."""
    return _opened(_data_dir(ctx, False), ReadOnlyDataDir)


@contextlib.contextmanager
def open_view(ctx: click.Context, topic: str | None = None) -> Iterator[ReadOnlyDataDir]:
    """``--data-dir`` opened read-only for a read-only command (no lock, nothing created or
    written, so it works while a broker holds the directory); ``topic``, when given, must
    exist (else the "did you mean" error)."""
    path = state(ctx).require_data_dir()
    if not os.path.isdir(path):
        raise CliError(f"the data directory {path} does not exist", EXIT_USAGE)
    with _opened(path, ReadOnlyDataDir) as view:
        if topic is not None and topic not in view.topics():
            raise unknown_topic(topic, view.topics())
        yield view


def check_local_topic(store: Store, topic: str) -> None:
    """Fail with the "did you mean" error when the store has no topic ``topic``."""
    if topic not in store.topics():
        raise unknown_topic(topic, store.topics())


def open_logs(ctx: click.Context) -> contextlib.AbstractContextManager[LogManager]:
    """The store of ``--data-dir`` with its log cleaner (a :class:`LogManager`), closed
    (cleanly) when the command ends."""
    return _opened(_data_dir(ctx, False), LogManager.open)


def binary_stdout() -> BinaryIO:
    # sys.stdout is looked up at call time, so CliRunner's replacement is honoured.
    return sys.stdout.buffer


def check_topic_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse an illegal topic name before anything touches the disk (exit 2)."""
    if value is not None:
        try:
            validate_topic_name(value)
        except InvalidTopicError as exc:
            raise library_error(exc) from exc
    return value
