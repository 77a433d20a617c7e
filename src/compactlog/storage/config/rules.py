"""The rules that span several configs, run on a whole effective config before it is accepted.

* Broker start-up checks (KafkaConfig's): the effective roll time, roll jitter and retention time
  over their ``.ms``/``.minutes``/``.hours`` synonyms, and the cleaner threads' share of the dedupe
  buffer.
* Topic checks, on the merged topic config (Kafka's ``LogConfig.validateValues`` and the
  tiered-storage checks of ``LogConfig.validateTopicLogConfigValues``):
  ``min.compaction.lag.ms <= max.compaction.lag.ms``, the local retention limits against the total
  ones, and when ``remote.storage.enable`` may be set or turned off.

Every refusal is a :class:`ConfigError` naming the config, the value and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from compactlog.errors import ConfigError
from compactlog.storage.config.defs import (
    MS_PER_HOUR,
    MS_PER_MINUTE,
    ConfigValue,
)
from compactlog.storage.config.values import _invalid

#: Each cleaner thread needs more than this much dedupe memory (KafkaConfig's start-up check).
MIN_DEDUPE_BUFFER_PER_THREAD: Final = 1024 * 1024


def _effective_broker(
    values: Mapping[str, ConfigValue | None], names: Sequence[tuple[str, int]]
) -> tuple[int, str]:
    for name, to_ms in names:
        value = values[name]
        if value is not None:
            assert isinstance(value, int)
            return value * to_ms, name
    raise AssertionError("the last synonym always has a default")


def _check_broker_rules(values: Mapping[str, ConfigValue | None]) -> None:
    """KafkaConfig's start-up checks that span settings."""
    roll_ms, roll_name = _effective_broker(
        values, [("log.roll.ms", 1), ("log.roll.hours", MS_PER_HOUR)]
    )
    if roll_ms < 1:
        raise _invalid(roll_name, values[roll_name], "the segment roll time must be at least 1 ms")
    jitter_ms, jitter_name = _effective_broker(
        values, [("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", MS_PER_HOUR)]
    )
    if jitter_ms < 0:
        raise _invalid(jitter_name, values[jitter_name], "the roll jitter must not be negative")
    retention_ms, retention_name = _effective_broker(
        values,
        [("log.retention.ms", 1), ("log.retention.minutes", MS_PER_MINUTE),
         ("log.retention.hours", MS_PER_HOUR)],
    )  # fmt: skip
    if retention_ms == 0:
        raise _invalid(
            retention_name, values[retention_name],
            "the retention time must be unlimited (negative) or at least 1 ms",
        )  # fmt: skip
    threads = values["log.cleaner.threads"]
    dedupe = values["log.cleaner.dedupe.buffer.size"]
    assert isinstance(threads, int) and isinstance(dedupe, int)
    if threads == 0:
        raise _invalid(
            "log.cleaner.threads", 0,
            "must be at least 1 because the dedupe buffer is shared among the threads "
            "(disable the cleaner with log.cleaner.enable=false instead)",
        )  # fmt: skip
    per_thread = dedupe // threads if dedupe >= 0 else -1  # Java's truncating division
    if per_thread <= MIN_DEDUPE_BUFFER_PER_THREAD:
        raise _invalid(
            "log.cleaner.dedupe.buffer.size", dedupe,
            f"each of the {threads} cleaner thread(s) needs more than 1 MiB "
            f"({MIN_DEDUPE_BUFFER_PER_THREAD} bytes) of it",
        )  # fmt: skip


def _check_topic_rules(
    values: Mapping[str, ConfigValue],
    existing_overrides: Mapping[str, str],
    *,
    remote_system: bool,
    store_wide: bool = False,
) -> None:
    """Rules across configs (LogConfig.validateValues and the tiered-storage checks)."""
    min_lag = values["min.compaction.lag.ms"]
    max_lag = values["max.compaction.lag.ms"]
    assert isinstance(min_lag, int) and isinstance(max_lag, int)
    if min_lag > max_lag:
        raise ConfigError(
            f"Conflicting configs: min.compaction.lag.ms ({min_lag}) is greater than "
            f"max.compaction.lag.ms ({max_lag})"
        )
    if store_wide:
        if remote_system:
            _check_local_retention(values)
        return
    if values["remote.storage.enable"]:
        if not remote_system:
            raise ConfigError(
                "remote.storage.enable=true is refused: tiered storage is disabled in this store "
                "(remote.log.storage.system.enable=false)"
            )
        policy = values["cleanup.policy"]
        assert isinstance(policy, tuple)
        if "compact" in policy:
            raise ConfigError(
                "remote.storage.enable=true cannot be combined with cleanup.policy containing "
                "compact: remote log storage does not support compacted topics"
            )
        _check_local_retention(values)
        if values["remote.log.copy.disable"]:
            for local, total in (
                ("local.retention.bytes", "retention.bytes"),
                ("local.retention.ms", "retention.ms"),
            ):
                if values[local] != -2 and values[local] != values[total]:
                    raise ConfigError(
                        f"With remote.log.copy.disable=true, {local} ({values[local]}) must equal "
                        f"{total} ({values[total]}), since nothing more is copied to remote storage"
                    )
    else:
        was_enabled = existing_overrides.get("remote.storage.enable", "false").lower() == "true"
        if was_enabled and not values["remote.log.delete.on.disable"]:
            raise ConfigError(
                "remote.storage.enable cannot be turned off while keeping the remote data: "
                "set remote.log.delete.on.disable=true to delete it, or keep "
                "remote.storage.enable=true with remote.log.copy.disable=true to keep it read-only"
            )


def _check_local_retention(values: Mapping[str, ConfigValue]) -> None:
    """A tiered log's local limits must not exceed its total limits (-2 = "use the total")."""
    for local, total in (
        ("local.retention.bytes", "retention.bytes"),
        ("local.retention.ms", "retention.ms"),
    ):
        local_value, total_value = values[local], values[total]
        assert isinstance(local_value, int) and isinstance(total_value, int)
        # Kafka skips the check when the total is unlimited: retention.bytes <= -1 or
        # retention.ms == -1 (the only negative retention.ms it accepts).
        if total_value <= -1 or local_value == -2:
            continue
        if local_value == -1:
            raise _invalid(
                local, local_value, f"must not be -1 (unlimited) while {total} is {total_value}"
            )
        if local_value > total_value:
            raise _invalid(local, local_value, f"must not be more than {total} ({total_value})")
