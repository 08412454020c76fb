"""``@valueclass`` behaves as ``@dataclass(frozen=True)``: the same equality, hash, repr,
immutability and dataclass API, on the same class bodies side by side."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from looprun.data.value import valueclass


def _pair(body: dict[str, Any], annotations: dict[str, Any]) -> tuple[type, type]:
    made = []
    for deco in (dataclass(frozen=True), valueclass):
        ns = {**body, "__annotations__": dict(annotations), "__module__": __name__}
        made.append(deco(type("Shape", (), ns)))
    return made[0], made[1]


ANN = {"a": "int", "b": "str", "hidden": "int", "loose": "float", "tag": "ClassVar[str]"}
BODY = {
    "b": "x",
    "hidden": field(default=0, repr=False),
    "loose": field(default=0.0, compare=False),
    "tag": "t",
}


@pytest.mark.parametrize(
    "args",
    [(1,), (1, "y"), (1, "y", 5), (1, "y", 5, 2.5), (2, "x", 0, float("nan"))],
)
def test_eq_hash_repr_and_fields_match_the_generated_ones(args: tuple[Any, ...]) -> None:
    old, new = _pair(BODY, ANN)
    o1, o2 = old(*args), old(*args)
    n1, n2 = new(*args), new(*args)
    assert repr(n1) == repr(o1)
    assert (n1 == n2) == (o1 == o2) and (n1 != n2) == (o1 != o2)
    assert hash(n1) == hash(o1)
    assert [f.name for f in dataclasses.fields(new)] == [f.name for f in dataclasses.fields(old)]
    assert dataclasses.asdict(n1) == dataclasses.asdict(o1)
    assert dataclasses.replace(n1, a=9).a == 9 and dataclasses.replace(n1, a=9) != n1
    assert new.__match_args__ == old.__match_args__


def test_compare_false_fields_are_left_out_of_eq_and_hash() -> None:
    _, new = _pair(BODY, ANN)
    assert new(1, loose=1.0) == new(1, loose=2.0)
    assert hash(new(1, loose=1.0)) == hash(new(1, loose=2.0))
    assert new(1, hidden=1) != new(1, hidden=2)
    assert "hidden" not in repr(new(1)) and "loose=0.0" in repr(new(1))


def test_another_class_with_the_same_fields_is_not_equal() -> None:
    _, new = _pair(BODY, ANN)
    _, other = _pair(BODY, ANN)
    assert new(1) != other(1) and new(1).__eq__(other(1)) is NotImplemented
    assert new(1) != (1, "x", 0, 0.0)


def test_instances_stay_frozen_and_pickle() -> None:
    _, new = _pair(BODY, ANN)
    globals()["Shape"] = new  # pickle finds the class by name
    obj = new(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.a = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del obj.a  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(obj)) == obj


def test_a_method_the_class_defines_is_kept() -> None:
    def eq(self: Any, other: Any) -> bool:
        return True

    old, new = _pair({"__eq__": eq}, {"a": "int"})
    assert new(1) == new(2) and old(1) == old(2)
    # defining __eq__ alone: dataclasses still adds a hash; so does @value
    assert hash(new(1)) == hash(old(1))
    _, own_repr = _pair({"__repr__": lambda self: "mine"}, {"a": "int"})
    assert repr(own_repr(1)) == "mine"
    _, own_hash = _pair({"__hash__": lambda self: 7}, {"a": "int"})
    assert hash(own_hash(1)) == 7


def test_subclasses_compare_by_their_own_fields() -> None:
    @valueclass
    class Base:
        a: int

    @valueclass
    class Child(Base):
        b: int = 0

    class Plain(Base):  # not decorated: the base's fields
        pass

    assert Child(1, 2) != Child(1, 3) and Child(1, 2) == Child(1, 2)
    assert Base(1) != Child(1) and Plain(1) == Plain(1) and Plain(1) != Base(1)
    assert (
        repr(Child(1, 2)) == "test_subclasses_compare_by_their_own_fields.<locals>.Child(a=1, b=2)"
    )
    assert repr(Plain(1)).endswith("Plain(a=1)")


def test_a_recursive_repr_is_cut_as_dataclasses_cut_it() -> None:
    @valueclass
    class Box:
        items: list[Any]

    box = Box([])
    box.items.append(box)
    assert (
        repr(box) == "test_a_recursive_repr_is_cut_as_dataclasses_cut_it.<locals>.Box(items=[...])"
    )


def test_a_class_without_fields() -> None:
    old, new = _pair({}, {})
    assert new() == new() and hash(new()) == hash(old()) and repr(new()) == repr(old())


def test_classvar_is_not_a_field() -> None:
    _, new = _pair(BODY, ANN)
    assert "tag" not in repr(new(1)) and new.tag == "t"
    assert ClassVar  # the annotation's name is resolved from this module


def test_the_engine_defines_its_frozen_values_with_valueclass() -> None:
    """Each ``@dataclass(frozen=True)`` compiles three more methods as every run starts;
    the error tree (below ``data/``, so it cannot import ``valueclass``) and the runners
    that run inside the tests' interpreter (no looprun there) are the exceptions."""
    engine = Path(__file__).resolve().parents[1] / "engine" / "looprun"
    found = [
        f"{path.relative_to(engine)}:{n}"
        for path in sorted(engine.rglob("*.py"))
        if path.name != "errors.py" and path.parent.name != "pytest_plugin"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.strip().startswith("@dataclass(frozen=True")
    ]
    assert not found, "use @valueclass (looprun.data.value):\n" + "\n".join(found)


def test_hash_flags_are_read_as_dataclasses_read_them() -> None:
    ann = {"a": "int", "salt": "int", "note": "str"}
    body = {
        "salt": field(default=0, compare=False, hash=True),
        "note": field(default="", hash=False),
    }
    old, new = _pair(body, ann)
    for args in [(1,), (1, 2), (1, 2, "x")]:
        assert hash(new(*args)) == hash(old(*args))
    assert new(1, 1) == new(1, 2) and hash(new(1, 1)) != hash(new(1, 2))
    assert new(1, note="x") != new(1, note="y")


def test_init_takes_and_fills_arguments_as_the_generated_one() -> None:
    """The ``__init__`` compiled at the first call: positional and keyword arguments,
    defaults, factories (a new value per instance), keyword-only and ``init=False``
    fields, ``__post_init__``; the same errors for a wrong call."""
    ann = {"a": "int", "b": "list[int]", "c": "int", "d": "str", "e": "dict[str, int]"}
    body = {
        "b": field(default_factory=list),
        "c": field(default=3, kw_only=True),
        "d": field(default="fixed", init=False),
        "e": field(default_factory=dict, init=False),
        "__post_init__": lambda self: self.e.update(seen=self.a),
    }
    old, new = _pair(body, ann)
    for args, kwargs in [((1,), {}), ((1, [2]), {"c": 4}), ((), {"a": 5, "b": [6], "c": 7})]:
        o, n = old(*args, **kwargs), new(*args, **kwargs)
        assert dataclasses.asdict(n) == dataclasses.asdict(o), (args, kwargs)
    assert new(1).b is not new(1).b and new(1).e is not new(1).e
    for args, kwargs in [((), {}), ((1, [], 3), {}), ((1,), {"d": "x"}), ((1,), {"z": 0})]:
        with pytest.raises(TypeError):
            old(*args, **kwargs)
        with pytest.raises(TypeError):
            new(*args, **kwargs)
    assert new.__init__.__qualname__ == "Shape.__init__"


def test_a_field_without_default_after_one_with_is_refused_at_the_definition() -> None:
    body, ann = {"a": 1}, {"a": "int", "b": "int"}
    with pytest.raises(TypeError, match="non-default argument 'b' follows default"):
        valueclass(type("Bad", (), {**body, "__annotations__": ann}))
    with pytest.raises(TypeError, match="non-default argument 'b' follows default"):
        dataclass(frozen=True)(type("Bad", (), {**body, "__annotations__": ann}))


def test_an_undecorated_subclass_may_set_its_own_attributes_but_no_field() -> None:
    """As with a frozen dataclass: only the decorated class itself is closed."""

    @valueclass
    class Base:
        a: int

    class Open(Base):
        pass

    obj = Open(1)
    obj.extra = 2  # type: ignore[attr-defined]
    assert obj.extra == 2  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.a = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Base(1).extra = 2  # type: ignore[attr-defined]


def test_its_own_setattr_is_refused_as_dataclasses_refuses_it() -> None:
    def setattr_(self: Any, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    for deco in (dataclass(frozen=True), valueclass):
        with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):
            deco(type("Own", (), {"__annotations__": {"a": "int"}, "__setattr__": setattr_}))
