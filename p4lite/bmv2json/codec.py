"""Declarative JSON <-> model conversion: each model class lists its JSON keys and how to
read and write each one; ``decode`` and ``encode`` walk those lists.

A model object remembers which keys its JSON had, in order (``json_keys``), and any
keys the model does not type (``extra``), so ``encode(decode(doc)) == doc`` key for key:
the compiler's output stays byte-identical through the model. An object built in code
(``json_keys`` empty) is written with every key in the class's declared order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from p4lite.bmv2json.where import Where

Json = Any  # a JSON value as json.loads returns it

T = TypeVar("T")


class Codec(Protocol):
    def decode(self, value: Json, where: Where) -> Any: ...

    def encode(self, value: Any) -> Json: ...


class _Scalar:
    def __init__(self, kinds: tuple[type, ...], label: str, nullable: bool = False) -> None:
        self.kinds, self.label, self.nullable = kinds, label, nullable

    def decode(self, value: Json, where: Where) -> Any:
        if value is None and self.nullable:
            return None
        if isinstance(value, bool) and bool not in self.kinds:
            raise where.fail(f"expected {self.label}, got {value!r}")
        if not isinstance(value, self.kinds):
            raise where.fail(f"expected {self.label}, got {value!r}")
        return value

    def encode(self, value: Any) -> Json:
        return value


STR = _Scalar((str,), "a string")
INT = _Scalar((int,), "an integer")
BOOL = _Scalar((bool,), "true or false")
OPT_STR = _Scalar((str,), "a string or null", nullable=True)
OPT_INT = _Scalar((int,), "an integer or null", nullable=True)


class _Raw:
    """Any JSON value, kept as it is (expressions are BMv2's own tree format: the
    checker walks them, the switch compiles them)."""

    def decode(self, value: Json, where: Where) -> Any:
        return value

    def encode(self, value: Any) -> Json:
        return value


RAW = _Raw()


class NullTuple(tuple):
    """An empty tuple that was ``null`` in the JSON (written back as null)."""

    __slots__ = ()


class ListOf:
    """A JSON array as a tuple. ``null`` reads as an empty tuple, as BMv2 iterates a null
    value as an empty array (and is written back as null)."""

    def __init__(self, item: Codec) -> None:
        self.item = item

    def decode(self, value: Json, where: Where) -> tuple:
        if value is None:
            return NullTuple()
        if not isinstance(value, list):
            raise where.fail(f"expected an array, got {type(value).__name__}")
        return tuple(self.item.decode(v, where.index(i)) for i, v in enumerate(value))

    def encode(self, value: tuple) -> Json:
        if isinstance(value, NullTuple):
            return None
        return [self.item.encode(v) for v in value]


class FieldRefCodec:
    """``[header, field]`` as a tuple of two strings."""

    def decode(self, value: Json, where: Where) -> tuple[str, str]:
        if not (isinstance(value, list) and len(value) == 2
                and all(isinstance(x, str) for x in value)):
            raise where.fail(f"expected a field reference [header, field], got {value!r}")
        return (value[0], value[1])

    def encode(self, value: tuple[str, str]) -> Json:
        return list(value)


FIELD_REF = FieldRefCodec()


class _OptFieldRef(FieldRefCodec):
    def decode(self, value: Json, where: Where) -> tuple[str, str] | None:  # type: ignore[override]
        return None if value is None else super().decode(value, where)

    def encode(self, value: tuple[str, str] | None) -> Json:
        return None if value is None else list(value)


OPT_FIELD_REF = _OptFieldRef()


def attr(codec: Codec, name: str | None = None, default: Any = dataclasses.MISSING,
        ) -> Any:
    """A model attribute read from JSON key ``name`` (default: the attribute's name)
    with ``codec``; without a ``default`` the key is required."""
    meta = {"codec": codec, "key": name}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=meta)
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable default")
    return dataclasses.field(default=default, metadata=meta)


_SPECS: dict[type, list[tuple[str, str, Codec, bool]]] = {}


def _specs(cls: type) -> list[tuple[str, str, Codec, bool]]:
    """(attribute, JSON key, codec, required) for each JSON-backed attribute of ``cls``."""
    cached = _SPECS.get(cls)
    if cached is not None:
        return cached
    out = []
    for f in dataclasses.fields(cls):
        if "codec" in f.metadata:
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            out.append((f.name, f.metadata["key"] or f.name, f.metadata["codec"], required))
    _SPECS[cls] = out
    return out



@dataclass(frozen=True, kw_only=True)
class Node:
    """Base of every model class: the JSON keys it had, in order, and untyped extras."""

    NAME_KEY: ClassVar[str | None] = "name"  # the key that names the object in errors
    json_keys: tuple[str, ...] = dataclasses.field(default=(), compare=False, repr=False)
    extra: tuple[tuple[str, Json], ...] = dataclasses.field(default=(), repr=False)

    def to_json(self) -> dict[str, Json]:
        return encode_obj(self)


def decode_obj(cls: type[T], value: Json, where: Where) -> T:
    if not isinstance(value, dict):
        raise where.fail(f"expected an object, got {type(value).__name__}")
    name_key = getattr(cls, "NAME_KEY", None)
    if name_key is not None and isinstance(value.get(name_key), str):
        where = where.named(value[name_key])
    kwargs: dict[str, Any] = {}
    known = set()
    for attr, jkey, codec, required in _specs(cls):
        known.add(jkey)
        if jkey in value:
            kwargs[attr] = codec.decode(value[jkey], where.key(jkey))
        elif required:
            raise where.fail(f"missing '{jkey}'")
    kwargs["json_keys"] = tuple(value)
    kwargs["extra"] = tuple((k, v) for k, v in value.items() if k not in known)
    return cls(**kwargs)


def encode_obj(obj: Any) -> dict[str, Json]:
    specs = {jkey: (attr, codec) for attr, jkey, codec, _ in _specs(type(obj))}
    extra = dict(obj.extra)
    order = obj.json_keys or tuple(specs)
    out: dict[str, Json] = {}
    for k in order:
        if k in specs:
            attr, codec = specs[k]
            out[k] = codec.encode(getattr(obj, attr))
        elif k in extra:
            out[k] = extra[k]
    return out


class ObjOf:
    """A nested model object."""

    def __init__(self, cls: type, nullable: bool = False) -> None:
        self.cls, self.nullable = cls, nullable

    def decode(self, value: Json, where: Where) -> Any:
        if value is None and self.nullable:
            return None
        return decode_obj(self.cls, value, where)

    def encode(self, value: Any) -> Json:
        return None if value is None else encode_obj(value)


class Custom:
    """A value read and written by two functions (small fixed shapes such as
    ``[name, value]`` pairs)."""

    def __init__(self, decode: Callable[[Json, Where], Any], encode: Callable[[Any], Json]
                 ) -> None:
        self._decode, self._encode = decode, encode

    def decode(self, value: Json, where: Where) -> Any:
        return self._decode(value, where)

    def encode(self, value: Any) -> Json:
        return self._encode(value)

