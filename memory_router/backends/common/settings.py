"""Adapter ``Settings``: immutable values that pydantic validates but is not needed to build.

An adapter's ``Settings`` (its keys under ``backends.<name>`` in router-config.json) subclasses
:class:`AdapterSettings`, a :class:`~memory_router.core.frozen.Frozen` value declared by its
annotations and defaults, as every other value of the project::

    class Settings(AdapterSettings):
        root: str | None = None
        max_file_bytes: Annotated[int, Limits(ge=1)] = 1 << 20

It is immutable (``replace()`` for a changed copy), equal and hashed by its fields (a mapping
field, stored read-only, by its items), and its constraints are ``Annotated`` markers that pydantic
reads when it validates and that cost nothing to declare (the module's annotations are strings, read
only when needed, so an adapter module may import ``Annotated`` and ``Literal`` for type checkers
only: defining the class imports neither ``typing`` nor ``dataclasses`` nor pydantic):

* :class:`Limits` (``Annotated[int, Limits(ge=0, le=600_000)]``, ``Limits(min_length=1)``): bounds;
* :class:`Check` (``Annotated[str | None, Check(func)]``): a field check; ``func`` returns the value
  or raises ``ValueError`` with a message for the user;
* :class:`Secret`: a string that is never shown (``repr``/``str`` print ``'**********'``).

Config loading validates a backend's raw JSON with pydantic (:func:`validate`: strict JSON mode,
unknown keys refused, against a dataclass made from the class's fields once per class), then
builds the value with :func:`settings_from_json`. A query answered from the compiled config cache
builds it with :func:`settings_from_json` alone, from bytes that already passed :func:`validate`
when the cache was written: no pydantic, no ``typing`` on that path.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable, Mapping

from memory_router.core.frozen import Frozen

TYPE_CHECKING = False  # not typing's: a cold query builds its settings without importing typing
if TYPE_CHECKING:
    from typing import Any, ClassVar, TypeVar

    T = TypeVar("T", bound="AdapterSettings")

__all__ = ["EMPTY_MAPPING", "AdapterSettings", "Check", "Limits", "Secret", "settings_from_json", "validate"]

_MappingProxy = type(type.__dict__)  # types.MappingProxyType, without importing types
EMPTY_MAPPING: Mapping[str, Any] = _MappingProxy({})
"""The default of a mapping field (a ``Settings`` value holds read-only mappings)."""
_UnionType: Any = type(int | None)  # types.UnionType


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


class AdapterSettings(Frozen):
    """The base of every adapter's ``Settings``: a :class:`~memory_router.core.frozen.Frozen` value
    (immutable, slotted, equal by its fields, ``replace()``) whose fields are its keys in
    router-config.json. A mapping field (an agent's collections, a program's environment) holds a
    read-only mapping, and the value is hashed with each mapping's items, so every ``Settings`` is
    hashable (the daemon keeps a warm backend across a reload when its settings are equal)."""

    __slots__ = ()
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid", "strict": True}
    """How :func:`validate` reads the JSON: unknown keys and wrong JSON types are errors."""

    def __post_init__(self) -> None:
        # A mapping given to the constructor (a test's, replace()'s) is stored read-only too.
        for name in self._FIELDS:
            value = getattr(self, name)
            if isinstance(value, dict):
                object.__setattr__(self, name, _MappingProxy(value))

    def _fields(self) -> tuple[Any, ...]:
        return tuple(
            frozenset(value.items()) if isinstance(value, Mapping) else value
            for value in map(self.__getattribute__, self._FIELDS)
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its JSON-like values (a mappingproxy cannot be pickled), built again as the
        # config builds it.
        values = {k: dict(v) if isinstance(v, Mapping) else v for k, v in self._field_dict().items()}
        return (settings_from_json, (type(self), values))


# ---------------------------------------------------------------------------- building

if TYPE_CHECKING:
    _Convert = Callable[[Any], Any]
_plans: dict[type, tuple[frozenset[str], tuple[tuple[str, _Convert | None], ...]]] = {}


def settings_from_json(cls: type[T], raw: Mapping[str, Any]) -> T:
    """An instance of the ``Settings`` class ``cls`` from JSON values, the one way both config
    paths build it: each field is ``raw``'s value (or the default) converted by the field's
    annotation (a JSON list becomes a tuple for ``tuple[...]``, an object a read-only mapping for
    ``Mapping[...]``/``dict[...]``, an int a float for ``float``, a string a :class:`Secret`, an
    object a nested ``Settings``; unions and ``None`` are followed), anything else as is. It does
    not validate: ``raw`` has passed :func:`validate` (now, or when the config cache was written).
    An unknown key or a missing required field is still a ``TypeError``."""
    names, plan = _plans.get(cls) or _plan(cls)
    unknown = raw.keys() - names
    if unknown:
        raise TypeError(f"{cls.__qualname__} has no field {', '.join(sorted(unknown))}")
    values = {name: _maybe(convert, raw[name]) for name, convert in plan if name in raw}
    return cls(**values)


def _plan(cls: type) -> tuple[frozenset[str], tuple[tuple[str, _Convert | None], ...]]:
    if not (isinstance(cls, type) and issubclass(cls, AdapterSettings)):
        raise TypeError(f"{cls!r} is not an AdapterSettings class (see memory_router/backends/common/settings.py)")
    hints = field_hints(cls, _COLD_NAMES)
    plan = tuple((name, _converter(hints[name])) for name in cls._FIELDS)
    _plans[cls] = entry = (frozenset(cls._FIELDS), plan)
    return entry


class _Annotated:
    """``Annotated[T, ...]`` read without ``typing``: ``T`` (the markers are pydantic's business)."""

    def __getitem__(self, params: Any) -> Any:
        return params[0] if isinstance(params, tuple) else params


class _Literal:
    """``Literal[...]`` read without ``typing``: the values (a JSON value is kept as it is)."""

    __slots__ = ("values",)

    def __init__(self, values: tuple[Any, ...] = ()) -> None:
        self.values = values

    def __getitem__(self, values: Any) -> _Literal:
        return _Literal(values if isinstance(values, tuple) else (values,))

    def __or__(self, other: Any) -> _Opaque:  # a value of Literal[...] | None is kept as it is too
        return _Opaque()

    __ror__ = __or__


class _Opaque:
    """Any other name a module imports for type checkers only: a value kept as it is."""

    def __getitem__(self, params: Any) -> _Opaque:
        return self

    def __or__(self, other: Any) -> _Opaque:
        return self

    __ror__ = __or__


class _Names(dict):  # type: ignore[type-arg]
    """The names an annotation is read with: the module's, then ``fallback``'s, then opaque."""

    def __init__(self, module: Mapping[str, Any], fallback: Mapping[str, Any]) -> None:
        super().__init__(module)
        self.fallback = fallback

    def __missing__(self, name: str) -> Any:
        if name in self.fallback:
            return self.fallback[name]
        return getattr(builtins, name) if hasattr(builtins, name) else _Opaque()


# Read with these, an annotation needs no typing: only what building a value converts by matters.
_COLD_NAMES: dict[str, Any] = {"Annotated": _Annotated(), "Literal": _Literal(), "Mapping": Mapping}


def field_hints(cls: type[AdapterSettings], names: Mapping[str, Any], override: bool = True) -> dict[str, Any]:
    """Each field's annotation of ``cls``, evaluated in its defining module's namespace with
    ``names`` first (``override``) or after it (names the module imports for type checkers only)."""
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        annotations = vars(klass).get("__annotations__", {})
        module = vars(sys.modules[klass.__module__])
        namespace = _Names({**module, **names} if override else module, names)
        for name, annotation in annotations.items():
            if name in cls._FIELDS:
                hints[name] = eval(annotation, {}, namespace) if isinstance(annotation, str) else annotation  # noqa: S307 - the class's own annotations
    return hints


def _origin(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """``(origin, args)`` of ``tuple[...]``, ``Mapping[...]``, ``X | Y``: ``typing.get_origin`` and
    ``get_args`` without importing typing (a union's origin is ``types.UnionType``, also for
    ``typing.Optional``, which a module without ``from __future__ import annotations`` may use)."""
    if type(hint) is _UnionType:
        return _UnionType, hint.__args__
    origin = getattr(hint, "__origin__", None)
    if origin is None:
        return None, ()
    typing = sys.modules.get("typing")  # typing.Union exists only where typing was imported
    return (_UnionType if typing is not None and origin is typing.Union else origin), hint.__args__


def _converter(hint: Any) -> _Convert | None:  # noqa: C901 - one case per kind of annotation
    """How a JSON value becomes a value of ``hint``; ``None``: it already is one."""
    if hasattr(hint, "__metadata__"):  # typing.Annotated[T, ...], evaluated where typing was imported: T
        hint = hint.__origin__
    if hint is float:
        return _to_float
    if hint is Secret:
        return _to_secret
    if isinstance(hint, type) and issubclass(hint, AdapterSettings):  # a nested settings block (qmd's refresh)
        return lambda v: v if isinstance(v, hint) else settings_from_json(hint, v)
    origin, args = _origin(hint)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _converter(args[0])
            return tuple if item is None else (lambda v: tuple(_maybe(item, x) for x in v))
        items = [_converter(a) for a in args]
        return lambda v: tuple(_maybe(c, x) for c, x in zip(items, v, strict=True))
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        value_of = _converter(args[1]) if len(args) == 2 else None
        return lambda v: _read_only({k: _maybe(value_of, x) for k, x in v.items()})
    if origin is _UnionType:
        members = [(m, _converter(m)) for m in args if m is not type(None)]
        if all(c is None for _m, c in members):
            return None
        return lambda v: _union(members, v)
    return None


def _maybe(convert: _Convert | None, value: Any) -> Any:
    return value if convert is None or value is None else convert(value)


def _read_only(mapping: dict[str, Any]) -> Mapping[str, Any]:
    return _MappingProxy(mapping)


def _to_secret(value: Any) -> Any:
    return value if isinstance(value, Secret) else Secret(value)


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
    if isinstance(hint, _Literal):
        return value in hint.values
    origin, _args = _origin(hint)
    if origin in (tuple, list):
        return isinstance(value, list | tuple)
    if origin in (dict, Mapping):
        return isinstance(value, Mapping)
    return isinstance(hint, type) and isinstance(value, hint)


# ---------------------------------------------------------------------------- validating


_adapters: dict[type, Any] = {}


def validate(cls: type[T], raw: Mapping[str, Any]) -> T:
    """Validate ``raw`` (JSON values) against the ``Settings`` class ``cls`` with pydantic in
    strict JSON mode (wrong JSON types and unknown keys are errors), then build it with
    :func:`settings_from_json`. Raises ``pydantic.ValidationError``. Imports pydantic."""
    import orjson

    adapter = _adapters.get(cls)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _adapters[cls] = TypeAdapter(validation_dataclass(cls))
    adapter.validate_json(orjson.dumps(dict(raw)))
    return settings_from_json(cls, raw)


_shadows: dict[type, type] = {}


def _copier(mapping: Mapping[str, Any]) -> Callable[[], dict[str, Any]]:
    return lambda: dict(mapping)


def validation_dataclass(cls: type[AdapterSettings]) -> type:
    """What pydantic validates ``cls``'s JSON against: a frozen dataclass with the same name,
    fields, annotations (``typing``'s ``Annotated`` and ``Literal``; a nested ``Settings`` as its
    own validation dataclass), defaults and ``__pydantic_config__``. Made once per class, on the
    validating path only (it imports ``typing`` and ``dataclasses``, as pydantic does)."""
    shadow = _shadows.get(cls)
    if shadow is None:
        import dataclasses
        import typing

        names: dict[str, Any] = {name: getattr(typing, name) for name in typing.__all__}
        hints = field_hints(cls, names, override=False)
        fields: list[Any] = []
        for name in cls._FIELDS:
            hint = hints[name]
            if isinstance(hint, type) and issubclass(hint, AdapterSettings):
                hint = validation_dataclass(hint)
            if name not in cls._DEFAULTS:
                fields.append((name, hint))
                continue
            default = cls._DEFAULTS[name]
            if isinstance(default, AdapterSettings):  # a nested block: its own defaults
                spec = dataclasses.field(default_factory=hint)
            elif type(default).__hash__ is None:  # a read-only mapping: dataclasses refuses it as a default
                spec = dataclasses.field(default_factory=_copier(default))
            else:
                spec = dataclasses.field(default=default)
            fields.append((name, hint, spec))
        shadow = dataclasses.make_dataclass(
            cls.__name__,
            fields,
            namespace={"__pydantic_config__": dict(cls.__pydantic_config__), "__module__": cls.__module__},
            frozen=True,
        )
        shadow.__qualname__ = cls.__qualname__
        _shadows[cls] = shadow
    return shadow
