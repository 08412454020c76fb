"""Frozen value classes that cost less to define: ``@valueclass`` is
``@dataclass(frozen=True)`` with the same ``__eq__``, ``__hash__``, ``__repr__``,
``__setattr__`` and ``__delattr__``, shared instead of generated, and an ``__init__``
compiled when the class is first instantiated.

Defining a dataclass compiles the source of each generated method, and a run defines over
a hundred value classes before it does any work, most of which it never instantiates:
compiling those sources was about a quarter of a run's start. ``@valueclass`` has
``dataclasses`` record the fields only, gives every class one equality, hash, repr and
frozen attribute guard that read those fields (equal, hashed, shown and guarded exactly as
the generated ones: same ``compare``/``hash``/``repr`` flags, same ``NotImplemented`` for
another class, same recursion guard, same ``FrozenInstanceError``), and compiles each
class's ``__init__`` (the one method whose code is the class's own, kept as fast as the
generated one) the first time the class is called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from threading import get_ident
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")
Key = Callable[[Any], tuple[Any, ...]]


def _key(names: tuple[str, ...]) -> Key:
    """The tuple of ``names``' values, as the generated methods build it."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        (name,) = names
        return lambda obj: (getattr(obj, name),)
    return attrgetter(*names)  # a tuple when given two names or more


class _Shape:
    """What a class's shared methods read, from its dataclass fields."""

    __slots__ = ("compare", "hashed", "names", "shown")

    def __init__(self, cls: type) -> None:
        fields = dataclasses.fields(cls)
        self.names = frozenset(f.name for f in fields)
        self.compare = _key(tuple(f.name for f in fields if f.compare))
        self.hashed = _key(
            tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        )
        self.shown = tuple(f.name for f in fields if f.repr)


_SHAPES: dict[type, _Shape] = {}


def _shape(cls: type) -> _Shape:
    shape = _SHAPES.get(cls)
    if shape is None:  # first use, or an undecorated subclass (its fields are its base's)
        shape = _SHAPES[cls] = _Shape(cls)
    return shape


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        key = _shape(self.__class__).compare
        return key(self) == key(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(_shape(self.__class__).hashed(self))


_SHOWING: set[tuple[int, int]] = set()  # (object, thread) reprs in progress


def _repr(self: Any) -> str:
    key = (id(self), get_ident())
    if key in _SHOWING:
        return "..."
    _SHOWING.add(key)
    try:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _shape(self.__class__).shown)
        return f"{self.__class__.__qualname__}({shown})"
    finally:
        _SHOWING.discard(key)


# A decorated class refuses every attribute (it holds these functions itself); an
# undecorated subclass, only the fields: dataclasses' rule for a frozen class.
def _setattr(self: Any, name: str, value: Any) -> None:
    cls = self.__class__
    if cls.__dict__.get("__setattr__") is _setattr or name in _shape(cls).names:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _delattr(self: Any, name: str) -> None:
    cls = self.__class__
    if cls.__dict__.get("__delattr__") is _delattr or name in _shape(cls).names:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


_NO_DEFAULT = dataclasses.MISSING
_FACTORY = object()  # an argument left to its field's default_factory


def _init_source(cls: type) -> tuple[str, dict[str, Any]]:
    """The source of ``cls.__init__`` as dataclasses writes it for a frozen class, and
    the names it reads (each default and factory under a name of its own)."""
    names: dict[str, Any] = {"_set": object.__setattr__, "_FACTORY": _FACTORY}
    params: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in dataclasses.fields(cls):
        factory = f.default_factory is not _NO_DEFAULT
        if factory:
            names[f"_f_{f.name}"] = f.default_factory
        elif f.default is not _NO_DEFAULT:
            names[f"_d_{f.name}"] = f.default
        if f.init:
            default = (
                "=_FACTORY" if factory else "" if f.default is _NO_DEFAULT else f"=_d_{f.name}"
            )
            (keyword if f.kw_only else params).append(f"{f.name}{default}")
            value = f"_f_{f.name}() if {f.name} is _FACTORY else {f.name}" if factory else f.name
        elif factory:
            value = f"_f_{f.name}()"
        elif f.default is not _NO_DEFAULT:
            value = f"_d_{f.name}"
        else:
            continue  # set by __post_init__, if at all
        body.append(f"    _set(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    signature = ", ".join(["self", *params, *(["*", *keyword] if keyword else [])])
    return f"def __init__({signature}):\n" + "\n".join(body or ["    pass"]) + "\n", names


def _compiled_init(cls: type) -> Callable[..., None]:
    source, names = _init_source(cls)
    exec(source, names)  # built above from the field names alone
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


def _check_init_order(fields: tuple[dataclasses.Field[Any], ...]) -> None:
    """dataclasses' rule, at the definition as dataclasses enforces it: a positional
    field without a default cannot follow one with a default."""
    seen_default = None
    for f in fields:
        if not f.init or f.kw_only:
            continue
        has = f.default is not _NO_DEFAULT or f.default_factory is not _NO_DEFAULT
        if has:
            seen_default = f.name
        elif seen_default is not None:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")


def _lazy_init(cls: type) -> Callable[..., None]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init = _compiled_init(cls)
        cls.__init__ = init  # type: ignore[misc]
        init(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _finish(cls: type, own: dict[str, Any]) -> None:
    """Add the shared methods where ``@dataclass(frozen=True)`` would add generated ones:
    never over a method the class defines itself (nor, as dataclasses refuses, over a
    ``__setattr__`` or ``__delattr__``)."""
    for name in ("__setattr__", "__delattr__"):
        if name in own:
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    for name, f in cls.__dataclass_fields__.items():  # fields, ClassVars and InitVars
        if name not in names and "InitVar" in str(f.type):
            raise TypeError(f"{cls.__name__}.{name}: @valueclass takes no InitVar")
    cls.__setattr__ = _setattr  # type: ignore[assignment]
    cls.__delattr__ = _delattr  # type: ignore[assignment]
    if "__init__" not in own:
        _check_init_order(fields)
        cls.__init__ = _lazy_init(cls)  # type: ignore[misc]
    if "__repr__" not in own:
        cls.__repr__ = _repr  # type: ignore[assignment]
    if "__eq__" not in own:
        cls.__eq__ = _eq  # type: ignore[assignment]
    # dataclasses' rule: an explicit __hash__ stays; a __hash__ that Python set to None
    # because the class defines __eq__ does not count as explicit
    explicit = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if not explicit:
        cls.__hash__ = _hash  # type: ignore[assignment]


@dataclass_transform(frozen_default=True)
def valueclass(cls: type[T], /) -> type[T]:
    """``@dataclass(frozen=True)``, sharing eq, hash, repr and the frozen attribute guard,
    with ``__init__`` compiled at the first call."""
    own = dict(cls.__dict__)
    made = dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    _finish(made, own)
    return made
