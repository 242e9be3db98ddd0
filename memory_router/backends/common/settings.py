"""Adapter ``Settings`` as plain frozen dataclasses: pydantic validates them, it is not needed to build them.

An adapter's ``Settings`` (its keys under ``backends.<name>`` in router-config.json) is a
``@dataclass(frozen=True, slots=True)`` with ``__pydantic_config__ = {"extra": "forbid", "strict":
True}``. Its constraints are ``Annotated`` markers that pydantic reads when it validates and that
cost nothing to declare: importing an adapter module imports no pydantic.

* :class:`Limits` (``Annotated[int, Limits(ge=0, le=600_000)]``, ``Limits(min_length=1)``): bounds;
* :class:`Check` (``Annotated[str | None, Check(func)]``): a field check; ``func`` returns the value
  or raises ``ValueError`` with a message for the user;
* :class:`Secret`: a string that is never shown (``repr``/``str`` print ``'**********'``).

Config loading validates a backend's raw JSON with pydantic (:func:`validate`: strict JSON mode,
unknown keys refused), then builds the instance with :func:`settings_from_json`. A query answered
from the compiled config cache builds it with :func:`settings_from_json` alone, from bytes that
already passed :func:`validate` when the cache was written: no pydantic on that path.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["Check", "Limits", "Secret", "settings_from_json", "validate"]

T = TypeVar("T")


class Limits:
    """``Annotated`` marker: pydantic constraints (``ge``, ``gt``, ``le``, ``lt``, ``min_length``,
    ``max_length``, ``pattern``) on the field's own schema."""

    __slots__ = ("constraints",)

    def __init__(self, **constraints: Any) -> None:
        self.constraints = constraints

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        schema = handler(source)
        schema.update(self.constraints)
        return schema

    def __repr__(self) -> str:
        return f"Limits({', '.join(f'{k}={v!r}' for k, v in self.constraints.items())})"


class Check:
    """``Annotated`` marker: ``func(value)`` runs after the field's type and :class:`Limits` passed;
    it returns the value or raises ``ValueError`` whose message is shown to the user."""

    __slots__ = ("func",)

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func = func

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(self.func, handler(source))

    def __repr__(self) -> str:
        return f"Check({getattr(self.func, '__name__', self.func)!r})"


class Secret:
    """A secret string (an API key, a password): ``repr``, ``str`` and f-strings show
    ``'**********'``; :meth:`get_secret_value` is the only way to the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Secret('**********')"

    def __str__(self) -> str:
        return "**********"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(cls, core_schema.str_schema(strict=True))


# ---------------------------------------------------------------------------- building


_Convert = Callable[[Any], Any]
_MISSING: Any = dataclasses.MISSING
_plans: dict[type, tuple[frozenset[str], tuple[tuple[str, _Convert | None, Any, Any], ...]]] = {}


def settings_from_json(cls: type[T], raw: Mapping[str, Any]) -> T:
    """An instance of the ``Settings`` dataclass ``cls`` from JSON values, the one way both config
    paths build it: each field is ``raw``'s value (or the default) converted by the field's type
    hint (a JSON list becomes a tuple for ``tuple[...]``, an int a float for ``float``, a string a
    :class:`Secret`; unions and ``None`` are followed), anything else as is. It does not validate:
    ``raw`` has passed :func:`validate` (now, or when the config cache was written). An unknown
    key or a missing required field is still a ``TypeError``."""
    names, plan = _plans.get(cls) or _plan(cls)
    unknown = raw.keys() - names
    if unknown:
        raise TypeError(f"{cls.__qualname__} has no field {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {}
    for name, convert, default, factory in plan:
        if name in raw:
            value = raw[name]
            values[name] = value if convert is None or value is None else convert(value)
        elif default is not _MISSING:
            values[name] = default
        elif factory is not _MISSING:
            values[name] = factory()
    return cls(**values)


def _plan(cls: type) -> tuple[frozenset[str], tuple[tuple[str, _Convert | None, Any, Any], ...]]:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a Settings dataclass (see memory_router/backends/common/settings.py)")
    hints = typing.get_type_hints(cls)  # Annotated[...] stripped to the type itself
    fields = [f for f in dataclasses.fields(cls) if f.init]
    plan = tuple((f.name, _converter(hints[f.name]), f.default, f.default_factory) for f in fields)
    _plans[cls] = entry = (frozenset(f.name for f in fields), plan)
    return entry


def _converter(hint: Any) -> _Convert | None:  # noqa: C901 - one case per kind of type hint
    """How a JSON value becomes a value of ``hint``; ``None``: it already is one."""
    if hint is float:
        return _to_float
    if hint is Secret:
        return Secret
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a nested settings block (qmd's refresh)
        return lambda v: v if isinstance(v, hint) else settings_from_json(hint, v)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _converter(args[0])
            return tuple if item is None else (lambda v: tuple(_maybe(item, x) for x in v))
        items = [_converter(a) for a in args]
        return lambda v: tuple(_maybe(c, x) for c, x in zip(items, v, strict=True))
    if origin is list:
        item = _converter(args[0]) if args else None
        return None if item is None else (lambda v: [_maybe(item, x) for x in v])
    if origin is dict:
        value_of = _converter(args[1]) if len(args) == 2 else None
        return None if value_of is None else (lambda v: {k: _maybe(value_of, x) for k, x in v.items()})
    if origin is typing.Union or origin is types.UnionType:
        members = [(m, _converter(m)) for m in args if m is not type(None)]
        if all(c is None for _m, c in members):
            return None
        return lambda v: _union(members, v)
    return None


def _maybe(convert: _Convert | None, value: Any) -> Any:
    return value if convert is None or value is None else convert(value)


def _to_float(value: Any) -> Any:
    return float(value) if type(value) is int else value


def _union(members: list[tuple[Any, _Convert | None]], value: Any) -> Any:
    """The union member this JSON value validated as: an exact type first (``int`` for ``int |
    float``, ``str`` for ``str | tuple``), then the one it converts to."""
    for member, _convert in members:
        if type(value) is member:
            return value
    for member, convert in members:
        if _fits(member, value):
            return _maybe(convert, value)
    return value


def _fits(hint: Any, value: Any) -> bool:
    if hint is float:
        return type(value) in (int, float)
    if hint is Secret:
        return isinstance(value, str)
    origin = typing.get_origin(hint)
    if origin in (tuple, list):
        return isinstance(value, list | tuple)
    if origin is dict:
        return isinstance(value, dict)
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    return isinstance(hint, type) and isinstance(value, hint)


# ---------------------------------------------------------------------------- validating


_adapters: dict[type, Any] = {}


def validate(cls: type[T], raw: Mapping[str, Any]) -> T:
    """Validate ``raw`` (JSON values) against the ``Settings`` dataclass ``cls`` with pydantic in
    strict JSON mode (wrong JSON types and unknown keys are errors), then build it with
    :func:`settings_from_json`. Raises ``pydantic.ValidationError``. Imports pydantic."""
    import orjson

    adapter = _adapters.get(cls)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _adapters[cls] = TypeAdapter(cls)
    adapter.validate_json(orjson.dumps(dict(raw)))
    return settings_from_json(cls, raw)
