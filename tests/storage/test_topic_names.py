"""Topic names (Kafka's Topic rules), collisions, and partition directory names (spec 1.1)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactlog.errors import INVALID_TOPIC_EXCEPTION, InvalidTopicError
from compactlog.storage.topic_names import (
    MAX_TOPIC_NAME_LENGTH,
    check_collision,
    is_valid_topic_name,
    parse_partition_dir_name,
    parse_special_dir_name,
    partition_dir_name,
    special_dir_name,
    topic_collides,
    topic_name_problem,
    validate_topic_name,
)

UUID = "0123456789abcdef0123456789abcdef"

# The R18 corpus: hostile or surprising names, with the verdict Kafka gives them.
REFUSED = [
    ("", "empty"),
    (".", "'.' and '..'"),
    ("..", "'.' and '..'"),
    ("../x", "'/'"),
    ("a/b", "'/'"),
    ("a\\b", "'\\\\'"),
    ("a\x00b", "'\\x00'"),
    ("a b", "' '"),
    ("tab\t", "'\\t'"),
    ("new\nline", "'\\n'"),
    ("x" * 250, "250 characters"),
    ("\u0430bc", "U+0430"),  # Cyrillic a, looks like Latin a
    ("ｏｒｄｅｒｓ", "U+FF4F"),  # fullwidth letters
    ("caf\u00e9", "U+00E9"),
    ("orders\u200b", "U+200B"),  # zero-width space
    ("é" * 250, "250 characters"),  # length is checked before characters, as in Kafka
    ("a:b", "':'"),
    ("a*b", "'*'"),
]

ACCEPTED = [
    "orders",
    "-rf",  # legal in Kafka: '-' is a legal character anywhere
    "--help",
    ".hidden",
    "...",
    "_",
    "-",
    "a.b",
    "a_b",
    "a-b-3",
    "x" * MAX_TOPIC_NAME_LENGTH,
    "__consumer_offsets",
    "0",
]


@pytest.mark.parametrize(("name", "fragment"), REFUSED)
def test_refused_names(name: str, fragment: str) -> None:
    assert not is_valid_topic_name(name)
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name(name)
    message = str(info.value)
    assert fragment in message
    assert info.value.error_code == INVALID_TOPIC_EXCEPTION
    # The message is one printable ASCII line: no raw NUL, newline or look-alike letter.
    assert message.isascii() and message.isprintable()
    if name not in ("", ".", ".."):
        assert ascii(name[:300]) in message


def test_overlong_names_are_shortened_in_messages() -> None:
    problem = topic_name_problem("y" * 100_000)
    assert problem is not None
    assert "100000 characters" in problem and len(problem) < 500


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_names(name: str) -> None:
    validate_topic_name(name)
    assert is_valid_topic_name(name)
    assert topic_name_problem(name) is None


def test_max_length_is_249() -> None:
    assert MAX_TOPIC_NAME_LENGTH == 249
    assert is_valid_topic_name("a" * 249)
    assert not is_valid_topic_name("a" * 250)


def test_non_string_names_are_refused() -> None:
    with pytest.raises(InvalidTopicError, match="string"):
        validate_topic_name(b"orders")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ACCEPTED)
def test_legal_names_never_escape_the_log_dir(name: str, tmp_path: object) -> None:
    base = os.path.realpath(str(tmp_path))
    for partition in (0, 7, 2**31 - 1):
        directory = partition_dir_name(name, partition)
        assert os.sep not in directory and "\x00" not in directory
        assert directory not in (".", "..")
        joined = os.path.normpath(os.path.join(base, directory))
        assert os.path.dirname(joined) == base


def test_option_like_topic_is_an_ordinary_directory(tmp_path: object) -> None:
    directory = partition_dir_name("-rf", 0)
    assert directory == "-rf-0"
    assert parse_partition_dir_name(directory) == ("-rf", 0)
    path = os.path.join(str(tmp_path), directory)
    os.mkdir(path)
    assert os.listdir(str(tmp_path)) == ["-rf-0"]


def test_collisions() -> None:
    assert topic_collides("a.b", "a_b")
    assert topic_collides("a_b", "a.b")
    assert topic_collides("a.b_c", "a_b.c")
    assert topic_collides("same", "same")
    assert not topic_collides("a.b", "a-b")
    assert not topic_collides("ab", "a_b")
    with pytest.raises(InvalidTopicError, match=r"'a\.b' collides with existing topic 'a_b'"):
        check_collision("a.b", ["x", "a_b"])
    with pytest.raises(InvalidTopicError, match="collides"):
        check_collision("woo.bar_foo", ["woo.bar.foo"])
    check_collision("a.b", ["a-b", "ab", "a.c"])
    check_collision("a.b", ["a.b"])  # the same name is "already exists", not a collision
    check_collision("a.b", [])


@pytest.mark.parametrize(
    ("topic", "partition", "directory"),
    [("orders", 3, "orders-3"), ("a-b", 0, "a-b-0"), ("a-", 12, "a--12"), ("-", 1, "--1")],
)
def test_partition_dir_names(topic: str, partition: int, directory: str) -> None:
    assert partition_dir_name(topic, partition) == directory
    assert parse_partition_dir_name(directory) == (topic, partition)


def test_partition_dir_name_refuses_bad_input() -> None:
    with pytest.raises(InvalidTopicError):
        partition_dir_name("..", 0)
    with pytest.raises(InvalidTopicError):
        partition_dir_name("a/b", 0)
    for bad in (-1, 2**31):
        with pytest.raises(ValueError, match="partition"):
            partition_dir_name("orders", bad)
    with pytest.raises(TypeError):
        partition_dir_name("orders", True)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "orders",
        "orders-",
        "-3",
        "orders-+3",
        "orders--3",  # topic 'orders-' with partition 3 -- allowed, see below
        "orders-3a",
        "orders-03",
        "orders- 3",
        "orders-3 ",
        "orders-٣",  # Arabic-Indic digit three
        "orders-2147483648",
        "a/b-0",
        "..-0",
        "a\x00b-0",
        ".-0",
        "lost+found",
        ".lock",
        "cleaner-offset-checkpoint",
        "recovery-point-offset-checkpoint",
        f"orders-3.{UUID}-delete",
        f"orders-3.{UUID}-future",
    ],
)
def test_foreign_directory_names_parse_to_none(name: str) -> None:
    if name == "orders--3":
        assert parse_partition_dir_name(name) == ("orders-", 3)
        return
    assert parse_partition_dir_name(name) is None


def test_largest_partition_parses() -> None:
    assert parse_partition_dir_name("t-2147483647") == ("t", 2**31 - 1)
    assert parse_partition_dir_name("t-0") == ("t", 0)


@pytest.mark.parametrize("kind", ["delete", "future", "stray"])
def test_special_dir_names_round_trip(kind: str) -> None:
    name = special_dir_name("orders", 3, kind, UUID)  # type: ignore[arg-type]
    assert name == f"orders-3.{UUID}-{kind}"
    assert parse_special_dir_name(name) == ("orders", 3, kind)
    assert parse_partition_dir_name(name) is None


def test_delete_dir_names_of_long_topics_are_capped_at_255() -> None:
    topic = "t" * 249
    for kind in ("delete", "stray"):
        name = special_dir_name(topic, 12345, kind, UUID)  # type: ignore[arg-type]
        assert len(name) == 255
        parsed = parse_special_dir_name(name)
        assert parsed is not None
        assert topic.startswith(parsed[0]) and parsed[1:] == (12345, kind)
    future = special_dir_name(topic, 12345, "future", UUID)
    assert len(future) > 255
    assert parse_special_dir_name(future) == (topic, 12345, "future")


@pytest.mark.parametrize(
    "name",
    [
        "orders-3-delete",
        f"orders-3.{UUID}-deleted",
        f"orders-3.{UUID.upper()}-delete",
        f"orders-3.{UUID[:-1]}-delete",
        f"orders-3.{UUID}x-delete",
        f"orders-x.{UUID}-delete",
        f"../x-3.{UUID}-delete",
        f"-3.{UUID}-delete",
        f"orders-3.{UUID}-",
        "orders-3",
    ],
)
def test_malformed_special_dir_names(name: str) -> None:
    assert parse_special_dir_name(name) is None


def test_special_dir_name_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="kind"):
        special_dir_name("orders", 0, "gone", UUID)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="hex"):
        special_dir_name("orders", 0, "delete", "not-a-uuid")
    with pytest.raises(InvalidTopicError):
        special_dir_name("a/b", 0, "delete", UUID)


TOPICS = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=MAX_TOPIC_NAME_LENGTH).filter(
    lambda t: t not in (".", "..")
)


@given(TOPICS, st.integers(0, 2**31 - 1))
def test_dir_name_round_trip(topic: str, partition: int) -> None:
    directory = partition_dir_name(topic, partition)
    assert parse_partition_dir_name(directory) == (topic, partition)
    assert os.path.basename(os.path.normpath(os.path.join("/data", directory))) == directory
    assert parse_special_dir_name(directory) is None


@given(st.text(max_size=40))
def test_parsers_never_raise(name: str) -> None:
    parsed = parse_partition_dir_name(name)
    if parsed is not None:
        assert partition_dir_name(*parsed) == name
    special = parse_special_dir_name(name)
    if special is not None:
        assert is_valid_topic_name(special[0])
    assert is_valid_topic_name(name) == (topic_name_problem(name) is None)
