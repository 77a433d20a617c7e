"""Compiles a schema, once per (message, version), into straight-line decode/encode functions.

For each version the compiler knows which fields are on the wire, in which encoding
(classic or compact, nullable or not, tagged or not), and what the absent fields default to,
so it writes that down as Python source and ``exec``s it: the functions that run per request
contain no version checks and no per-field dispatch. Consecutive fixed-width fields become one
``struct`` call. ``Message.source(version)`` shows the generated code.

A decoder takes a :class:`~compactlog.protocol.primitives.Reader` and returns the message's
:class:`~compactlog.protocol.schema.Struct`; every read names its field path for the error
message. An encoder appends to a ``bytearray``. In flexible versions each struct ends with a
tagged-field section: known tags are decoded, unknown ones skipped, and on encode a tagged
field is written only when it differs from its default (as Kafka does).

Fields that a version does not have are skipped on encode whatever their value.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from compactlog.protocol import writers
from compactlog.protocol.primitives import Reader
from compactlog.protocol.schema import (
    BYTES,
    RECORDS,
    STRING,
    UUID,
    ArrayOf,
    Field,
    Primitive,
    Struct,
    StructDef,
    in_range,
    parse_versions,
)

__all__ = ["Decoder", "Encoder", "Message"]

Decoder = Callable[[Reader], Any]
Encoder = Callable[[Any, bytearray], None]


def _pack_error(paths: str, values: tuple[Any, ...], err: struct.error) -> ValueError:
    return ValueError(f"{paths}: cannot encode {values!r}: {err}")


_BASE_NAMESPACE: dict[str, Any] = {
    "NEW": object.__new__,
    "struct": struct,
    "pack_error": _pack_error,
    **{name: getattr(writers, name) for name in writers.__all__},
}


class _Codegen:
    """Writes the source of every struct's codec for one (message, version)."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.ns: dict[str, Any] = dict(_BASE_NAMESPACE)
        self.lines: list[str] = []
        self._n = 0
        self._done: dict[int, tuple[str, str, int]] = {}
        self._names: set[str] = set()

    def const(self, value: Any, hint: str = "K") -> str:
        self._n += 1
        name = f"{hint}{self._n}"
        self.ns[name] = value
        return name

    # --- classification -----------------------------------------------------------------------
    def regular(self, sdef: StructDef) -> list[Field]:
        v = self.version
        return [
            f
            for f in sdef.fields
            if in_range(v, f.versions) and not (self.flexible and in_range(v, f.tagged))
        ]

    def tagged(self, sdef: StructDef) -> list[Field]:
        v = self.version
        if not self.flexible:
            return []
        return [f for f in sdef.fields if in_range(v, f.versions) and in_range(v, f.tagged)]

    def nullable(self, f: Field) -> bool:
        return in_range(self.version, f.nullable)

    def nullable_struct(self, f: Field) -> bool:
        """A single struct (not an array) that may be null: an int8 marker precedes it."""
        return isinstance(f.type, StructDef) and self.nullable(f)

    def min_size(self, t: Primitive | ArrayOf | StructDef) -> int:
        """The fewest bytes a value of this type takes: bounds array counts on decode."""
        if isinstance(t, StructDef):
            fields = self.regular(t)
            return sum(
                1 if self.nullable_struct(f) else self.min_size(f.type) for f in fields
            ) + int(self.flexible)
        if isinstance(t, Primitive) and t.fmt:
            return t.size
        if t is UUID:
            return 16
        if self.flexible:
            return 1
        return 2 if t is STRING else 4

    # --- structs ------------------------------------------------------------------------------
    def struct(self, sdef: StructDef, path: str) -> tuple[str, str, int]:
        """Emits ``d_<name>``/``e_<name>`` for ``sdef`` (children first); returns their names
        and the struct's minimum size."""
        key = id(sdef)
        if key in self._done:
            return self._done[key]
        for f in self.regular(sdef) + self.tagged(sdef):
            child = _child(f)
            if child is not None and in_range(self.version, f.versions):
                self.struct(child, _sub(path, f))
        if sdef.name in self._names:  # generated function names are per struct name
            raise ValueError(f"{path}: two different structs named {sdef.name}")
        self._names.add(sdef.name)
        dec, enc = f"d_{sdef.name}", f"e_{sdef.name}"
        cls = self.const(sdef.cls, "C")
        # The bodies may first emit helper functions (tagged-field readers) of their own.
        decode_body = self.decode_body(sdef, path)
        encode_body = self.encode_body(sdef, path)
        self.lines += [f"def {dec}(r):", f"    o = NEW({cls})"]
        self.lines += _indent(decode_body)
        self.lines += ["    return o", "", f"def {enc}(o, out):"]
        self.lines += _indent(encode_body or ["pass"])
        self.lines.append("")
        result = (dec, enc, self.min_size(sdef))
        self._done[key] = result
        return result

    def decode_body(self, sdef: StructDef, path: str) -> list[str]:
        out: list[str] = []
        for run in _runs(self.regular(sdef)):
            if isinstance(run, list):  # fixed-width fields read with one struct call
                st = self.const(struct.Struct(">" + "".join(_fmt(f) for f in run)), "S")
                layout, end = [], 0
                for f in run:
                    end += _prim(f).size
                    layout.append((_sub(path, f, arr=False), end))
                lay = self.const(tuple(layout), "L")
                targets = ", ".join(f"o.{f.name}" for f in run)
                out.append(f"({targets},) = r.fixed_run({st}, {lay})")
            else:
                out += self.decode_field(run, f"o.{run.name}", path)
        for f in sdef.fields:
            if not in_range(self.version, f.versions):
                out.append(f"o.{f.name} = {self.default_expr(f)}")
        if self.flexible:
            tags = {}
            for f in self.tagged(sdef):
                fn = f"t_{sdef.name}_{f.name}"
                self.lines.append(f"def {fn}(r):")
                self.lines += _indent(self.decode_field(f, "v", path))
                self.lines += ["    return v", ""]
                tags[f.tag] = fn
            table = "{" + ", ".join(f"{t}: {fn}" for t, fn in tags.items()) + "}"
            tname = self.const(None, "T")
            self.lines += [f"{tname} = {table}", ""]
            out.append(f"tags = r.tagged_fields({path + '<tags>'!r}, {tname})")
            for f in self.tagged(sdef):
                out.append(
                    f"o.{f.name} = tags[{f.tag}] if {f.tag} in tags else {self.default_expr(f)}"
                )
        return out

    def default_expr(self, f: Field) -> str:
        k = self.const(f.default)
        return f"list({k})" if isinstance(f.default, list) else k

    def decode_field(self, f: Field, target: str, path: str) -> list[str]:
        t, p, flex = f.type, _sub(path, f), self.flexible
        if isinstance(t, StructDef):
            if self.nullable_struct(f):
                return [
                    f"if r.fixed({self.const(struct.Struct('>b'), 'S')}, {p!r})[0] < 0:",
                    f"    {target} = None",
                    "else:",
                    f"    {target} = {self.struct(t, p)[0]}(r)",
                ]
            return [f"{target} = {self.struct(t, p)[0]}(r)"]
        if isinstance(t, ArrayOf):
            el = t.element
            if isinstance(el, StructDef):
                item = f"{self.struct(el, p)[0]}(r)"
            else:
                item = self.read_primitive(el, False, p)
            length = "compact_array_length" if flex else "array_length"
            return [
                f"n = r.{length}({p!r}, {self.min_size(el)}, {self.nullable(f)})",
                f"{target} = None if n is None else [{item} for _ in range(n)]",
            ]
        return [f"{target} = {self.read_primitive(t, self.nullable(f), p)}"]

    def read_primitive(self, t: Primitive, nullable: bool, p: str) -> str:
        if t.fmt:
            return f"r.fixed({self.const(struct.Struct('>' + t.fmt), 'S')}, {p!r})[0]"
        if t is UUID:
            return f"r.uuid({p!r})"
        assert t in (STRING, BYTES, RECORDS), t
        kind = "string" if t is STRING else "bytes"
        method = ("compact_" if self.flexible else "") + ("nullable_" if nullable else "") + kind
        return f"r.{'bytes_' if method == 'bytes' else method}({p!r})"

    def encode_body(self, sdef: StructDef, path: str) -> list[str]:
        out: list[str] = []
        for run in _runs(self.regular(sdef)):
            if isinstance(run, list):
                st = self.const(struct.Struct(">" + "".join(_fmt(f) for f in run)), "S")
                values = ", ".join(f"o.{f.name}" for f in run)
                names = ", ".join(_sub(path, f, arr=False) for f in run)
                out += [
                    "try:",
                    f"    out += {st}.pack({values})",
                    "except struct.error as e:",
                    f"    raise pack_error({names!r}, ({values},), e) from e",
                ]
            else:
                out += self.encode_field(run, f"o.{run.name}", "out", path)
        if self.flexible:
            out.append("tf = []")
            for f in self.tagged(sdef):
                default = self.const(f.default)
                out += [f"if o.{f.name} != {default}:", "    b = bytearray()"]
                out += _indent(self.encode_field(f, f"o.{f.name}", "b", path))
                out.append(f"    tf.append(({f.tag}, b))")
            out.append("write_tagged_fields(out, tf)")
        return out

    def encode_field(self, f: Field, src: str, buf: str, path: str) -> list[str]:
        t, p = f.type, _sub(path, f)
        compact = "compact_" if self.flexible else ""
        if isinstance(t, StructDef):
            cls = self.const(t.cls, "C")
            enc = self.struct(t, p)[1]
            write = f"{enc}({cls}(**x) if x.__class__ is dict else x, {buf})"
            if self.nullable_struct(f):
                return [
                    f"x = {src}",
                    "if x is None:",
                    f"    {buf}.append(0xFF)",
                    "else:",
                    f"    {buf}.append(1)",
                    f"    {write}",
                ]
            message = f"{p}: None in a field that is not nullable in this version"
            return [f"x = {src}", "if x is None:", f"    raise ValueError({message!r})", write]
        if isinstance(t, ArrayOf):
            el = t.element
            lines = [
                f"a = {src}",
                f"write_{compact}array_length({buf}, a, {p!r}, {self.nullable(f)})",
                "if a is not None:",
                "    for e in a:",
            ]
            if isinstance(el, StructDef):
                cls = self.const(el.cls, "C")
                lines += [
                    f"        if e.__class__ is dict: e = {cls}(**e)",
                    f"        {self.struct(el, p)[1]}(e, {buf})",
                ]
            else:
                lines += _indent(self.write_primitive(el, False, "e", buf, p), 2)
            return lines
        return self.write_primitive(t, self.nullable(f), src, buf, p)

    def write_primitive(
        self, t: Primitive, nullable: bool, src: str, buf: str, p: str
    ) -> list[str]:
        if t.fmt:
            st = self.const(struct.Struct(">" + t.fmt), "S")
            return [
                "try:",
                f"    {buf} += {st}.pack({src})",
                "except struct.error as e:",
                f"    raise pack_error({p!r}, ({src},), e) from e",
            ]
        if t is UUID:
            return [f"write_uuid({buf}, {src}, {p!r})"]
        kind = "string" if t is STRING else "bytes"
        nul = "nullable_" if nullable else ""
        compact = "compact_" if self.flexible else ""
        return [f"write_{compact}{nul}{kind}({buf}, {src}, {p!r})"]


def _child(f: Field) -> StructDef | None:
    t = f.type
    if isinstance(t, StructDef):
        return t
    if isinstance(t, ArrayOf) and isinstance(t.element, StructDef):
        return t.element
    return None


def _prim(f: Field) -> Primitive:
    assert isinstance(f.type, Primitive)
    return f.type


def _fmt(f: Field) -> str:
    fmt = _prim(f).fmt
    assert fmt is not None
    return fmt


def _sub(path: str, f: Field, arr: bool = True) -> str:
    suffix = "[]" if arr and isinstance(f.type, ArrayOf) else ""
    return f"{path}.{f.name}{suffix}"


def _runs(fields: list[Field]) -> Iterator[list[Field] | Field]:
    """Groups consecutive fixed-width fields into lists; other fields come alone."""
    run: list[Field] = []
    for f in fields:
        if isinstance(f.type, Primitive) and f.type.fmt:
            run.append(f)
            continue
        if run:
            yield run
            run = []
        yield f
    if run:
        yield run


def _indent(lines: list[str], depth: int = 1) -> list[str]:
    pad = "    " * depth
    return [pad + line for line in lines]


class Message:
    """One request or response type: its schema, its class and its compiled codecs."""

    def __init__(
        self,
        name: str,
        api_key: int,
        versions: str,
        flexible: str,
        fields: list[Field],
    ) -> None:
        self.name = name
        self.api_key = api_key
        self.is_request = name.endswith("Request")
        self.struct = StructDef(name, fields)
        self.cls: type[Struct] = self.struct.cls
        self.versions = parse_versions(versions)
        self.flexible = parse_versions(flexible)
        self._decoders: dict[int, Decoder] = {}
        self._encoders: dict[int, Encoder] = {}
        self._sources: dict[int, str] = {}
        for v in range(self.versions[0], self.versions[1] + 1):
            self._compile(v)

    def _compile(self, version: int) -> None:
        gen = _Codegen(version, self.is_flexible(version))
        dec, enc, _ = gen.struct(self.struct, f"{self.name} v{version}")
        source = "\n".join(gen.lines)
        code = compile(source, f"<compactlog.protocol: {self.name} v{version}>", "exec")
        exec(code, gen.ns)  # our own generated code, from our own schemas
        self._decoders[version] = gen.ns[dec]
        self._encoders[version] = gen.ns[enc]
        self._sources[version] = source

    def is_flexible(self, version: int) -> bool:
        return in_range(version, self.flexible)

    def has_version(self, version: int) -> bool:
        return in_range(version, self.versions)

    def decoder(self, version: int) -> Decoder:
        """The decode function of ``version`` (``KeyError`` if not compiled)."""
        return self._decoders[version]

    def encode(self, body: Struct, version: int, out: bytearray) -> None:
        """Appends ``body`` as ``version`` to ``out``; ``ValueError`` names a bad field."""
        if type(body) is not self.cls:
            raise TypeError(f"expected a {self.name}, got {type(body).__name__}")
        self._encoders[version](body, out)

    def source(self, version: int) -> str:
        """The generated Python source of ``version``'s codec (for debugging)."""
        return self._sources[version]

    def __repr__(self) -> str:
        return f"<{self.name} v{self.versions[0]}-{self.versions[1]}>"
