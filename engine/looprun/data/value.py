"""Frozen value classes that cost less to define: ``@valueclass`` is
``@dataclass(frozen=True)`` with the same ``__eq__``, ``__hash__`` and ``__repr__``, shared
instead of generated.

Defining a dataclass compiles the source of each generated method, and a run defines over
a hundred value classes before it does any work: compiling those sources was about a third
of the instructions its imports execute. ``@valueclass`` has ``dataclasses`` generate only
what needs each class's own code (``__init__`` and the frozen ``__setattr__`` and
``__delattr__``) and gives every class one equality, hash and repr that read the fields
dataclasses recorded: equal, hashed and shown exactly as the generated ones (same fields,
same ``compare``/``hash``/``repr`` flags, same ``NotImplemented`` for another class, same
recursion guard).
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

    __slots__ = ("compare", "hashed", "shown")

    def __init__(self, cls: type) -> None:
        fields = dataclasses.fields(cls)
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


def _finish(cls: type, own: dict[str, Any]) -> None:
    """Add the shared methods where ``@dataclass(frozen=True)`` would add generated ones:
    never over a method the class defines itself."""
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
    """``@dataclass(frozen=True)``, sharing eq, hash and repr."""
    own = dict(cls.__dict__)
    made = dataclasses.dataclass(frozen=True, repr=False, eq=False)(cls)
    _finish(made, own)
    return made
