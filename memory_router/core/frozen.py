"""``Frozen``: the one base of the immutable value classes a cold query defines.

``Result``, ``BackendResponse``, ``BackendContext`` (``backends/base.py``), ``Envelope`` and
``Rule`` are frozen values, but not ``@dataclass(frozen=True)``: defining a dataclass costs a
cold query ~0.5-1 ms, because it generates its methods' source and ``exec()``s it. This class
gives them what the dataclass did, from one class attribute, with ordinary methods that are
defined once, here: no code generation, no ``dataclasses`` import. Standard library only.

A subclass declares ``__slots__`` (its fields and any private cache) and ``_FIELDS`` (its value
fields in the constructor's order), and sets them in ``__init__`` with :meth:`Frozen._init` (or
with ``object.__setattr__`` where building one is on the hot path, see there). It
then is immutable (``AttributeError`` naming the class), equal to an instance of its own type
with equal fields, hashed by its fields (a ``TypeError`` while one is unhashable, as a frozen
dataclass), shown as ``Name(field=value, ...)``, picklable and copyable, and has
:meth:`Frozen.replace`. Pickling, copying and ``replace`` rebuild through the class's own
``__init__``, so its checks run on every copy.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

_F = TypeVar("_F", bound="Frozen")


class Frozen:
    """An immutable slotted value: equality, hash, repr, pickling and ``replace`` from ``_FIELDS``.

    Subclasses keep ``__slots__`` (so instances have no ``__dict__``). The value is
    :meth:`_field_dict`: by default the ``_FIELDS`` in order, which a subclass with more to its
    value (``Result``'s extra keys) extends; it must hold every ``_FIELDS`` entry, so that equal
    values hash alike. Slots outside ``_FIELDS`` (a cache) are not part of the value."""

    __slots__ = ()
    _FIELDS: ClassVar[tuple[str, ...]]
    """The value fields, in the order ``__init__`` takes them (positionally or by keyword)."""

    def _init(self, *values: Any, **others: Any) -> None:
        """Set the slots from ``__init__``, past the refusing :meth:`__setattr__`: ``values`` are
        the ``_FIELDS`` in order (all of them), ``others`` any slots outside the value (a cache).
        The classes built per hit or per call (``Result``, ``BackendResponse``, ``Envelope``) set
        their slots with ``object.__setattr__`` directly instead: this loop costs ~0.6 us more
        per object, which the daemon would pay for every hit of every query."""
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
        # isinstance rather than a dataclass's exact-type check: what these classes always did.
        if not isinstance(other, type(self)):
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
