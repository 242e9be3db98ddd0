"""``Frozen``: the one idiom for immutable values in memory-router. This is the rule's one home.

**The rule.** A value (a record that is built once and then only read: a result, a response, an
envelope, a rule, a plan step, a parsed config, an adapter's internal record) is a subclass of
:class:`Frozen`, declared with class annotations and defaults::

    class ChainStep(Frozen):
        backend: str
        mode: str | None = None

It is then immutable (``AttributeError`` naming the class), slotted (no ``__dict__``), equal only
to a value of exactly its own type with equal fields (never to a tuple, unlike a ``NamedTuple``:
``ChainStep("qmd") != ("qmd", None)``), hashed by its fields (a ``TypeError`` while one is unhashable,
as a frozen dataclass), shown as ``Name(field=value, ...)``, picklable and copyable, and has
:meth:`Frozen.replace`. It does not unpack or index as a tuple: read fields by name. Fields that
hold several things hold tuples (or read-only mappings), so a value is immutable all the way
down where it can be.

* Checks: a class that checks its values defines ``__post_init__(self)`` (it raises); it runs
  after every construction, so :meth:`~Frozen.replace`, pickling and copying check again.
* A class that needs its own constructor (extra keyword fields, conversions, the classes built
  per hit: ``Result``, ``BackendResponse``) writes ``__init__`` and sets its slots with
  :meth:`Frozen._init` or ``object.__setattr__``. Slots outside the value (a cache) are listed
  in the class's own ``__slots__``; they are not fields (not compared, hashed, shown or copied).
* Written out instead: the three values the thin client builds or reads on every warm query
  (``client.invocation.QueryArgs``, ``config.paths.Resolved``, ``contract.ErrorCode``) are plain
  slotted classes with the same behaviour, so that a warm query imports neither this module nor
  the ``core`` package (1.9M instructions, ~4% of its process; docs/benchmarks.md).
* Not values: mutable state (a cache, a connection, a session) is a plain class with
  ``__slots__``; input from users (router-config.json, adapter ``Settings``) is validated by
  pydantic, because its errors name the field and the fix: the config's models, and an adapter's
  ``Settings`` (a ``Frozen`` value itself) through a dataclass made from its fields only to
  validate (memory_router/backends/common/settings.py).

**Why not ``@dataclass`` or ``NamedTuple``.** Cold start: a cold ``memory-router query`` defines
every class it uses, and defining a ``@dataclass`` costs ~0.5-1 ms (it generates its methods'
source and ``exec()``s it; docs/benchmarks.md, *Cold start*). A ``NamedTuple`` is cheaper to
define but is a tuple: it equals any tuple with the same items and unpacks by position, which
lets a renamed or reordered field go unnoticed. ``Frozen`` reads the annotations once per class,
in :class:`_FrozenMeta`, and shares one set of ordinary methods defined here: no code
generation, no ``dataclasses`` import, standard library only. ``typing.dataclass_transform``
tells type checkers what the constructor takes.
"""

from __future__ import annotations

import sys
from itertools import repeat

# Not typing's: the thin client defines a Frozen value on every query, and importing typing (or
# collections) would cost it milliseconds. Everything typing names here is for type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import MappingProxyType
    from typing import Any, ClassVar, TypeVar

    from typing_extensions import dataclass_transform

    _F = TypeVar("_F", bound="Frozen")
else:  # typing_extensions is a type checker's business; importing it would cost a cold query

    def dataclass_transform(**_: object) -> object:
        return lambda cls: cls

    # types.MappingProxyType is this very type: importing `types` (a module of Python code) cost
    # the thin client 1M instructions, 3% of the interpreter's own start.
    MappingProxyType = type(type.__dict__)


_setattr = object.__setattr__  # past Frozen.__setattr__, which refuses
# Runs an iterator of Nones to its end, in C: any() stops only at a true item, and setattr
# returns None.
_consume = any

# Defaults a class body may not share between instances (as a dataclass refuses them).
_MUTABLE_DEFAULTS = (list, dict, set, bytearray)


def _is_classvar(annotation: object) -> bool:
    """Whether an annotation (a string under ``from __future__ import annotations``) is ClassVar."""
    if not isinstance(annotation, str):  # evaluated (3.14 without the __future__ import)
        typing = sys.modules.get("typing")  # a ClassVar was made by typing, so it is loaded then
        return typing is not None and typing.ClassVar in (annotation, typing.get_origin(annotation))
    text = annotation.removeprefix("typing.").removeprefix("t.")
    return text == "ClassVar" or text.startswith("ClassVar[")


def _own_annotations(namespace: dict[str, Any]) -> dict[str, Any]:
    """The class body's annotations, in order."""
    if "__annotations__" in namespace:
        return dict(namespace["__annotations__"])
    # Python >= 3.14 without the __future__ import: a function that makes them.
    annotate = namespace.get("__annotate__") or namespace.get("__annotate_func__")
    if annotate is None:
        return {}
    import annotationlib  # type: ignore[import-not-found,unused-ignore]

    return dict(annotationlib.call_annotate_function(annotate, annotationlib.Format.FORWARDREF))


@dataclass_transform(eq_default=True, frozen_default=True)
class _FrozenMeta(type):
    """Makes a :class:`Frozen` subclass's fields from its annotations: ``_FIELDS`` (the base
    classes' fields, then its own, in order), ``_DEFAULTS``, ``__slots__`` and
    ``__match_args__``. Runs once per class definition; no code is generated."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> _FrozenMeta:
        if any(made in namespace for made in ("_FIELDS", "_DEFAULTS", "_TAILS", "_AFTER", "_CHECKED")):
            raise TypeError(f"{name}: declare a Frozen value's fields as class annotations, not _FIELDS")
        inherited: tuple[str, ...] = ()
        defaults: dict[str, Any] = {}
        for base in reversed(bases):
            inherited += tuple(f for f in getattr(base, "_FIELDS", ()) if f not in inherited)
            defaults.update(getattr(base, "_DEFAULTS", {}))
        extra_slots = namespace.get("__slots__", ())
        extra_slots = (extra_slots,) if isinstance(extra_slots, str) else tuple(extra_slots)
        own = tuple(
            field
            for field, annotation in _own_annotations(namespace).items()
            if field not in extra_slots and field not in inherited and not _is_classvar(annotation)
        )
        defaults.update(_take_defaults(name, own, namespace))
        fields = inherited + own
        if "__init__" not in namespace:  # the generic constructor takes them in this order
            _check_order(name, fields, defaults)
        namespace["__slots__"] = own + tuple(s for s in extra_slots if s not in own)
        namespace["_FIELDS"] = fields
        namespace["_DEFAULTS"] = MappingProxyType(defaults)
        namespace["__match_args__"] = fields
        # The generic __init__'s fast paths, per count of positional arguments (see Frozen).
        namespace["_TAILS"] = tuple(
            tuple(defaults[f] for f in fields[n:]) if all(f in defaults for f in fields[n:]) else None
            for n in range(len(fields) + 1)
        )
        namespace["_AFTER"] = tuple(frozenset(fields[n:]) for n in range(len(fields) + 1))
        # Frozen's own __post_init__ checks nothing: only a subclass's is worth a call.
        namespace["_CHECKED"] = any(getattr(b, "_CHECKED", False) for b in bases) or (
            "__post_init__" in namespace and any(isinstance(b, _FrozenMeta) for b in bases)
        )
        return super().__new__(mcs, name, bases, namespace, **kwargs)


def _take_defaults(name: str, fields: tuple[str, ...], namespace: dict[str, Any]) -> dict[str, Any]:
    """The class body's defaults of ``fields``, taken out of it (a class attribute would clash
    with the slot of the same name)."""
    defaults = {}
    for field in fields:
        if field in namespace:
            default = namespace.pop(field)
            if isinstance(default, _MUTABLE_DEFAULTS):
                raise TypeError(
                    f"{name}.{field}: a mutable default ({type(default).__name__}) would be shared by "
                    "every instance; use a tuple, a frozenset or a MappingProxyType"
                )
            defaults[field] = default
    return defaults


def _check_order(name: str, fields: tuple[str, ...], defaults: dict[str, Any]) -> None:
    """No field without a default after one with a default (as in a function's signature)."""
    with_default = [field for field in fields if field in defaults]
    for field in fields[fields.index(with_default[0]) :] if with_default else ():
        if field not in defaults:
            raise TypeError(f"{name}: field {field!r} without a default follows one with a default")


class Frozen(metaclass=_FrozenMeta):
    """An immutable slotted value whose fields are its class annotations; see the module docstring.

    The value is :meth:`_field_dict`: by default the ``_FIELDS`` in order, which a subclass with
    more to its value (``Result``'s extra keys) extends; it must hold every ``_FIELDS`` entry, so
    that equal values hash alike."""

    __slots__ = ()
    _FIELDS: ClassVar[tuple[str, ...]]
    """The value fields, in the order ``__init__`` takes them (positionally or by keyword)."""
    _DEFAULTS: ClassVar[MappingProxyType[str, Any]]
    """The fields with a default, and the default."""
    _TAILS: ClassVar[tuple[tuple[Any, ...] | None, ...]]
    """Per count of positional arguments, the defaults of the fields after them (None where one
    has no default)."""
    _AFTER: ClassVar[tuple[frozenset[str], ...]]
    """Per count of positional arguments, the fields a keyword may still name."""
    _CHECKED: ClassVar[bool]
    """Whether the class or a base defines :meth:`__post_init__`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # One generic constructor for every class: the fields by position, then by keyword, then
        # the defaults; the errors read like those of a written-out signature. The slots are set
        # by map() inside any(), in C: a Python loop here would cost every query's
        # requests, calls and attempts ~1 us each (bench/overhead.py).
        fields = self._FIELDS
        if kwargs or len(args) != len(fields):
            args = self._bind(args, kwargs)
        _consume(map(_setattr, repeat(self, len(fields)), fields, args))
        if self._CHECKED:
            self.__post_init__()

    @classmethod
    def _bind(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """Every field's value, in order, from the constructor's arguments and the defaults."""
        fields, given = cls._FIELDS, len(args)
        if given <= len(fields):
            if not kwargs:
                tail = cls._TAILS[given]  # the common short call: the rest are defaults
                if tail is not None:
                    return args + tail
            elif kwargs.keys() <= cls._AFTER[given]:  # no unknown name, none given twice
                values = cls._DEFAULTS | kwargs
                try:
                    return args + tuple(map(values.__getitem__, fields[given:]))
                except KeyError:
                    pass  # a field without a value: named below
        raise cls._refusal(args, kwargs)

    @classmethod
    def _refusal(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> TypeError:
        """What a written-out signature would say about arguments :meth:`_bind` cannot use."""
        fields, name = cls._FIELDS, cls.__name__
        if len(args) > len(fields):
            return TypeError(f"{name}() takes {len(fields)} positional arguments but {len(args)} were given")
        for field in kwargs:
            if field in fields[: len(args)]:
                return TypeError(f"{name}() got multiple values for argument {field!r}")
            if field not in fields:
                return TypeError(f"{name}() got an unexpected keyword argument {field!r}")
        missing = [f for f in fields[len(args) :] if f not in kwargs and f not in cls._DEFAULTS]
        return TypeError(f"{name}() missing required argument(s): {', '.join(map(repr, missing))}")

    def __post_init__(self) -> None:
        """Check the fields (raise if they are wrong); a subclass that defines it has it run
        after the generic ``__init__``, so on every construction, copy and :meth:`replace`."""

    def _init(self, *values: Any, **others: Any) -> None:
        """Set the slots from a hand-written ``__init__``, past the refusing :meth:`__setattr__`:
        ``values`` are the ``_FIELDS`` in order (all of them), ``others`` any slots outside the
        value (a cache). The classes built per hit or per call (``Result``, ``BackendResponse``)
        set their slots with ``object.__setattr__`` directly instead: this loop costs ~0.6 us
        more per object, which the daemon would pay for every hit of every query."""
        setter = object.__setattr__
        for name, value in zip(self._FIELDS, values, strict=True):
            setter(self, name, value)
        for name, value in others.items():
            setter(self, name, value)

    def _fields(self) -> tuple[Any, ...]:
        """The ``_FIELDS`` values, in order (the hash)."""
        return tuple(getattr(self, name) for name in self._FIELDS)

    def _field_dict(self) -> dict[str, Any]:
        """The keyword arguments that rebuild this value through ``__init__``: eq, repr,
        pickling and :meth:`replace` all read it."""
        return {name: getattr(self, name) for name in self._FIELDS}

    def replace(self: _F, **changes: Any) -> _F:
        """A copy with ``changes`` applied, built by ``__init__`` again (so checked again);
        an unknown name is the ``TypeError`` that ``__init__`` raises for it."""
        return type(self)(**(self._field_dict() | changes))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (cannot set {name!r}); use replace()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (cannot delete {name!r})")

    def __eq__(self, other: object) -> bool:
        # Exactly the same type, as a dataclass: a value never equals a tuple, a subclass or
        # another class with the same fields.
        if type(other) is not type(self):
            return NotImplemented
        return self._field_dict() == other._field_dict()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self._field_dict().items())
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        # The custom __setattr__ defeats pickle's default (it sets slots with setattr), and
        # rebuilding through __init__ checks the values again.
        return (_rebuild, (type(self), self._field_dict()))


def _rebuild(cls: type[_F], values: dict[str, Any]) -> _F:
    """Unpickle (and copy) a :class:`Frozen` value: ``cls(**values)``."""
    return cls(**values)
