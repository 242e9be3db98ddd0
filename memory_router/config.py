"""router-config.json: parsed once, validated into immutable objects, with precise errors.

Two layers, as in pypa/packaging: pydantic ``*Spec`` models check the JSON's shape (unknown keys
are errors, so a typo never silently disables a setting), then :func:`load_config` compiles the
spec into a frozen :class:`RouterConfig` whose rule table holds compiled regexes and whose backend
settings have been validated by each adapter's own ``Settings`` model. Every failure is an
:class:`~memory_router.errors.InvalidConfig` naming the file, the field path (``rules[2]
(relationship).strong[3]``) and the bad value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InvalidConfig
from .paths import packaged_config
from .rules import Rule, RuleTable, Step, compile_rule


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StepSpec(_Strict):
    backend: str
    mode: str | None = None


class RuleSpec(_Strict):
    number: int = Field(ge=1)
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = ""
    strong: tuple[str, ...] = ()
    weak: tuple[str, ...] = ()
    chain: tuple[StepSpec, ...] = Field(min_length=1)


class CooldownSpec(_Strict):
    """Dead-backend cooldown (used by the daemon): ``"cooldown": null`` or ``enabled: false`` turns it off."""

    enabled: bool = True
    failures: int = Field(default=3, ge=1, le=1000)
    seconds: float = Field(default=30.0, gt=0, le=86_400)


class ConfigSpec(_Strict):
    version: Literal[1] = 1
    threshold: float = Field(default=0.4, ge=0.0, le=1.0)
    timeout_ms: int = Field(default=5000, gt=0, le=600_000)
    result_limit: int = Field(default=10, ge=1, le=1000)
    max_query_chars: int = Field(default=4096, ge=1, le=1_000_000)
    regex_timeout_ms: int = Field(default=50, gt=0, le=10_000)
    deadline_ms: int | None = Field(default=None, gt=0, le=3_600_000)
    cooldown: CooldownSpec | None = CooldownSpec()
    file_extensions: tuple[str, ...] = ()
    rules: tuple[RuleSpec, ...] = Field(min_length=1)
    backends: dict[str, dict[str, Any]] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class BackendConfig:
    name: str
    type: str
    settings: Any  # the adapter module's frozen Settings instance


@dataclass(frozen=True, slots=True)
class CooldownConfig:
    failures: int
    seconds: float


@dataclass(frozen=True, slots=True)
class RouterConfig:
    """Everything router-config.json says, validated and compiled. Immutable."""

    path: Path
    threshold: float
    timeout_ms: int
    result_limit: int
    max_query_chars: int
    regex_timeout_ms: int
    rules: RuleTable
    backends: Mapping[str, BackendConfig]
    deadline_ms: int | None = None  # overall per-query budget; None: only the per-backend timeout
    cooldown: CooldownConfig | None = None  # None: switched off

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000


def _loc(loc: tuple[Any, ...], data: Any) -> str:
    """('rules', 1, 'chain', 0, 'backend') -> 'rules[1] (relationship).chain[0].backend'."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            if isinstance(node, list) and 0 <= part < len(node):
                node = node[part]
                if isinstance(node, dict) and isinstance(node.get("id"), str) and "chain" in node:
                    out += f" ({node['id']})"
            else:
                node = None
        else:
            out += f".{part}" if out else str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return out


def _first_error(path: Path, exc: ValidationError, data: Any, prefix: str = "") -> InvalidConfig:
    err = exc.errors(include_url=False)[0]
    where = _loc(tuple(err["loc"]), data)
    where = f"{prefix}.{where}" if prefix and where else (prefix or where)
    problem = err["msg"]
    if err["type"] == "extra_forbidden":
        problem = "unknown key (misspelt, or not supported by this version)"
    elif "input" in err and err["type"] != "missing":
        problem += f" (got {orjson.dumps(err['input'], default=str).decode()[:120]})"
    more = len(exc.errors()) - 1
    hint = f"({more} more problem{'s' if more > 1 else ''} after this one.)" if more > 0 else ""
    return InvalidConfig(path, where, problem, hint)


# router-config.json and backends.json are a few kB; anything near this is not one of them.
MAX_CONFIG_BYTES = 1 << 20


def read_json(path: Path, error: type[Exception] = InvalidConfig, limit: int = MAX_CONFIG_BYTES) -> Any:
    """Read and parse a JSON file, turning I/O and syntax errors into ``error(path, "", msg)``.

    Only a regular file of at most ``limit`` bytes is read (see :func:`read_regular_file`): a
    FIFO or ``/dev/zero`` at a config path is a clear error, not a hang or an unbounded read."""
    from memory_router.backends._files import FileRefused, read_regular_file

    try:
        raw = read_regular_file(path, limit)
    except FileNotFoundError:
        raise error(path, "", "file not found") from None
    except FileRefused as exc:
        raise error(path, "", f"cannot read: it is {exc}; point to the JSON file itself") from exc
    except OSError as exc:
        raise error(path, "", f"cannot read: {exc.strerror or exc}") from exc
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise error(path, "", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def load_config(path: Path | None = None) -> RouterConfig:
    """Load, validate and compile a router-config.json (``None``: the packaged default)."""
    path = path or packaged_config()
    data = read_json(path)
    return parse_config(data, path)


def parse_config(data: Any, path: Path) -> RouterConfig:  # noqa: C901 - one check per cross-reference, each with its own error
    if not isinstance(data, dict):
        raise InvalidConfig(path, "", f"the top level must be a JSON object, got {type(data).__name__}")
    try:
        spec = ConfigSpec.model_validate(data)
    except ValidationError as exc:
        raise _first_error(path, exc, data) from None

    from memory_router.backends import ADAPTER_MODULES, adapter_module

    backends: dict[str, BackendConfig] = {}
    for name, raw in spec.backends.items():
        where = f"backends.{name}"
        type_name = raw.get("type")
        if type_name not in ADAPTER_MODULES:
            known = ", ".join(sorted(ADAPTER_MODULES))
            raise InvalidConfig(path, f"{where}.type", f"unknown backend type {type_name!r}", f"Use one of: {known}.")
        module = adapter_module(type_name)
        settings_data = {k: v for k, v in raw.items() if k != "type"}
        try:
            settings = module.Settings.model_validate(settings_data)
        except ValidationError as exc:
            raise _first_error(path, exc, settings_data, prefix=where) from None
        backends[name] = BackendConfig(name, type_name, settings)

    rules: list[Rule] = []
    numbers: set[int] = set()
    for index, rule in enumerate(spec.rules):
        label = f"rules[{index}] ({rule.id})"
        if rule.number in numbers:
            raise InvalidConfig(path, f"{label}.number", f"rule number {rule.number} is used twice")
        numbers.add(rule.number)
        for step_index, step in enumerate(rule.chain):
            field_path = f"{label}.chain[{step_index}]"
            backend = backends.get(step.backend)
            if backend is None:
                raise InvalidConfig(
                    path,
                    f"{field_path}.backend",
                    f"names unknown backend {step.backend!r}",
                    f'Define it under "backends" (defined: {", ".join(sorted(backends))}).',
                )
            # A backend's own settings may list its modes (command backends); else the adapter's.
            modes = getattr(backend.settings, "modes", None) or adapter_module(backend.type).MODES
            if step.mode is not None and modes is not None and step.mode not in modes:
                raise InvalidConfig(
                    path,
                    f"{field_path}.mode",
                    f"{backend.type} has no mode {step.mode!r}",
                    f"Use one of: {', '.join(sorted(modes))}.",
                )
        chain = tuple(Step(s.backend, s.mode) for s in rule.chain)
        rules.append(
            compile_rule(
                number=rule.number,
                id=rule.id,
                description=rule.description,
                strong=rule.strong,
                weak=rule.weak,
                chain=chain,
                file_extensions=spec.file_extensions,
                path=path,
                label=label,
            )
        )
    default = rules[-1]
    if default.strong_sources or default.weak_sources:
        raise InvalidConfig(
            path,
            f"rules[{len(rules) - 1}] ({default.id})",
            "the last rule is the default and must have no signals",
            "Remove its strong/weak lists.",
        )
    return RouterConfig(
        path=path,
        threshold=spec.threshold,
        timeout_ms=spec.timeout_ms,
        result_limit=spec.result_limit,
        max_query_chars=spec.max_query_chars,
        regex_timeout_ms=spec.regex_timeout_ms,
        rules=RuleTable(tuple(rules), regex_timeout_s=spec.regex_timeout_ms / 1000),
        backends=MappingProxyType(backends),
        deadline_ms=spec.deadline_ms,
        cooldown=CooldownConfig(spec.cooldown.failures, spec.cooldown.seconds)
        if spec.cooldown is not None and spec.cooldown.enabled
        else None,
    )
