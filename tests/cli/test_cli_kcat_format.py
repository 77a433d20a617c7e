"""kcat format strings: every token, the escapes, nulls, binary data and headers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactlog.cli.kcat_format import (
    FormatError,
    Message,
    Token,
    json_envelope,
    json_string,
    parse_format,
    to_bytes,
    unescape,
)

MSG = Message(
    topic="fruit-prices",
    partition=3,
    offset=42,
    timestamp=1700000000000,
    key=b"grape",
    value=b"$2.69",
    headers=(("source", b"market"), ("trace", None), ("empty", b"")),
)


def fmt(spec: str, message: Message = MSG, null: str = "") -> bytes:
    return parse_format(spec, null).format(message)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("%t", b"fruit-prices"),
        ("%p", b"3"),
        ("%o", b"42"),
        ("%T", b"1700000000000"),
        ("%k", b"grape"),
        ("%K", b"5"),
        ("%s", b"$2.69"),
        ("%S", b"5"),
        ("%R", struct.pack(">i", 5)),
        ("%h", b"source=market,trace=NULL,empty="),
        ("%%", b"%"),
        ("100%%", b"100%"),
        ("", b""),
        ("plain text", b"plain text"),
    ],
)
def test_each_token(spec: str, expected: bytes) -> None:
    assert fmt(spec) == expected


def test_kcat_readme_example() -> None:
    spec = "Topic %t[%p], offset: %o, key: %k, payload: %S bytes: %s\\n"
    assert fmt(spec) == b"Topic fruit-prices[3], offset: 42, key: grape, payload: 5 bytes: $2.69\n"


def test_the_seed_format() -> None:
    assert fmt("%o\\t%k\\t%s\\n") == b"42\tgrape\t$2.69\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\n", b"\n"),
        ("\\t", b"\t"),
        ("\\r", b"\r"),
        ("\\\\", b"\\"),
        ("\\x41", b"A"),
        ("\\x4", b"\x04"),
        ("\\x414", b"A4"),  # at most two hex digits
        ("\\xff", b"\xff"),
        ("\\x00", b"\x00"),
        ("\\65", b"A"),  # decimal, as kcat's strtoul(base 0) reads it
        ("\\0101", b"A"),  # octal after a leading 0
        ("\\0", b"\x00"),
        ("\\q", b"q"),  # unknown escape: the character itself, as kcat
        ("a\\", b"a\\"),  # a trailing backslash stays
        ("é", "é".encode()),
    ],
)
def test_escapes(text: str, expected: bytes) -> None:
    assert unescape(text) == expected
    assert fmt(text) == expected


def test_escapes_apply_only_to_literal_text() -> None:
    message = Message("t", 0, 0, 0, b"a\\nb", b"\\t")
    assert fmt("%k|%s", message) == b"a\\nb|\\t"


def test_percent_after_backslash_is_a_token() -> None:
    # kcat splits at '%' first, so "\%s" is a lone backslash followed by the value.
    assert fmt("\\%s") == b"\\$2.69"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("%", "empty formatter"),
        ("abc%", "empty formatter"),
        ("%x", "unsupported formatter %x"),
        ("%o %Q", "unsupported formatter %Q"),
        ("\\x", "needs one or two hex digits"),
        ("\\xzz", "needs one or two hex digits"),
        ("\\999", "not a byte value"),
    ],
)
def test_bad_format_strings(spec: str, fragment: str) -> None:
    with pytest.raises(FormatError, match=fragment.replace("%", "%")):
        parse_format(spec)


def test_null_key_and_value() -> None:
    tombstone = Message("t", 0, 2, 5, None, None)
    assert fmt("[%k][%s][%K][%S]", tombstone) == b"[][][-1][-1]"
    assert fmt("%R", tombstone) == struct.pack(">i", -1)
    assert fmt("[%k][%s]", tombstone, null="NULL") == b"[NULL][NULL]"


def test_empty_is_not_null() -> None:
    empty = Message("t", 0, 2, 5, b"", b"")
    assert fmt("[%k][%s][%K][%S]", empty, null="NULL") == b"[][][0][0]"


def test_null_string_takes_escapes() -> None:
    assert fmt("%s", Message("t", 0, 0, 0, b"k", None), null="\\x00") == b"\x00"


def test_binary_payloads_pass_through_unchanged() -> None:
    raw = bytes(range(256))
    message = Message("t", 0, 0, 0, raw[::-1], raw)
    assert fmt("%k%s", message) == raw[::-1] + raw
    assert fmt("%K %S", message) == b"256 256"


def test_headers_empty_list_prints_nothing() -> None:
    assert fmt("[%h]", Message("t", 0, 0, 0, None, None, ())) == b"[]"


def test_compiled_parts() -> None:
    formatter = parse_format("%o:%s\\n")
    assert formatter.parts == (Token.OFFSET, b":", Token.VALUE, b"\n")


@given(st.text(alphabet=st.characters(blacklist_characters="%\\"), max_size=40))
def test_literal_text_without_specials_is_utf8(text: str) -> None:
    assert fmt(text) == to_bytes(text)
    if not any("\ud800" <= c <= "\udfff" for c in text):
        assert fmt(text) == text.encode()


@given(st.text(max_size=30))
def test_any_format_string_compiles_or_raises_format_error(spec: str) -> None:
    try:
        formatter = parse_format(spec)
    except FormatError:
        return
    assert isinstance(formatter.format(MSG), bytes)


# --------------------------------------------------------------------------------------------
# -J: kcat's JSON envelope (the field order and escapes checked against kcat itself in
# test_cli_network.py::test_consume_json_is_kcats)


def test_json_strings_escape_as_yajl_does() -> None:
    assert json_string(None) == b"null"
    assert json_string(b"") == b'""'
    assert json_string(b'a"b\\c/d') == b'"a\\"b\\\\c/d"'
    assert json_string(b"\n\t\r\b\f\x01\x1f\x7f") == b'"\\n\\t\\r\\b\\f\\u0001\\u001F\x7f"'
    assert json_string("é".encode() + b"\xff") == b'"\xc3\xa9\xff"'  # bytes as they are


def test_json_envelope_fields_in_kcats_order() -> None:
    plain = json_envelope(Message("t", 1, 7, 123, None, b"v"), "create", 0)
    assert plain == (
        b'{"topic":"t","partition":1,"offset":7,"tstype":"create","ts":123,"broker":0,'
        b'"key":null,"payload":"v"}\n'
    )
    headed = json_envelope(Message("t", 0, 0, 5, b"k", None, (("h", b"x"), ("n", None))),
                           "logappend", -1)  # fmt: skip
    assert headed == (
        b'{"topic":"t","partition":0,"offset":0,"tstype":"logappend","ts":5,"broker":-1,'
        b'"headers":["h","x","n",null],"key":"k","payload":null}\n'
    )
