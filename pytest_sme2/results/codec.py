"""Records as JSON objects, by one rule instead of a writer and a reader per class.

:func:`encode` writes a dataclass as its fields, in their order: a nested record through its
own writer (``to_json``, ``to_dict``) or this rule, lists and tuples as lists, dicts as dicts.
:func:`decode` reads one back from the keys it knows, by the fields' types (a record, ``X |
None``, ``list[X]``, ``tuple[X, ...]``, ``dict[str, X]``); a key no field names is left out.
It forgives what the hand-written readers forgave: a missing key, or null where the field is
not optional, takes the field's default; an empty object where a record may be None reads as
None (:func:`decode_optional` returns None for one at the top).

What the schema's history needs, said on the field (``field(..., metadata=...)``):

- :func:`added` (a field added after documents were written): left out while it holds its
  default, and with it the other fields of its ``group`` while they all hold theirs, so an
  older document writes back byte for byte;
- :data:`NOT_STORED`: a field the document does not keep (it reads back as its default).

A class's ``LEGACY`` (``{"old key": "field"}``) reads a key an older schema wrote into the
field that holds it now. A record uses the rule by naming it: ``to_json = encode`` and
``from_json = classmethod(decode)`` in its body (or ``to_dict``/``from_dict``, the names its
callers use). Hand code stays where a key is computed or a document's own key order is kept.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Callable, NamedTuple, TypeVar

T = TypeVar("T")

NOT_STORED = {"stored": False}


def added(group: str | None = None) -> dict[str, Any]:
    """Field metadata: written only when it (or any field of its ``group``) is not at its
    default."""
    return {"added": group or True}


class _Field(NamedTuple):
    name: str
    kind: Any                       # the field's type, resolved (Any where it cannot be)
    default: Callable[[], Any] | None   # gives the default; None: the field is required
    stored: bool
    group: str | None               # an added field's group (its own name when alone)


@cache
def _fields(cls: type) -> tuple[_Field, ...]:
    scope = vars(sys.modules[cls.__module__])
    out = []
    for f in dataclasses.fields(cls):
        try:    # a string annotation (from __future__ import annotations), as get_type_hints
            kind = eval(f.type, scope) if isinstance(f.type, str) else f.type
        except NameError:       # a name imported for type checkers only
            kind = Any
        default = (f.default_factory if f.default_factory is not dataclasses.MISSING
                   else None if f.default is dataclasses.MISSING
                   else lambda value=f.default: value)
        mark = f.metadata.get("added")
        out.append(_Field(f.name, kind, default, f.metadata.get("stored", True),
                          (f.name if mark is True else mark) if mark else None))
    return tuple(out)


# -- writing -----------------------------------------------------------------------------------

def as_json(v: Any) -> Any:
    """A value as a JSON document holds it: a record through its own writer (``to_json``,
    ``to_dict``) or :func:`encode`, lists and dicts item by item; None stays None."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        writer = getattr(v, "to_json", None) or getattr(v, "to_dict", None)
        return writer() if writer is not None else encode(v)
    if isinstance(v, (list, tuple)):
        return [as_json(x) for x in v]
    if isinstance(v, Mapping):
        return {k: as_json(x) for k, x in v.items()}
    return v


def encode(record: Any) -> dict[str, Any]:
    """``record``'s fields as a JSON object (see the module's docstring)."""
    fields = _fields(type(record))
    values = {f.name: getattr(record, f.name) for f in fields}
    unset = {f.group for f in fields if f.group} - {
        f.group for f in fields if f.group and values[f.name] != f.default()}
    return {f.name: as_json(values[f.name]) for f in fields
            if f.stored and (f.group is None or f.group not in unset)}


# -- reading -----------------------------------------------------------------------------------

def _optional(kind: Any) -> tuple[bool, Any]:
    """(whether None is allowed, the type without None)."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(args) < len(typing.get_args(kind)):
            return True, args[0] if len(args) == 1 else Any
    return kind is Any, kind


def _read(kind: Any, v: Any) -> Any:
    optional, kind = _optional(kind)
    if v is None:
        return None
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        if optional and not v:
            return None
        reader = getattr(kind, "from_json", None) or getattr(kind, "from_dict", None)
        return reader(v) if reader is not None else decode(kind, v)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (list, tuple, Sequence) and isinstance(v, (list, tuple)):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return tuple(_read(a, x) for a, x in zip(args, v))
        items = [_read(args[0] if args else Any, x) for x in v]
        return tuple(items) if origin is tuple else items
    if isinstance(v, Mapping):
        of = args[1] if origin in (dict, Mapping) and len(args) == 2 else Any
        return {k: _read(of, x) for k, x in v.items()}
    if isinstance(v, list):
        return list(v)
    return v


def decode(cls: type[T], d: Mapping[str, Any] | None) -> T:
    """A ``cls`` from its JSON object (see the module's docstring)."""
    d = d or {}
    legacy = getattr(cls, "LEGACY", {})
    if legacy:
        d = {**{legacy[k]: v for k, v in d.items() if k in legacy}, **d}
    values = {}
    for f in _fields(cls):
        if not f.stored:
            continue
        if f.name not in d:
            if f.default is None:
                raise KeyError(f.name)
            continue                                        # its default
        v = d[f.name]
        if v is None and f.default is not None and not _optional(f.kind)[0]:
            continue                                        # null where None is no value
        values[f.name] = _read(f.kind, v)
    return cls(**values)


def read_optional(cls: type[T], v: Any) -> T | None:
    """A ``cls`` read by its own reader (``from_json``, ``from_dict``; else :func:`decode`);
    None for a missing, null or empty object."""
    return _read(cls | None, v)


def decode_optional(cls: type[T], d: Mapping[str, Any] | None) -> T | None:
    """:func:`decode`, or None for a missing or empty object."""
    return decode(cls, d) if d else None
