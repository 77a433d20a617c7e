"""kcat's ``-f`` format strings, compiled once and applied to every consumed record.

The rules are kcat's (``format.c``: ``fmt_parse``, ``fmt_add``, ``fmt_msg_output_str``):

* the string is split at ``%``; the character after it picks a token:

  ====  ==================================================================================
  %t    topic
  %p    partition
  %o    offset
  %T    timestamp (milliseconds since the epoch)
  %k    key (nothing for a null key, or the null string)
  %K    key length, -1 for a null key
  %s    value, the "payload" (nothing for a null value, or the null string)
  %S    value length, -1 for a null value (a tombstone)
  %R    value length as a big-endian signed 32-bit integer (4 raw bytes), -1 for null
  %h    headers as ``name=value`` joined by ``,``; a null header value prints ``NULL``
  %%    a literal ``%``
  ====  ==================================================================================

  any other character after ``%``, or a ``%`` at the very end, is an error;
* in the literal text between tokens, backslash escapes are replaced: ``\\n``, ``\\t``, ``\\r``,
  ``\\xHH`` (one or two hex digits), ``\\NNN`` (a decimal byte value, or octal after a leading
  ``0``, as C's ``strtoul`` with base 0 reads it), and a backslash before any other character
  stands for that character (so ``\\\\`` is one backslash). A backslash at the very end is kept.

Where this differs from kcat, on purpose: ``\\x`` without a hex digit, or a numeric escape above
255, is an error here (kcat silently writes a truncated byte). kcat prints nothing for an *empty*
key or value and its ``-Z`` null string for empty ones too; here empty prints empty and only null
prints the null string, because compaction gives null and empty different meanings.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass

_INT32 = struct.Struct(">i")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_OCTAL_DIGITS = frozenset("01234567")
_DECIMAL_DIGITS = frozenset("0123456789")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


class FormatError(ValueError):
    """A format string kcat would refuse (or one with an escape that names no byte)."""


class Token(enum.Enum):
    TOPIC = "t"
    PARTITION = "p"
    OFFSET = "o"
    TIMESTAMP = "T"
    KEY = "k"
    KEY_LENGTH = "K"
    VALUE = "s"
    VALUE_LENGTH = "S"
    VALUE_LENGTH_BINARY = "R"
    HEADERS = "h"


_TOKENS = {token.value: token for token in Token}


@dataclass(frozen=True)
class Message:
    """What a format string can show of one consumed record."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()


def to_bytes(text: str) -> bytes:
    """UTF-8, giving back the original bytes of undecodable argv (Python's surrogateescape);
    any other lone surrogate is written as its UTF-8 form rather than failing."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        out = bytearray()
        for char in text:
            try:
                out += char.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                out += char.encode("utf-8", "surrogatepass")
        return bytes(out)


def unescape(text: str) -> bytes:
    """kcat's backslash escapes in literal text -> the bytes they stand for (UTF-8 otherwise)."""
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char != "\\" or i + 1 == n:
            out += to_bytes(char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[nxt].encode()
            i += 2
        elif nxt == "x":
            j = i + 2
            while j < n and j < i + 4 and text[j] in _HEX_DIGITS:
                j += 1
            if j == i + 2:
                raise FormatError(f"escape \\x at index {i} needs one or two hex digits")
            out.append(int(text[i + 2 : j], 16))
            i = j
        elif nxt.isascii() and nxt.isdigit():
            # Decimal: up to 3 digits; octal: a leading 0 and up to 3 octal digits.
            octal = nxt == "0"
            digits = _OCTAL_DIGITS if octal else _DECIMAL_DIGITS
            j, limit = i + 1, i + (5 if octal else 4)
            while j < n and j < limit and text[j] in digits:
                j += 1
            value = int(text[i + 1 : j], 8 if octal else 10)
            if value > 255:
                raise FormatError(f"escape \\{text[i + 1 : j]} at index {i} is not a byte value")
            out.append(value)
            i = j
        else:
            out += to_bytes(nxt)
            i += 2
    return bytes(out)


def _headers_text(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    parts = []
    for name, value in headers:
        shown = b"NULL" if value is None else bytes(value)
        parts.append(to_bytes(name) + b"=" + shown)
    return b",".join(parts)


class Formatter:
    """A compiled format string: literal byte strings and tokens, in order."""

    def __init__(self, parts: Sequence[bytes | Token], null_string: bytes = b"") -> None:
        self.parts = tuple(parts)
        self.null_string = null_string

    def __repr__(self) -> str:
        return f"Formatter({self.parts!r})"

    def format(self, message: Message) -> bytes:
        out = bytearray()
        for part in self.parts:
            if isinstance(part, bytes):
                out += part
            else:
                out += self._render(part, message)
        return bytes(out)

    def _render(self, token: Token, m: Message) -> bytes:
        if token is Token.KEY:
            return self.null_string if m.key is None else bytes(m.key)
        if token is Token.VALUE:
            return self.null_string if m.value is None else bytes(m.value)
        if token is Token.KEY_LENGTH:
            return b"-1" if m.key is None else str(len(m.key)).encode()
        if token is Token.VALUE_LENGTH:
            return b"-1" if m.value is None else str(len(m.value)).encode()
        if token is Token.VALUE_LENGTH_BINARY:
            return _INT32.pack(-1 if m.value is None else len(m.value))
        if token is Token.OFFSET:
            return str(m.offset).encode()
        if token is Token.PARTITION:
            return str(m.partition).encode()
        if token is Token.TIMESTAMP:
            return str(m.timestamp).encode()
        if token is Token.TOPIC:
            return to_bytes(m.topic)
        return _headers_text(m.headers)


def parse_format(fmt: str, null_string: str = "") -> Formatter:
    """Compile a kcat format string; :class:`FormatError` says what is wrong with a bad one.

    >>> parse_format("%o\\\\t%k\\\\n").format(Message("t", 0, 7, 0, b"k", b"v"))
    b'7\\tk\\n'
    """
    parts: list[bytes | Token] = []
    literal: list[str] = []

    def flush_literal() -> None:
        if literal:
            parts.append(unescape("".join(literal)))
            literal.clear()

    i, n = 0, len(fmt)
    while i < n:
        char = fmt[i]
        if char != "%":
            literal.append(char)
            i += 1
            continue
        if i + 1 == n:
            raise FormatError(f"empty formatter: '%' at the end of {fmt!r}")
        code = fmt[i + 1]
        # kcat escapes the text of each literal run separately: a run ends at every '%'.
        flush_literal()
        if code == "%":
            parts.append(b"%")
        elif code in _TOKENS:
            parts.append(_TOKENS[code])
        else:
            raise FormatError(
                f"unsupported formatter %{code} at index {i} of {fmt!r} "
                "(known: %t %p %o %T %k %K %s %S %R %h %%)"
            )
        i += 2
    flush_literal()
    return Formatter(parts, unescape(null_string))


# --------------------------------------------------------------------------------------------
# kcat -J: one JSON object per record


def _json_escape_byte(b: int) -> bytes:
    if b == 0x22:
        return b'\\"'
    if b == 0x5C:
        return b"\\\\"
    if b in _JSON_SHORT:
        return _JSON_SHORT[b]
    return f"\\u{b:04X}".encode()


_JSON_SHORT = {0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t"}
_JSON_ESCAPES = [bytes([b]) if b >= 0x20 and b not in (0x22, 0x5C) else b"" for b in range(256)]
for _b in range(256):
    if not _JSON_ESCAPES[_b]:
        _JSON_ESCAPES[_b] = _json_escape_byte(_b)


def json_string(data: bytes | None) -> bytes:
    """A JSON string as kcat's yajl writes it: quote, backslash and control characters
    escaped, every other byte (UTF-8 or not) as it is; None is ``null``."""
    if data is None:
        return b"null"
    return b'"' + b"".join(_JSON_ESCAPES[b] for b in bytes(data)) + b'"'


#: kcat's names of Kafka's timestamp types.
TIMESTAMP_TYPES = {0: "create", 1: "logappend"}


def json_envelope(message: Message, timestamp_type: str, broker: int) -> bytes:
    """The record as kcat ``-J`` prints it: topic, partition, offset, tstype, ts, broker,
    headers (only when the record has some: a flat name, value, name, value list), key,
    payload; followed by a newline."""
    parts = [
        b'{"topic":' + json_string(to_bytes(message.topic)),
        b'"partition":%d' % message.partition,
        b'"offset":%d' % message.offset,
        b'"tstype":' + json_string(timestamp_type.encode()),
        b'"ts":%d' % message.timestamp,
        b'"broker":%d' % broker,
    ]
    if message.headers:
        flat = []
        for name, value in message.headers:
            flat += [json_string(to_bytes(name)), json_string(value)]
        parts.append(b'"headers":[' + b",".join(flat) + b"]")
    parts.append(b'"key":' + json_string(message.key))
    parts.append(b'"payload":' + json_string(message.value) + b"}\n")
    return b",".join(parts)
