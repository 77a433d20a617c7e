"""A small DSL for Kafka message schemas, and the typed objects decoded messages become.

A message is a :class:`StructDef`: an ordered list of :class:`Field`. Each field has a name
(snake_case, Kafka's PascalCase name converted), a type, the versions it exists in, the
versions in which it may be null, a default used when a version does not carry it, and for
flexible versions optionally a tag (a KIP-482 tagged field). Types are the primitives below,
``ArrayOf(type)`` and nested :class:`StructDef` (which may be array elements).

Version ranges are written as Kafka writes them: ``"3+"``, ``"0-4"``, ``"2"`` or ``"none"``.

A field whose type is a single struct (not an array of them) may be nullable: the wire then
carries an int8 marker before it, -1 for null and 1 for a struct, as Kafka's generated code
writes it (DescribeTopicPartitions' cursor).

Every ``StructDef`` becomes one :class:`Struct` subclass with ``__slots__`` for the union of
its fields over all versions, so a handler reads ``req.isolation_level`` whatever the version:
a field absent from the version on the wire holds its default. Nested struct classes hang off
their parent by their Kafka struct name (``FetchRequest.FetchTopic.FetchPartition``).
Responses are built by keyword (``FetchResponse(throttle_time_ms=0, responses=[...])``);
missing fields take their defaults, unknown names raise ``TypeError``, and nested entries may
be plain dicts, converted to their struct class on construction.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

__all__ = [
    "BOOL",
    "BYTES",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "RECORDS",
    "STRING",
    "UINT16",
    "UINT32",
    "UUID",
    "ZERO_UUID",
    "ArrayOf",
    "Field",
    "FieldType",
    "Primitive",
    "Struct",
    "StructDef",
    "VersionRange",
    "field",
    "parse_versions",
    "struct_array",
]

# The highest version "N+" stands for: API versions are int16 on the wire.
MAX_VERSION = 0x7FFF

VersionRange = tuple[int, int]
NO_VERSIONS: VersionRange = (1, 0)  # empty: lo > hi

_VERSIONS_RE = re.compile(r"^(\d+)(\+|-(\d+))?$")


def parse_versions(spec: str) -> VersionRange:
    """``"3+"`` -> (3, 32767), ``"0-4"`` -> (0, 4), ``"2"`` -> (2, 2), ``"none"`` -> empty."""
    if spec == "none":
        return NO_VERSIONS
    m = _VERSIONS_RE.match(spec)
    if m is None:
        raise ValueError(f"bad version range {spec!r}")
    lo = int(m.group(1))
    if m.group(2) is None:
        return (lo, lo)
    hi = MAX_VERSION if m.group(2) == "+" else int(m.group(3))
    if hi < lo:
        raise ValueError(f"bad version range {spec!r}")
    return (lo, hi)


def in_range(version: int, versions: VersionRange) -> bool:
    return versions[0] <= version <= versions[1]


class Primitive:
    """A leaf type. ``fmt`` is its ``struct`` code when it has a fixed width."""

    __slots__ = ("default", "fmt", "name", "size")

    def __init__(self, name: str, fmt: str | None, default: Any) -> None:
        self.name = name
        self.fmt = fmt
        self.size = struct.calcsize(">" + fmt) if fmt else 0
        self.default = default

    def __repr__(self) -> str:
        return self.name


INT8 = Primitive("int8", "b", 0)
INT16 = Primitive("int16", "h", 0)
INT32 = Primitive("int32", "i", 0)
INT64 = Primitive("int64", "q", 0)
UINT16 = Primitive("uint16", "H", 0)
UINT32 = Primitive("uint32", "I", 0)
FLOAT64 = Primitive("float64", "d", 0.0)
BOOL = Primitive("bool", "?", False)
STRING = Primitive("string", None, "")
BYTES = Primitive("bytes", None, b"")
# A record set: nullable bytes with an int32 (or compact) length, handed over unparsed.
RECORDS = Primitive("records", None, None)
# Kafka's Uuid (topic ids): 16 bytes on the wire, a ``uuid.UUID`` here; all zeros means "none".
ZERO_UUID = uuid.UUID(int=0)
UUID = Primitive("uuid", None, ZERO_UUID)


class ArrayOf:
    __slots__ = ("element",)

    def __init__(self, element: Primitive | StructDef) -> None:
        self.element = element

    def __repr__(self) -> str:
        return f"[]{self.element!r}"


FieldType = Primitive | ArrayOf


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


class Field:
    """One field of a struct; see the module docstring."""

    __slots__ = ("default", "name", "nullable", "tag", "tagged", "type", "versions")

    def __init__(
        self,
        name: str,
        type: FieldType | StructDef,
        versions: VersionRange,
        nullable: VersionRange,
        default: Any,
        tag: int | None,
        tagged: VersionRange,
    ) -> None:
        self.name = name
        self.type = type
        self.versions = versions
        self.nullable = nullable
        self.default = default
        self.tag = tag
        self.tagged = tagged

    def make_default(self) -> Any:
        """The value of this field where a version does not carry it (a fresh list for arrays)."""
        d = self.default
        return list(d) if isinstance(d, list) else d

    def __repr__(self) -> str:
        return f"Field({self.name}: {self.type!r} v{self.versions})"


def field(
    name: str,
    type: FieldType | StructDef,
    versions: str = "0+",
    *,
    nullable: str = "none",
    default: Any = _UNSET,
    tag: int | None = None,
    tagged: str = "none",
) -> Field:
    """Declares a field. ``default`` falls back to the type's zero value (0, "", b"", [],
    ``None`` for records)."""
    if not name.isidentifier() or not name.islower():
        raise ValueError(f"field names are snake_case identifiers: {name!r}")
    if (tag is None) != (tagged == "none"):
        raise ValueError(f"{name}: a tagged field needs both tag= and tagged=")
    if default is _UNSET:
        if isinstance(type, Primitive):
            default = type.default
        elif isinstance(type, ArrayOf):
            default = []
        else:
            default = None
    return Field(
        name,
        type,
        parse_versions(versions),
        parse_versions(nullable),
        default,
        tag,
        parse_versions(tagged),
    )


def struct_array(
    name: str,
    struct_name: str,
    fields: Sequence[Field],
    versions: str = "0+",
    **options: Any,
) -> Field:
    """Shorthand for ``field(name, ArrayOf(StructDef(struct_name, fields)), versions, ...)``."""
    return field(name, ArrayOf(StructDef(struct_name, fields)), versions, **options)


class StructDef:
    """An ordered list of fields under a Kafka struct name; ``cls`` is its :class:`Struct`."""

    def __init__(self, name: str, fields: Sequence[Field]) -> None:
        if not name.isidentifier() or not name[0].isupper():
            raise ValueError(f"struct names are PascalCase identifiers: {name!r}")
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise ValueError(f"{name}: duplicate field names")
        self.name = name
        self.fields = tuple(fields)
        self.cls: type[Struct] = _make_struct_class(self)

    def __repr__(self) -> str:
        return self.name


def _struct_of(f: Field) -> StructDef | None:
    if isinstance(f.type, StructDef):
        return f.type
    if isinstance(f.type, ArrayOf) and isinstance(f.type.element, StructDef):
        return f.type.element
    return None


_REPR_BYTES = 32  # longer bytes values (record sets) show as their length in repr


def _short_repr(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview) and len(value) > _REPR_BYTES:
        return f"<{len(value)} bytes>"
    return repr(value)


class _StructMeta(type):
    if TYPE_CHECKING:  # nested struct classes hang off their parent class by name

        def __getattr__(cls, name: str) -> type[Struct]: ...


class Struct(metaclass=_StructMeta):
    """Base of every message and nested struct class; subclasses are made by :class:`StructDef`."""

    __slots__ = ()
    SCHEMA: ClassVar[StructDef]
    FIELDS: ClassVar[tuple[str, ...]] = ()
    # (name, default, is_list) per field; lists are copied so instances never share one.
    _DEFAULTS: ClassVar[tuple[tuple[str, Any, bool], ...]] = ()
    # field name -> struct class, for fields holding a struct or an array of structs
    _NESTED: ClassVar[dict[str, tuple[type[Struct], bool]]] = {}

    if TYPE_CHECKING:  # attributes are made per schema at run time; mypy sees them as Any

        def __getattr__(self, name: str) -> Any: ...

    def __init__(self, **values: Any) -> None:
        cls = type(self)
        for name, default, is_list in cls._DEFAULTS:
            if name in values:
                value = values.pop(name)
                nested = cls._NESTED.get(name)
                if nested is not None and value is not None:
                    value = _convert(nested[0], value, nested[1])
                setattr(self, name, value)
            else:
                setattr(self, name, list(default) if is_list else default)
        if values:
            raise TypeError(f"{cls.__name__} has no field(s) {', '.join(sorted(values))}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.FIELDS)

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={_short_repr(getattr(self, n))}" for n in self.FIELDS)
        return f"{type(self).__name__}({body})"

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts and lists (for logs and tests)."""
        return {n: _plain(getattr(self, n)) for n in self.FIELDS}


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _convert(cls: type[Struct], value: Any, is_array: bool) -> Any:
    if not is_array:
        return cls(**value) if isinstance(value, dict) else value
    return [cls(**v) if isinstance(v, dict) else v for v in value]


def _make_struct_class(sdef: StructDef) -> type[Struct]:
    ns: dict[str, Any] = {
        "__slots__": tuple(f.name for f in sdef.fields),
        "__module__": "compactlog.protocol.messages",
        "__qualname__": sdef.name,
        "SCHEMA": sdef,
        "FIELDS": tuple(f.name for f in sdef.fields),
        "_DEFAULTS": tuple((f.name, f.default, isinstance(f.default, list)) for f in sdef.fields),
    }
    nested: dict[str, tuple[type[Struct], bool]] = {}
    for f in sdef.fields:
        child = _struct_of(f)
        if child is not None:
            nested[f.name] = (child.cls, isinstance(f.type, ArrayOf))
            ns[child.name] = child.cls
    ns["_NESTED"] = nested
    return type(sdef.name, (Struct,), ns)
