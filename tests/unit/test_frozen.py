"""Frozen, the base of the immutable value classes: equality, hash, repr, pickling, replace and
immutability from one ``_FIELDS``, on slotted instances without a ``__dict__``."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memory_router.backends.base import BackendContext, BackendResponse, Result
from memory_router.core.envelope import error_envelope
from memory_router.core.frozen import Frozen
from memory_router.core.rules import ChainStep, Rule


class Point(Frozen):
    """A checked value with a cache slot outside its value (as ``Rule._compiled``), so its own
    ``__init__``."""

    __slots__ = ("_cache",)
    x: int
    y: Any
    _cache: dict[str, int]

    def __init__(self, x: int, y: Any = 0) -> None:
        if x < 0:
            raise ValueError(f"x must be >= 0, got {x!r}")
        self._init(x, y, _cache={})


class Pair(Frozen):
    """Another type with the same field names, declared the usual way: never equal to a Point."""

    x: int
    y: int


class Tagged(Frozen):
    """A value wider than its ``_FIELDS`` (as ``Result``'s extra keys): compared, shown and
    rebuilt by them, hashed by ``_FIELDS`` only."""

    __slots__ = ("tags",)
    name: str
    tags: dict[str, Any]

    def __init__(self, name: str, **tags: Any) -> None:
        self._init(name, tags=tags)

    def _field_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.tags}


class Span(Frozen):
    """The usual value: annotations, defaults, and a check in ``__post_init__``."""

    start: int
    end: int = 0
    label: str | None = None

    def __post_init__(self) -> None:
        if self.end < 0:
            raise ValueError(f"Span: end must be >= 0, got {self.end}")


class LabelledSpan(Span):
    """A subclass adds its fields after its base's."""

    colour: str = "red"


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
        point.z = 1
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
        a: int
        b: int

        def __init__(self, a: int) -> None:
            self._init(a)

    with pytest.raises(ValueError, match="zip"):
        Short(1)


def test_the_annotations_are_the_fields_in_order_with_their_defaults() -> None:
    # _FrozenMeta writes each class's __slots__; mypy reads Frozen's own `__slots__ = ()` as its type.
    spans, labelled = Span.__slots__, LabelledSpan.__slots__
    assert Span._FIELDS == ("start", "end", "label") and spans == Span._FIELDS  # type: ignore[comparison-overlap]
    assert LabelledSpan._FIELDS == ("start", "end", "label", "colour") and labelled == ("colour",)  # type: ignore[comparison-overlap]
    assert Span(1) == Span(1, 0, None) == Span(start=1) == Span(1, label=None)
    assert LabelledSpan(1, 2, colour="blue") == LabelledSpan(1, 2, None, "blue")
    assert repr(LabelledSpan(1, 2)) == "LabelledSpan(start=1, end=2, label=None, colour='red')"
    assert Span.__match_args__ == ("start", "end", "label")
    match Span(3, 4):
        case Span(start, end):
            assert (start, end) == (3, 4)


def test_the_generic_constructor_refuses_what_a_written_signature_would() -> None:
    with pytest.raises(TypeError, match=r"^Span\(\) missing required argument\(s\): 'start'$"):
        Span()  # type: ignore[call-arg]  # the refusal under test
    with pytest.raises(TypeError, match=r"^Span\(\) takes 3 positional arguments but 4 were given$"):
        Span(1, 2, "a", "b")  # type: ignore[call-arg]  # the refusal under test
    with pytest.raises(TypeError, match=r"^Span\(\) got multiple values for argument 'start'$"):
        Span(1, start=2)  # type: ignore[misc]  # the refusal under test
    with pytest.raises(TypeError, match=r"^Span\(\) got an unexpected keyword argument 'stop'$"):
        Span(1, stop=2)  # type: ignore[call-arg]  # the refusal under test


def test_post_init_checks_every_construction_replace_and_copy() -> None:
    with pytest.raises(ValueError, match="end must be >= 0, got -1"):
        Span(2, -1)
    span = Span(2, 3)
    with pytest.raises(ValueError, match="end must be >= 0, got -1"):
        span.replace(end=-1)
    assert span.replace(end=5) == Span(2, 5) and copy.deepcopy(span) == span
    assert pickle.loads(pickle.dumps(LabelledSpan(1, 2, "x", "blue"))) == LabelledSpan(1, 2, "x", "blue")


def test_a_value_never_equals_a_tuple_a_subclass_or_a_lookalike() -> None:
    # The NamedTuple leak this base closes: ChainStep("qmd") == ("qmd", None) was True.
    assert ChainStep("qmd") != ("qmd", None, False) and ("qmd", None, False) != ChainStep("qmd")
    assert Span(1, 2) != (1, 2, None) and Span(1, 2) != LabelledSpan(1, 2) and LabelledSpan(1, 2) != Span(1, 2)
    assert Span(1, 2) != Pair(1, 2) and Span(1, 2) != {"start": 1, "end": 2, "label": None}
    with pytest.raises(TypeError):
        iter(ChainStep("qmd"))  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        ChainStep("qmd")[0]  # type: ignore[index]


def test_a_class_definition_refuses_a_shared_mutable_default_and_misordered_defaults() -> None:
    with pytest.raises(TypeError, match=r"Bad\.items: a mutable default \(list\) would be shared"):

        class Bad(Frozen):
            items: list[int] = []  # noqa: RUF012

    with pytest.raises(TypeError, match="field 'b' without a default follows one with a default"):

        class Misordered(Frozen):
            a: int = 0
            b: int  # type: ignore[misc]  # the refusal under test

    with pytest.raises(TypeError, match="declare a Frozen value's fields as class annotations"):

        class Old(Frozen):
            _FIELDS = ("a",)


def test_classvars_are_not_fields() -> None:
    class WithConstant(Frozen):
        LIMIT: ClassVar[int] = 3
        a: int

    assert WithConstant._FIELDS == ("a",) and WithConstant.LIMIT == 3 and WithConstant(1).LIMIT == 3


def _instances() -> list[Frozen]:
    return [
        Result("x", 0.5, "qmd", path="a.md"),
        BackendResponse.failure("qmd", "q", "X", "boom"),
        BackendContext(Path("/state"), {}, Path("/cwd")),
        error_envelope("q", "X", "y"),
        Rule(1, "id", "d", ("a",), (), (ChainStep("qmd"),), "(?P<s0>a)"),
        ChainStep("qmd", "query"),
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


def _settings_class(line: str) -> bool:
    return line.startswith("class ") and line.partition("(")[0].rstrip(":").endswith("Settings")


def test_the_package_has_one_idiom_for_values() -> None:
    # The rule in memory_router/core/frozen.py: no NamedTuple, and a dataclass only for an
    # adapter's pydantic-validated Settings or a group of them (qmd's RefreshSettings): input,
    # not a value of ours.
    root = Path(__file__).resolve().parents[2]
    offenders = []
    for source in sorted([*root.joinpath("memory_router").rglob("*.py"), *root.joinpath("backends").rglob("*.py")]):
        lines = source.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            code = line.split("#")[0]
            dataclass = code.startswith(("@dataclass(", "@dataclasses.dataclass")) or code.strip() == "@dataclass"
            if "(NamedTuple)" in code or dataclass and not _settings_class(lines[number]):
                offenders.append(f"{source.relative_to(root)}:{number}: {line.strip()}")
    assert offenders == [], "declare these as Frozen values (memory_router/core/frozen.py):\n" + "\n".join(offenders)
