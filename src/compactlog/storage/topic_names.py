"""Topic names and partition directory names (Kafka's ``Topic`` rules; spec section 1.1).

A legal topic name is 1 to 249 characters from ``[a-zA-Z0-9._-]`` and is neither ``.`` nor
``..``. Those rules are also what keeps a partition directory inside its log directory: the
directory is ``<topic>-<partition>``, which can contain no path separator, no NUL and can never be
``.`` or ``..``, so joining it to the log directory can only name a child of it.

Names that look like options (``-rf``) are legal in Kafka and stay legal here: as a path component
``-rf-0`` is an ordinary child directory. Command-line front ends must pass topic names as option
values or after ``--``, never let them be parsed as flags.

Two topics *collide* when they are equal after replacing ``.`` by ``_`` (Kafka's metric names
cannot tell them apart); a new topic that collides with an existing one is refused.

Error messages quote names with :func:`ascii`, so control characters and look-alike letters (a
Cyrillic ``а`` in place of a Latin ``a``) show as escapes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal

from compactlog.errors import InvalidTopicError

#: Kafka's ``Topic.MAX_NAME_LENGTH``: 255 (a common file-name limit) minus room for suffixes.
MAX_TOPIC_NAME_LENGTH: Final = 249
#: Partitions are Java ints.
MAX_PARTITION: Final = 2**31 - 1
#: ``-delete``/``-stray`` directory names are capped to this length by truncating the topic.
MAX_SPECIAL_DIR_NAME_LENGTH: Final = 255
#: Longest name quoted in full in an error message; longer ones are shortened.
_MAX_QUOTED: Final = 300

SpecialDirKind = Literal["delete", "future", "stray"]
SPECIAL_DIR_KINDS: Final[tuple[SpecialDirKind, ...]] = ("delete", "future", "stray")
_KIND_BY_NAME: Final[dict[str, SpecialDirKind]] = {kind: kind for kind in SPECIAL_DIR_KINDS}

_LEGAL: Final = re.compile(r"[a-zA-Z0-9._-]+")
_ILLEGAL_CHAR: Final = re.compile(r"[^a-zA-Z0-9._-]")
# A partition number: decimal, no sign, no leading zeros (so each partition has one name).
_PARTITION: Final = re.compile(r"0|[1-9][0-9]*")
_SPECIAL_DIR: Final = re.compile(r"(.+)\.([0-9a-f]{32})-(delete|future|stray)")


def _quote(name: str) -> str:
    if len(name) > _MAX_QUOTED:
        return f"{name[:_MAX_QUOTED]!a}... ({len(name)} characters)"
    return ascii(name)


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` is not a legal topic name, or ``None`` if it is (checks in Kafka's order)."""
    if not isinstance(name, str):
        return f"a topic name must be a string, not {type(name).__name__}"
    if name == "":
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name {_quote(name)} is invalid: '.' and '..' are not allowed"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"Topic name {_quote(name)} is invalid: it is {len(name)} characters long, "
            f"the maximum is {MAX_TOPIC_NAME_LENGTH}"
        )
    bad = _ILLEGAL_CHAR.search(name)
    if bad is not None:
        char = bad.group()
        return (
            f"Topic name {_quote(name)} is invalid: character {char!a} "
            f"(U+{ord(char):04X}) at index {bad.start()} is not allowed; only ASCII letters, "
            "digits, '.', '_' and '-' are"
        )
    return None


def is_valid_topic_name(name: str) -> bool:
    return topic_name_problem(name) is None


def validate_topic_name(name: str) -> None:
    """Raise :class:`InvalidTopicError` unless ``name`` is a legal Kafka topic name."""
    problem = topic_name_problem(name)
    if problem is not None:
        raise InvalidTopicError(problem)


def topic_collides(a: str, b: str) -> bool:
    """Whether two names are equal once ``.`` and ``_`` are treated as the same character."""
    return a.replace(".", "_") == b.replace(".", "_")


def check_collision(name: str, existing: Iterable[str]) -> None:
    """Refuse a new topic ``name`` that collides with a different existing topic.

    An existing topic of exactly the same name is not a collision: that case is "topic already
    exists", which the caller reports with its own error.
    """
    for other in existing:
        if other != name and topic_collides(name, other):
            raise InvalidTopicError(
                f"Topic {_quote(name)} collides with existing topic {_quote(other)}: "
                "'.' and '_' are interchangeable in topic metric names"
            )


def _check_partition(partition: int) -> None:
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise TypeError(f"partition must be an int, not {type(partition).__name__}")
    if not 0 <= partition <= MAX_PARTITION:
        raise ValueError(f"partition {partition} is outside 0..{MAX_PARTITION}")


def partition_dir_name(topic: str, partition: int) -> str:
    """``orders``, 3 -> ``orders-3``. A bad topic raises InvalidTopicError, a bad partition
    ValueError (a caller bug: partition numbers come from the store, not from users)."""
    validate_topic_name(topic)
    _check_partition(partition)
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``orders-3`` -> ``("orders", 3)``; ``None`` for anything that is not a partition directory.

    The partition is the text after the **last** ``-`` and must be a non-negative decimal int
    without sign or leading zeros; the rest must be a legal topic name. Callers log and skip the
    names this returns ``None`` for (foreign directories, ``-delete``/``-future``/``-stray``
    directories, which :func:`parse_special_dir_name` handles).
    """
    topic, sep, number = name.rpartition("-")
    if not sep or not _PARTITION.fullmatch(number) or not is_valid_topic_name(topic):
        return None
    partition = int(number)
    if partition > MAX_PARTITION:
        return None
    return topic, partition


def special_dir_name(topic: str, partition: int, kind: SpecialDirKind, unique_id: str) -> str:
    """``<topic>-<partition>.<unique_id>-<kind>``, Kafka's name for a partition being deleted,
    moved (``future``) or found stray. ``unique_id`` is a UUID's 32 lowercase hex digits
    (``uuid.uuid4().hex``). For ``delete`` and ``stray`` the topic is truncated so that the whole
    name stays within 255 characters, as Kafka does; the topic part is then only a prefix.
    """
    validate_topic_name(topic)
    _check_partition(partition)
    if kind not in SPECIAL_DIR_KINDS:
        raise ValueError(f"unknown special directory kind {kind!r}")
    if not re.fullmatch(r"[0-9a-f]{32}", unique_id):
        raise ValueError(f"unique id must be 32 lowercase hex digits, not {unique_id!r}")
    suffix = f"-{partition}.{unique_id}-{kind}"
    if kind == "future":
        return topic + suffix
    return topic[: MAX_SPECIAL_DIR_NAME_LENGTH - len(suffix)] + suffix


def parse_special_dir_name(name: str) -> tuple[str, int, SpecialDirKind] | None:
    """``orders-3.<32 hex>-delete`` -> ``("orders", 3, "delete")``; ``None`` if not of that form.

    For ``delete`` and ``stray`` directories of long topic names the topic returned may be a
    truncated prefix of the real name (see :func:`special_dir_name`).
    """
    match = _SPECIAL_DIR.fullmatch(name)
    if match is None:
        return None
    parsed = parse_partition_dir_name(match.group(1))
    if parsed is None:
        return None
    return parsed[0], parsed[1], _KIND_BY_NAME[match.group(3)]
