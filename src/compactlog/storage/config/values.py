"""Config values the Java way: parsing text into typed values and rendering them back.

Values arrive as strings (CLI, wire protocol) or as Python values (library callers). Parsing follows
Kafka's ``ConfigDef.parseType``: strings are trimmed of ASCII control characters and spaces,
booleans are ``true``/``false`` in any case, ``int`` must fit 32 bits and ``long`` 64 bits, lists
are comma separated (empty string = empty list), and enumerated strings (``compression.type``,
``message.timestamp.type``, ``cleanup.policy`` elements) are matched **case-sensitively**, as
Kafka's ``ValidString``/``ValidList`` do. :func:`parse_value` then applies the config's validator
(:mod:`compactlog.storage.config.defs`); every refusal is a :class:`ConfigError` naming the
config, the value and the reason.

Rendering (:func:`render_value`, behind ``LogConfig.describe``) follows Kafka's DescribeConfigs,
which prints the parsed Java value: ``true``/``false``, decimal integers, doubles as
``Double.toString`` (``0.5``, ``1.0E-4``, ``1.7976931348623157E308``) and lists joined with ``,``
in the order given.

Deliberate differences from Kafka: a double that parses as NaN is refused (Kafka accepts it and
then never cleans by ratio), and integers must be ASCII digits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Final

from compactlog.errors import ConfigError
from compactlog.storage.config.defs import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    ConfigDef,
    ConfigType,
    ConfigValue,
    _show,
)

# java.lang.String.trim() removes every char <= U+0020, not Unicode whitespace.
_JAVA_TRIM: Final = "".join(chr(c) for c in range(0x21))
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_DECIMAL_DOUBLE: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")
_HEX_DOUBLE: Final = re.compile(
    r"([+-]?)(0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?"
)
# Java's \s is ASCII whitespace only, unlike Python's.
_LIST_SEPARATOR: Final = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def java_string(value: object) -> str:
    """A value as Java's ``toString`` shows it in Kafka's ``ConfigException`` messages
    (``Long``, ``Double``, ``Boolean``, ``List``; text as given)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_to_string(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def kafka_invalid(name: str, value: object, reason: str) -> str:
    """Kafka's ``ConfigException(name, value, reason)`` text."""
    return f"Invalid value {java_string(value)} for configuration {name}: {reason}"


def _invalid(name: str, value: object, reason: str, kafka: str | None = None) -> ConfigError:
    """The refusal of ``value`` for ``name``; ``kafka`` is Kafka's reason for a value that Java's
    ``ConfigDef.parseType`` refuses (its message then shows the value as given)."""
    return ConfigError(
        f"Invalid value {_show(value)} for config {name}: {reason}",
        kafka_message=None if kafka is None else kafka_invalid(name, value, kafka),
    )


_KAFKA_PARSE_ERRORS: Final = {
    "boolean": "Expected value to be either true or false",
    "int": "Not a number of type INT",
    "long": "Not a number of type LONG",
    "double": "Not a number of type DOUBLE",
}


def _parse_java_double(text: str) -> float | None:
    """``Double.parseDouble`` of already-trimmed text, or ``None`` if Java would refuse it."""
    body = text[1:] if text[:1] in "+-" else text
    negative = text.startswith("-")
    if body == "Infinity":
        return -math.inf if negative else math.inf
    if body == "NaN":
        return math.nan
    if _DECIMAL_DOUBLE.fullmatch(text):
        return float(text.rstrip("fFdD"))
    hex_match = _HEX_DOUBLE.fullmatch(text)
    if hex_match:
        try:
            magnitude = float.fromhex(hex_match.group(2))
        except OverflowError:
            magnitude = math.inf
        return -magnitude if hex_match.group(1) == "-" else magnitude
    return None


def _parse_typed(name: str, config_type: ConfigType, raw: object) -> ConfigValue:
    text = raw.strip(_JAVA_TRIM) if isinstance(raw, str) else None
    if config_type == "boolean":
        if isinstance(raw, bool):
            return raw
        if text is not None and text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise _invalid(name, raw, "expected true or false", _KAFKA_PARSE_ERRORS["boolean"])
    if config_type in ("int", "long"):
        bits, low, high = (
            (32, INT_MIN, INT_MAX) if config_type == "int" else (64, LONG_MIN, LONG_MAX)
        )
        if isinstance(raw, int) and not isinstance(raw, bool):
            number = raw
        elif text is not None and _INTEGER.fullmatch(text):
            number = int(text)
        elif text is not None:
            raise _invalid(name, raw, f"not a {bits}-bit integer", _KAFKA_PARSE_ERRORS[config_type])
        else:
            raise _invalid(name, raw, f"expected a {bits}-bit integer, got {type(raw).__name__}")
        if not low <= number <= high:
            raise _invalid(
                name, raw, f"does not fit in a {bits}-bit integer", _KAFKA_PARSE_ERRORS[config_type]
            )
        return number
    if config_type == "double":
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            try:
                double = float(raw)
            except OverflowError:
                raise _invalid(name, raw, "too large for a double") from None
        elif text is not None:
            parsed = _parse_java_double(text)
            if parsed is None:
                raise _invalid(name, raw, "not a number", _KAFKA_PARSE_ERRORS["double"])
            double = parsed
        else:
            raise _invalid(name, raw, f"expected a number, got {type(raw).__name__}")
        if math.isnan(double):
            raise _invalid(name, raw, "NaN is not accepted")
        return double
    if config_type == "string":
        if text is None:
            raise _invalid(name, raw, f"expected a string, got {type(raw).__name__}")
        return text
    # list
    if text is not None:
        return () if text == "" else tuple(_LIST_SEPARATOR.split(text))
    if isinstance(raw, list | tuple) and all(isinstance(e, str) for e in raw):
        return tuple(e.strip(_JAVA_TRIM) for e in raw)
    raise _invalid(name, raw, "expected a comma-separated list")


def parse_value(definition: ConfigDef, raw: object) -> ConfigValue:
    """Parse and validate one value for ``definition``; :class:`ConfigError` if unacceptable."""
    if raw is None:
        raise ConfigError(f"Invalid value null for config {definition.name}: a value is required")
    value = _parse_typed(definition.name, definition.type, raw)
    if definition.validator is not None:
        reason = definition.validator.problem(value)
        if reason is not None:
            error = _invalid(definition.name, raw, reason)
            kafka = definition.validator.kafka_problem(definition.name, value)
            if kafka is not None:
                error.kafka_message = kafka_invalid(definition.name, *kafka)
            raise error
    return value


def _java_digits(magnitude: float) -> tuple[str, int]:
    """Significant digits and decimal exponent (of the first digit) that Java prints.

    Like Python's ``repr``, Java (JDK 19+) picks the shortest decimal that reads back as the same
    double, the closest one among those. One difference: when a single digit suffices, Java still
    considers two-digit decimals and prints the closest (``Double.MIN_VALUE`` is ``4.9E-324``, not
    ``5.0E-324``).
    """
    shortest = Decimal(repr(magnitude)).normalize()
    _, digit_tuple, exponent = shortest.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    if len(digits) == 1:
        exact = Decimal(magnitude)
        two = exact.quantize(Decimal(1).scaleb(exact.adjusted() - 1), rounding=ROUND_HALF_EVEN)
        if float(two) == magnitude:
            candidate = two.normalize()
            _, digit_tuple, exponent = candidate.as_tuple()
            assert isinstance(exponent, int)
            digits = "".join(map(str, digit_tuple))
    return digits, exponent + len(digits) - 1


def java_double_to_string(value: float) -> str:
    """``Double.toString``: plain between 1e-3 and 1e7, else ``d.dddE<exp>``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    digits, exponent = _java_digits(abs(value))
    if 1e-3 <= abs(value) < 1e7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1 :] or "0"
        else:
            whole, fraction = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def render_value(config_type: ConfigType, value: ConfigValue) -> str:
    """A parsed value as Kafka's DescribeConfigs prints it (``ConfigDef.convertToString``)."""
    if config_type == "boolean":
        return "true" if value else "false"
    if config_type == "double":
        assert isinstance(value, float | int)
        return java_double_to_string(float(value))
    if config_type == "list":
        assert isinstance(value, tuple)
        return ",".join(value)
    return str(value)


def parse_config_assignments(items: Iterable[str]) -> dict[str, str]:
    """CLI ``NAME=VALUE`` strings -> ``{name: value}``; the value may itself contain ``=``."""
    result: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"Invalid config assignment {_show(item)}: expected NAME=VALUE")
        if name in result:
            raise ConfigError(f"Config {_show(name)} is assigned more than once")
        result[name] = value
    return result
