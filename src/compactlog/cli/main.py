"""The ``compactlog`` command group (console script ``compactlog``; ``python -m
compactlog.cli.main`` works too). Exit codes and the one-line error rule are described in
:mod:`compactlog.cli`; the commands live in the modules next to this one."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

import click
from click.core import ParameterSource

from compactlog.cli.clean import clean, cleaner_status_command, explain
from compactlog.cli.common import (
    EXIT_CODES_HELP,
    EXIT_DATA_ERROR,
    EXIT_INTERNAL_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    State,
    library_error,
    one_line,
    state,
)
from compactlog.cli.consume import consume
from compactlog.cli.damage import quarantine, salvage
from compactlog.cli.delete_records import delete_records
from compactlog.cli.files import dump_log, log_dirs, verify
from compactlog.cli.groups import groups
from compactlog.cli.produce import produce
from compactlog.cli.roll import roll
from compactlog.cli.serve import serve
from compactlog.cli.spark import spark_group
from compactlog.cli.testca import make_test_ca_command
from compactlog.cli.topics import configs, topics
from compactlog.errors import CompactlogError


def _verbose_requested(args: Sequence[str] | None) -> bool:
    return "--verbose" in (sys.argv[1:] if args is None else args)


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush is quiet."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


#: The group options that may also follow the subcommand (``topics list --data-dir d``), as
#: Kafka's tools take ``--bootstrap-server`` anywhere.
GLOBAL_OPTIONS = ("--data-dir", "--bootstrap-server", "--timeout")


def hoist_global_options(args: list[str]) -> list[str]:
    """``args`` with every global option (and its value) moved before the subcommand.

    Arguments after ``--`` are left alone (a topic may be called ``--data-dir``)."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name = arg.split("=", 1)[0]
        if name in GLOBAL_OPTIONS:
            if "=" in arg or i + 1 == len(args):
                front.append(arg)
                i += 1
            else:
                front.extend(args[i : i + 2])
                i += 2
            continue
        rest.append(arg)
        i += 1
    return front + rest


class CompactlogGroup(click.Group):
    """The root group: turns every error into one line and a documented exit code."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(args))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CompactlogError as exc:
            if state(ctx).verbose:
                traceback.print_exc(file=sys.stderr)
            raise library_error(exc) from exc
        except (CliError, click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (``| head``): stop quietly, as a Unix filter does. This must
            # be caught here: click's own handler would exit with 1, which means "problems".
            _silence_stdout()
            return None
        except KeyboardInterrupt:
            raise
        except OSError as exc:
            # Outside the library's own I/O (stdin, stdout, ...): an I/O failure, not a bug.
            if state(ctx).verbose:
                traceback.print_exc(file=sys.stderr)
            where = f"{exc.filename}: " if exc.filename else ""
            raise CliError(
                f"{where}{exc.strerror or exc} (KAFKA_STORAGE_ERROR)", EXIT_DATA_ERROR
            ) from exc
        except Exception as exc:
            if state(ctx).verbose:
                traceback.print_exc(file=sys.stderr)
            raise CliError(
                f"internal error: {type(exc).__name__}: {exc} (a bug; rerun with --verbose for "
                "the traceback)",
                EXIT_INTERNAL_ERROR,
            ) from exc

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            result = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            click.echo(f"Error: {one_line(exc.format_message())}{hint}", err=True)
            sys.exit(EXIT_USAGE)
        except (CliError, click.ClickException) as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except (click.Abort, KeyboardInterrupt):
            click.echo("Error: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            _silence_stdout()
            sys.exit(EXIT_OK)
        except Exception as exc:  # an error raised outside a command (option parsing, ...)
            if _verbose_requested(args):
                traceback.print_exc(file=sys.stderr)
            click.echo(
                f"Error: internal error: {type(exc).__name__}: {one_line(str(exc))}", err=True
            )
            sys.exit(EXIT_INTERNAL_ERROR)
        sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else EXIT_OK)


class _StderrLogHandler(logging.Handler):
    """Library log records (recovery, ignored files) as one ``warning: ...`` line each."""

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            click.echo(f"{record.levelname.lower()}: {one_line(record.getMessage())}", err=True)


def _show_library_logs(ctx: click.Context, level: int) -> None:
    logger = logging.getLogger("compactlog")
    handler = _StderrLogHandler(level)
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(min(level, logger.getEffectiveLevel()))

    def restore() -> None:
        logger.removeHandler(handler)
        logger.setLevel(previous)

    ctx.call_on_close(restore)


# --------------------------------------------------------------------------------------------
# The group


@click.group(cls=CompactlogGroup, help=None, epilog=EXIT_CODES_HELP)
@click.option(
    "--data-dir",
    envvar="COMPACTLOG_DATA_DIR",
    type=click.Path(file_okay=False, path_type=str),
    help="The data directory (a Kafka log dir). Default: $COMPACTLOG_DATA_DIR.",
)
@click.option(
    "--bootstrap-server",
    envvar="COMPACTLOG_BOOTSTRAP_SERVER",
    metavar="HOST:PORT",
    help="Work through the Kafka protocol against this broker (compactlog serve or any Kafka "
    "broker) instead of a data directory. Default: $COMPACTLOG_BOOTSTRAP_SERVER.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Network mode: seconds to wait for the broker before giving up (exit code 5).",
)
@click.option("--verbose", is_flag=True, help="Show the traceback of an error.")
@click.version_option(package_name="compactlog", prog_name="compactlog")
@click.pass_context
def main(
    ctx: click.Context,
    data_dir: str | None,
    bootstrap_server: str | None,
    timeout: float,
    verbose: bool,
) -> None:
    """compactlog: Kafka's log storage and compaction in a data directory.

    Topics, configs, producing and consuming work like Kafka's tools and kcat; dump-log,
    log-dirs and verify inspect the files. With --bootstrap-server HOST:PORT, topics, configs,
    produce, consume, groups and delete-records work through the Kafka protocol against a
    running broker (compactlog serve or Kafka); --data-dir and --bootstrap-server may also
    follow the subcommand.

    \b
    Example:
      export COMPACTLOG_DATA_DIR=/var/lib/compactlog
      compactlog topics create fruit-prices --config cleanup.policy=compact
      printf 'grape=$2.69\\nlime=$0.49\\n' | compactlog produce fruit-prices --key-separator =
      compactlog consume fruit-prices --format '%o\\t%k\\t%s\\n'
    """
    if data_dir and bootstrap_server:
        # One from the command line beats the other from the environment; two of a kind clash.
        sources = (
            ctx.get_parameter_source("data_dir"),
            ctx.get_parameter_source("bootstrap_server"),
        )
        if sources == (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            bootstrap_server = None
        elif sources == (ParameterSource.ENVIRONMENT, ParameterSource.COMMANDLINE):
            data_dir = None
    if data_dir and bootstrap_server:
        raise CliError(
            "give --data-dir or --bootstrap-server, not both (check COMPACTLOG_DATA_DIR and "
            "COMPACTLOG_BOOTSTRAP_SERVER)",
            EXIT_USAGE,
        )
    ctx.obj = State(data_dir, verbose, bootstrap_server or None, timeout)
    _show_library_logs(ctx, logging.INFO if verbose else logging.WARNING)


for command in (topics, configs, groups, produce, consume, delete_records):
    main.add_command(command)
for command in (dump_log, log_dirs, verify):
    main.add_command(command)
for command in (clean, cleaner_status_command, explain, spark_group, serve):
    main.add_command(command)
for command in (salvage, quarantine, roll, make_test_ca_command):
    main.add_command(command)


def all_commands(
    group: click.Group = main, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command and group below ``group``, with its path (for docs and tests)."""
    for name, command in sorted(group.commands.items()):
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from all_commands(command, (*prefix, name))


if __name__ == "__main__":
    main()
