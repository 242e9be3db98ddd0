"""Frozen, the base of the immutable value classes: equality, hash, repr, pickling, replace and
immutability from one ``_FIELDS``, on slotted instances without a ``__dict__``."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from memory_router.backends.base import BackendContext, BackendResponse, Result

from memory_router.core.envelope import error_envelope
from memory_router.core.frozen import Frozen
from memory_router.core.rules import Rule, Step


class Point(Frozen):
    """A checked value with a cache slot outside its value (as ``Rule._compiled``)."""

    _FIELDS = ("x", "y")
    __slots__ = (*_FIELDS, "_cache")
    x: int
    y: Any
    _cache: dict[str, int]

    def __init__(self, x: int, y: Any = 0) -> None:
        if x < 0:
            raise ValueError(f"x must be >= 0, got {x!r}")
        self._init(x, y, _cache={})


class Pair(Frozen):
    """Another type with the same field names: never equal to a Point."""

    _FIELDS = ("x", "y")
    __slots__ = _FIELDS

    def __init__(self, x: int, y: int) -> None:
        self._init(x, y)


class Tagged(Frozen):
    """A value wider than its ``_FIELDS`` (as ``Result``'s extra keys): compared, shown and
    rebuilt by them, hashed by ``_FIELDS`` only."""

    _FIELDS = ("name",)
    __slots__ = (*_FIELDS, "tags")

    def __init__(self, name: str, **tags: Any) -> None:
        self._init(name, tags=tags)

    def _field_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.tags}


def test_equal_fields_make_equal_values_with_equal_hashes() -> None:
    assert Point(1, 2) == Point(1, 2) and hash(Point(1, 2)) == hash(Point(1, 2)) == hash((1, 2))
    assert Point(1, 2) != Point(1, 3)
    assert len({Point(1, 2), Point(1, 2), Point(2, 1)}) == 2


def test_another_type_is_not_implemented_and_never_equal() -> None:
    assert Point(1, 2).__eq__((1, 2)) is NotImplemented
    assert Point(1, 2) != (1, 2) and Point(1, 2) != Pair(1, 2) and Pair(1, 2) != Point(1, 2)


def test_a_slot_outside_the_fields_is_not_part_of_the_value() -> None:
    warm = Point(1, 2)
    warm._cache["k"] = 1  # the cache is mutable; the value is not
    assert warm == Point(1, 2) and hash(warm) == hash(Point(1, 2))
    assert repr(warm) == "Point(x=1, y=2)"


def test_an_unhashable_field_makes_the_value_unhashable_as_a_frozen_dataclass() -> None:
    with pytest.raises(TypeError, match="unhashable"):
        hash(Point(1, [2]))
    assert Point(1, [2]) == Point(1, [2])


def test_repr_shows_the_fields_in_order_as_a_dataclass_does() -> None:
    assert repr(Point(1, "a")) == "Point(x=1, y='a')"
    assert repr(Tagged("n", b=1, a=2)) == "Tagged(name='n', b=1, a=2)"


def test_attributes_cannot_be_set_or_deleted() -> None:
    point = Point(1, 2)
    with pytest.raises(AttributeError, match=r"^Point is immutable \(cannot set 'x'\); use replace\(\)$"):
        point.x = 5  # type: ignore[misc]
    with pytest.raises(AttributeError, match=r"^Point is immutable \(cannot delete 'y'\)$"):
        del point.y
    with pytest.raises(AttributeError, match="immutable"):
        point._cache = {}  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        point.z = 1  # type: ignore[attr-defined]
    assert (point.x, point.y) == (1, 2)


def test_instances_have_slots_and_no_dict() -> None:
    assert Frozen.__slots__ == ()
    assert not hasattr(Point(1), "__dict__") and not hasattr(Pair(1, 2), "__dict__")


def test_replace_rebuilds_through_init_so_its_checks_run_again() -> None:
    point = Point(1, 2)
    point._cache["k"] = 1
    moved = point.replace(y=3)
    assert type(moved) is Point and moved == Point(1, 3) and point == Point(1, 2)
    assert moved._cache == {}  # a new value starts a new cache
    assert point.replace() == point and point.replace() is not point
    with pytest.raises(ValueError, match="x must be >= 0"):
        point.replace(x=-1)
    with pytest.raises(TypeError, match="nope"):
        point.replace(nope=1)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_round_trips_through_init(protocol: int) -> None:
    point = Point(1, (2, "b"))
    point._cache["k"] = 1
    back = pickle.loads(pickle.dumps(point, protocol))
    assert type(back) is Point and back == point and back._cache == {}


def test_copy_and_deepcopy_round_trip() -> None:
    point = Point(1, [2])
    assert copy.copy(point) == point and copy.copy(point).y is point.y
    deep = copy.deepcopy(point)
    assert deep == point and deep.y is not point.y


def test_a_wider_value_compares_shows_and_rebuilds_by_its_field_dict_but_hashes_by_fields() -> None:
    tagged = Tagged("n", a=[1])
    assert tagged == Tagged("n", a=[1]) and tagged != Tagged("n", a=[2]) and tagged != Tagged("n")
    assert hash(tagged) == hash(Tagged("n", b=2)) == hash(("n",))  # the tags may be unhashable
    assert tagged.replace(b=2) == Tagged("n", a=[1], b=2)
    assert pickle.loads(pickle.dumps(tagged)) == tagged


def test_init_needs_every_field() -> None:
    class Short(Frozen):
        _FIELDS = ("a", "b")
        __slots__ = _FIELDS

        def __init__(self, a: int) -> None:
            self._init(a)

    with pytest.raises(ValueError, match="zip"):
        Short(1)


def _instances() -> list[Frozen]:
    return [
        Result("x", 0.5, "qmd", path="a.md"),
        BackendResponse.failure("qmd", "q", "X", "boom"),
        BackendContext(Path("/state"), {}, Path("/cwd")),
        error_envelope("q", "X", "y"),
        Rule(1, "id", "d", ("a",), (), (Step("qmd"),), "(?P<s0>a)"),
    ]


@pytest.mark.parametrize("value", _instances(), ids=lambda v: type(v).__name__)
def test_the_value_classes_are_slotted_frozen_values(value: Frozen) -> None:
    cls = type(value)
    assert not hasattr(value, "__dict__")
    assert set(cls._FIELDS) <= set(cls.__slots__)
    assert value.replace() == value and pickle.loads(pickle.dumps(value)) == value
    with pytest.raises(AttributeError, match=f"^{cls.__name__} is immutable"):
        setattr(value, cls._FIELDS[0], None)


@pytest.mark.slow
def test_the_base_imports_no_dataclasses() -> None:
    # The point of Frozen: a class definition without dataclasses' generated code.
    code = "import sys, memory_router.core.frozen; print('dataclasses' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
