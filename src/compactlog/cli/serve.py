"""``serve``: run the Kafka-protocol broker over the data directory (``kafka-server-start``)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import sys
from collections.abc import Iterator, Sequence
from logging.handlers import WatchedFileHandler
from typing import TYPE_CHECKING

import click

from compactlog.cli.common import EXIT_INTERRUPTED, EXIT_USAGE, CliError, library_error, state
from compactlog.errors import ConfigError
from compactlog.storage.config import parse_config_assignments

if TYPE_CHECKING:
    from compactlog.broker.server import Broker

logger = logging.getLogger("compactlog.broker")

#: Kafka's default listener (``compactlog.broker.server.DEFAULT_LISTEN``; the broker is imported
#: only when ``serve`` runs, so that the other commands start without it).
DEFAULT_LISTEN = "127.0.0.1:9092"

_BIND_ERRORS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)


def _address(value: str | None, option: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (``[::1]:9092`` for IPv6; an empty host binds every interface)."""
    if value is None:
        return None
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise click.BadParameter(f"{value!r}: expected HOST:PORT", param_hint=option)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


def _raise_open_files_limit() -> None:
    """Raise the soft limit of open files to the hard limit, as the JVM does for Kafka: every
    connection and every segment file takes a descriptor."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


#: Kafka's log4j layout (``[%d] %p %m (%c)%n``): the time, the level, the message, the logger.
LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


@contextlib.contextmanager
def _broker_log(verbose: bool, log_file: str | None) -> Iterator[None]:
    """The broker's, the cleaner's and the storage layer's log lines (listening, refused
    connections and requests, created topics, the cleaner's summaries, recovery, stopping) on
    stderr and, with ``--log-file``, appended to that file too, in Kafka's layout, at INFO
    (DEBUG with --verbose)."""
    package_logger = logging.getLogger("compactlog")
    formatter = logging.Formatter(LOG_FORMAT)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        try:
            # Reopened when logrotate (or anyone) moves or deletes it, as a daemon's log is.
            handlers.append(WatchedFileHandler(log_file, mode="a", encoding="utf-8"))
        except OSError as exc:
            raise CliError(
                f"cannot open the log file {log_file}: {exc.strerror or exc}", EXIT_USAGE
            ) from exc
    # The CLI's own "warning: ..." handler is set aside while the broker logs: one line each.
    saved = package_logger.level, package_logger.propagate, package_logger.handlers[:]
    for handler in saved[2]:
        package_logger.removeHandler(handler)
    for handler in handlers:
        handler.setFormatter(formatter)
        package_logger.addHandler(handler)
    package_logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    package_logger.propagate = False
    try:
        yield
    finally:
        for handler in handlers:
            package_logger.removeHandler(handler)
            handler.close()
        for handler in saved[2]:
            package_logger.addHandler(handler)
        package_logger.setLevel(saved[0])
        package_logger.propagate = saved[1]


async def _serve(broker: Broker) -> None:
    from compactlog.broker.server import SignalStopper  # noqa: PLC0415 - see DEFAULT_LISTEN

    stop = asyncio.Event()
    with SignalStopper(broker, stop.set, EXIT_INTERRUPTED):
        try:
            await broker.start()
        except OSError as exc:
            if exc.errno in _BIND_ERRORS:
                where = " ".join(f"{i.host}:{i.port}" for i in broker.listeners) or (
                    "{}:{}".format(*broker.listen)
                )
                raise CliError(
                    f"cannot listen on {where}: {exc.strerror} (choose another --listen or "
                    "listeners)",
                    EXIT_USAGE,
                ) from exc
            raise
        await stop.wait()
        await broker.stop()


@click.command()
@click.option(
    "--listen",
    metavar="HOST:PORT",
    default=DEFAULT_LISTEN,
    show_default=True,
    help="Address to accept clients on (port 0: any free port; an empty HOST: every interface): "
    "one PLAINTEXT listener. For several listeners, TLS or SASL use --config listeners=... "
    "instead. A PLAINTEXT address other than loopback is refused unless an authorizer is "
    "configured or compactlog.allow.plaintext.without.authorizer=true.",
)
@click.option(
    "--advertise",
    metavar="HOST:PORT",
    help="Address clients are told to connect to (Kafka's advertised.listeners). Default: the "
    "listening address.",
)
@click.option(
    "--metrics",
    "metrics",
    metavar="HOST:PORT",
    help="Serve Prometheus metrics at http://HOST:PORT/metrics, and the admin routes "
    "(POST /v1/topics/T/partitions/P/roll, used by 'compactlog roll --admin-url') to "
    "loopback clients.",
)
@click.option(
    "--admin-allow-remote-unauthenticated",
    "admin_allow_remote",
    is_flag=True,
    help="Let clients other than loopback ones use the admin routes. They have no "
    "authentication: anyone who reaches the --metrics port can then roll segments.",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="NAME=VALUE",
    help="A broker setting by Kafka's name (message.max.bytes, auto.create.topics.enable, "
    "log.cleaner.threads, group.initial.rebalance.delay.ms, ...); repeatable.",
)
@click.option(
    "--log-file",
    metavar="PATH",
    type=click.Path(dir_okay=False, path_type=str),
    help="Append the broker's log to PATH too (the same lines as on stderr); reopened when "
    "moved or deleted (logrotate).",
)
@click.pass_context
def serve(
    ctx: click.Context,
    listen: str,
    advertise: str | None,
    metrics: str | None,
    configs: Sequence[str],
    admin_allow_remote: bool,
    log_file: str | None,
) -> None:
    """Run a single-node Kafka broker over the data directory, with the log cleaner.

    Kafka clients (kafka-python, confluent-kafka, aiokafka, kcat, the Java client) produce,
    consume, join groups and run admin calls against it. Settings use Kafka's broker config
    names; an unknown name is refused. SIGINT or SIGTERM stops it cleanly: requests already
    read are answered and the data directory is closed, so the next start recovers nothing.

    \b
    Example:
      compactlog --data-dir /var/lib/compactlog serve \\
          --config listeners=SASL_SSL://0.0.0.0:9093,PLAINTEXT://127.0.0.1:9092 \\
          --config advertised.listeners=SASL_SSL://broker1.example.com:9093 \\
          --config ssl.keystore.type=PEM \\
          --config ssl.keystore.location=/etc/compactlog/broker.pem \\
          --config listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512 \\
          --metrics 127.0.0.1:9308 \\
          --config log.cleaner.threads=2 --config auto.create.topics.enable=false \\
          --log-file /var/log/compactlog/server.log

    The log (stderr, and --log-file appended) is Kafka's layout, "[time] LEVEL message
    (logger)": where it listens, the cleaner's summary of every cleaning, every refused request
    with Kafka's error name, the client and the partition, recovery and stopping.

    A request that keeps the broker busy for 5 s after the signal, or a second signal, ends the
    process at once without a clean shutdown (the next start recovers, as after a crash).

    Exit codes: 0 stopped by a signal, 2 bad option or setting, or the address is in use,
    3 storage error (a data directory locked by another process, damaged files), 130 stopped
    without a clean shutdown (see above).
    """
    from compactlog.broker.server import Broker, new_event_loop  # noqa: PLC0415 - see DEFAULT_LISTEN

    data_dir = state(ctx).require_data_dir()
    if admin_allow_remote and metrics is None:
        raise click.UsageError(
            "--admin-allow-remote-unauthenticated needs --metrics HOST:PORT (the admin routes "
            "are served there)"
        )
    listen_address = _address(listen, "--listen")
    assert listen_address is not None
    # --listen has a default; only a --listen given on the command line conflicts with the
    # listeners setting (the broker refuses both with a one-line error).
    listen_given = ctx.get_parameter_source("listen") is not click.core.ParameterSource.DEFAULT
    try:
        config = parse_config_assignments(configs)
    except ConfigError as exc:
        raise library_error(exc) from exc
    broker = Broker(
        data_dir,
        listen=listen_address if listen_given or "listeners" not in config else None,
        advertise=_address(advertise, "--advertise"),
        config=config,
        metrics_listen=_address(metrics, "--metrics"),
        admin_allow_remote=admin_allow_remote,
    )
    _raise_open_files_limit()
    with (
        _broker_log(state(ctx).verbose, log_file),
        asyncio.Runner(loop_factory=new_event_loop) as runner,
    ):
        runner.run(_serve(broker))
