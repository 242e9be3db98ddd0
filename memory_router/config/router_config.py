"""router-config.json: parsed once, validated into immutable objects, with precise errors.

Two layers, as in pypa/packaging: pydantic ``*Spec`` models (:mod:`.config.schema`, imported only
when a file is validated) check the JSON's shape (unknown keys are errors, so a typo never
silently disables a setting), then :func:`load_config` compiles the
spec into a frozen :class:`RouterConfig` whose rule table holds compiled regexes and whose backend
settings have been validated against each adapter's own ``Settings`` (an immutable value that
pydantic validates through its ``Limits``/``Check`` markers, see
:mod:`memory_router.backends.common.settings`), then built by ``settings_from_json``, the constructor
the compiled config cache uses too. Every failure is an :class:`~memory_router.core.errors.InvalidConfig`
naming the file, the field path (``rules[2] (relationship).strong[3]``) and the bad value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

# Re-exported: the defaults live below both this module and config_schema, which declares its
# fields with them (config imports config_schema to validate; neither imports the other back).
from memory_router.config.defaults import COOLDOWN_DEFAULT as COOLDOWN_DEFAULT
from memory_router.config.defaults import DEFAULTS as DEFAULTS
from memory_router.config.defaults import CooldownConfig as CooldownConfig
from memory_router.config.paths import packaged_config
from memory_router.core.errors import InvalidConfig
from memory_router.core.frozen import Frozen
from memory_router.core.rules import ChainStep, Rule, RuleTable, compile_rule, signal_regex

_UNSET: Any = object()


class BackendConfig:
    """One configured backend: its name, adapter type and the adapter's ``Settings`` instance.

    From :func:`parse_config` the settings are validated up front. Built lazily from ``raw`` (the
    config file's own entry) they are made on first use, so a query imports only the adapters it
    calls: validated by pydantic first (:func:`validate_settings`), or, with ``validated=True``,
    built by ``settings_from_json`` alone: the caller vouches that these raw values already passed
    :func:`validate_settings` (the compiled config cache, whose key covers the config's bytes and
    the adapter modules). Both give the same object.
    """

    __slots__ = ("name", "type", "_settings", "_raw", "_path", "_validated")
    name: str
    type: str
    _settings: Any
    _raw: Mapping[str, Any] | None
    _path: Path | None
    _validated: bool

    def __init__(
        self,
        name: str,
        type: str,
        settings: Any = _UNSET,
        *,
        raw: Mapping[str, Any] | None = None,
        path: Path | None = None,
        validated: bool = False,
    ) -> None:
        if settings is _UNSET and (raw is None or path is None):
            raise TypeError("BackendConfig needs settings, or raw settings and the config path")
        values = (name, type, settings, raw, path, validated)
        for slot, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, slot, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"BackendConfig is immutable (cannot set {name!r})")

    @property
    def settings(self) -> Any:
        """The adapter module's frozen ``Settings`` instance."""
        if self._settings is _UNSET:
            assert self._raw is not None and self._path is not None
            if self._validated:
                from memory_router.backends import adapter_module
                from memory_router.backends.common.settings import settings_from_json

                settings = settings_from_json(adapter_module(self.type).Settings, self._raw)
            else:
                settings = validate_settings(self._path, self.name, self.type, self._raw)
            object.__setattr__(self, "_settings", settings)
        return self._settings

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BackendConfig):
            return NotImplemented
        return (self.name, self.type, self.settings) == (other.name, other.type, other.settings)

    def __hash__(self) -> int:
        return hash((self.name, self.type, self.settings))

    def __repr__(self) -> str:
        shown = "<not built yet>" if self._settings is _UNSET else repr(self._settings)
        return f"BackendConfig(name={self.name!r}, type={self.type!r}, settings={shown})"


class RouterConfig(Frozen):
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
    table: str = DEFAULTS["table"]  # "spec": the spec's chains exactly, without the rules' "extend" steps
    strategy: str = DEFAULTS["strategy"]  # the global strategy; "fuse": every step at once, merged
    rule_strategies: Mapping[str, str] = MappingProxyType({})  # rule id -> its own strategy
    calibration: str = DEFAULTS["calibration"]  # "packaged", "off" or a file: see calibration.py

    @property
    def backend_types(self) -> Mapping[str, str]:
        """Backend name -> adapter type (the calibration is keyed by type)."""
        return {name: backend.type for name, backend in self.backends.items()}

    def strategy_for(self, rule_id: str) -> str:
        """The rule's strategy. ``"fill"`` asks steps the spec's walk would not have asked, so it is
        an extension like ``extend``: with ``"table": "spec"`` it is the spec's ``sequential``."""
        strategy = self.rule_strategies.get(rule_id, self.strategy)
        return "sequential" if strategy == "fill" and self.table == "spec" else strategy

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000


# router-config.json and backends.json are a few kB; anything near this is not one of them.
MAX_CONFIG_BYTES = 1 << 20


def read_json(path: Path, error: type[Exception] = InvalidConfig) -> Any:
    """Read and parse a JSON file, turning I/O and syntax errors into ``error(path, "", msg)``."""
    return parse_json(read_bytes(path, error), path, error)


def read_bytes(path: Path, error: type[Exception] = InvalidConfig, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """A config file's bytes, turning I/O errors into ``error(path, "", msg)``.

    Only a regular file of at most ``limit`` bytes is read (see :func:`read_regular_file`): a
    FIFO or ``/dev/zero`` at a config path is a clear error, not a hang or an unbounded read."""
    from memory_router.backends.common.files import FileRefused, read_regular_file

    try:
        return read_regular_file(path, limit)
    except FileNotFoundError:
        raise error(path, "", "file not found") from None
    except FileRefused as exc:
        raise error(path, "", f"cannot read: it is {exc}; point to the JSON file itself") from exc
    except OSError as exc:
        raise error(path, "", f"cannot read: {exc.strerror or exc}") from exc


def parse_json(raw: bytes, path: Path, error: type[Exception] = InvalidConfig) -> Any:
    """Parse a config file's bytes as orjson does, turning syntax errors into ``error(path, "",
    msg)``; without importing orjson where the file is read alike by json's C half (a cold query:
    :func:`memory_router.output.jsonout.loads_as_orjson`)."""
    from memory_router.output.jsonout import loads_as_orjson

    try:
        return loads_as_orjson(raw)
    except ValueError as exc:  # orjson.JSONDecodeError: orjson read the file, for its own error
        import orjson

        if not isinstance(exc, orjson.JSONDecodeError):
            raise
        raise error(path, "", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


class Vouching(Protocol):
    """What :func:`load_config` asks of a cache (:class:`memory_router.config.cache.ConfigCache`)."""

    def vouches_for(self, raw: bytes) -> bool:
        """Whether these exact bytes passed :func:`validate_config` in this code before."""
        ...

    def record(self, raw: bytes) -> None:
        """These bytes passed :func:`validate_config` and compile as they are."""
        ...


def load_config(path: Path | None = None, cache: Vouching | None = None) -> RouterConfig:
    """A router-config.json (``None``: the packaged default), in one pass: read, validate,
    compile. A ``cache`` that vouches for the file's bytes skips the validation (and pydantic)."""
    path = path or packaged_config()
    raw = read_bytes(path)
    data = parse_json(raw, path)
    if cache is not None and cache.vouches_for(raw):
        return compile_config(data, path)
    checked, settings = validate_config(data, path)
    if cache is not None and checked == data:
        # Only a file that says exactly what validation made of it ("enabled": "false" is False
        # to pydantic and true to Python) compiles the same without it next time.
        cache.record(raw)
    return compile_config(checked, path, settings)


def parse_config(data: Any, path: Path) -> RouterConfig:
    """Validate and compile an already parsed config (:func:`load_config` without the file)."""
    checked, settings = validate_config(data, path)
    return compile_config(checked, path, settings)


def validate_settings(path: Path, name: str, type_name: str, raw: Mapping[str, Any]) -> Any:
    """``backends.<name>`` (minus ``type``) validated against its adapter's ``Settings`` by pydantic
    (strict JSON mode: a wrong JSON type or an unknown key is an error), then built by
    ``settings_from_json`` (:func:`memory_router.backends.common.settings.validate`)."""
    from pydantic import ValidationError

    from memory_router.backends import adapter_module
    from memory_router.backends.common.settings import validate

    settings_class = adapter_module(type_name).Settings
    try:
        return validate(settings_class, raw)
    except ValidationError as exc:
        from memory_router.config.schema import first_error

        raise first_error(path, exc, raw, prefix=f"backends.{name}", known=settings_class._FIELDS) from None


def validate_config(data: Any, path: Path) -> tuple[dict[str, Any], dict[str, Any]]:  # noqa: C901 - one check per cross-reference, each with its own error
    """Check a parsed config in full (pydantic: its shape, then each adapter's ``Settings``; the
    rules' references, numbers and regexes) or raise :class:`InvalidConfig`. Returns the config
    as validation reads it (the file's keys, values coerced as pydantic does) and each backend's
    validated ``Settings``."""
    from pydantic import ValidationError

    from memory_router.backends import ADAPTER_MODULES, adapter_module
    from memory_router.config.schema import ConfigSpec, first_error

    if not isinstance(data, dict):
        raise InvalidConfig(path, "", f"the top level must be a JSON object, got {type(data).__name__}")
    try:
        spec = ConfigSpec.model_validate(data)
    except ValidationError as exc:
        raise first_error(path, exc, data) from None

    settings: dict[str, Any] = {}
    types: dict[str, str] = {}
    for name, raw in spec.backends.items():
        where = f"backends.{name}"
        type_name = raw.get("type")
        if not isinstance(type_name, str) or type_name not in ADAPTER_MODULES:
            known = ", ".join(sorted(ADAPTER_MODULES))
            raise InvalidConfig(path, f"{where}.type", f"unknown backend type {type_name!r}", f"Use one of: {known}.")
        settings_data = {k: v for k, v in raw.items() if k != "type"}
        settings[name] = validate_settings(path, name, type_name, settings_data)
        types[name] = type_name

    numbers: set[int] = set()
    for index, rule in enumerate(spec.rules):
        label = f"rules[{index}] ({rule.id})"
        if rule.number in numbers:
            raise InvalidConfig(path, f"{label}.number", f"rule number {rule.number} is used twice")
        numbers.add(rule.number)
        for _, step, field_path in _steps(rule.chain, rule.extend, label):
            if step.backend not in settings:
                raise InvalidConfig(
                    path,
                    f"{field_path}.backend",
                    f"names unknown backend {step.backend!r}",
                    f'Define it under "backends" (defined: {", ".join(sorted(settings))}).',
                )
            # A backend's own settings may list its modes (command backends); else the adapter's.
            type_name = types[step.backend]
            modes = getattr(settings[step.backend], "modes", None) or adapter_module(type_name).MODES
            if step.mode is not None and modes is not None and step.mode not in modes:
                raise InvalidConfig(
                    path,
                    f"{field_path}.mode",
                    f"{type_name} has no mode {step.mode!r}",
                    f"Use one of: {', '.join(sorted(modes))}.",
                )
        # After the steps: a chain that names an unknown backend says so, not that "before" misses it.
        named = [ChainStep(s.backend, s.mode).health_key for s in rule.chain]
        for at, extension in enumerate(rule.extend):
            if extension.before is not None and extension.before not in named:
                raise InvalidConfig(
                    path,
                    f"{label}.extend[{at}].before",
                    f"names no step of the rule's chain: {extension.before!r}",
                    f"Use one of: {', '.join(named)} (backend, or backend/mode), or leave it out to try the step last.",
                )
        # Every signal compiles and cannot match the empty query (the error quotes the pattern).
        compile_rule(
            number=rule.number,
            id=rule.id,
            description=rule.description,
            strong=rule.strong,
            weak=rule.weak,
            chain=(),
            file_extensions=spec.file_extensions,
            path=path,
            label=label,
        )
    default = spec.rules[-1]
    if default.strong or default.weak:
        raise InvalidConfig(
            path,
            f"rules[{len(spec.rules) - 1}] ({default.id})",
            "the last rule is the default and must have no signals",
            "Remove its strong/weak lists.",
        )
    return spec.model_dump(mode="json", exclude_unset=True), settings


def compile_config(data: Any, path: Path, settings: Mapping[str, Any] | None = None) -> RouterConfig:
    """The :class:`RouterConfig` of a config that passed :func:`validate_config`: just now (its
    result and ``settings``), or when the cache vouching for these bytes was written (the file's
    own data; each backend's settings are then built by ``settings_from_json`` when a query first
    calls it). Defaults fill absent keys; no regex is compiled until a query reaches its rule,
    unless the config was validated just now."""
    extensions = data.get("file_extensions", ())
    table = data.get("table", DEFAULTS["table"])
    rules = []
    rule_strategies = {}
    for r in data["rules"]:
        strong_sources, weak_sources = tuple(r.get("strong", ())), tuple(r.get("weak", ()))
        chain = chain_of(
            ((step["backend"], step.get("mode")) for step in r["chain"]),
            ((step["backend"], step.get("mode"), step.get("before")) for step in r.get("extend", ())),
            table,
        )
        if r.get("strategy") is not None:
            rule_strategies[r["id"]] = r["strategy"]
        strong_regex = signal_regex(strong_sources, extensions)[1]
        weak_regex = signal_regex(weak_sources, extensions)[1]
        description = r.get("description", "")
        rule = Rule(
            int(r["number"]), r["id"], description, strong_sources, weak_sources, chain, strong_regex, weak_regex
        )
        if settings is not None:  # a daemon's config: every pattern compiled now, not on a query
            rule.pattern("strong"), rule.pattern("weak")
        rules.append(rule)
    backends: dict[str, BackendConfig] = {}
    for name, entry in data["backends"].items():
        if settings is not None:
            backends[name] = BackendConfig(name, entry["type"], settings[name])
        else:
            raw = MappingProxyType({k: v for k, v in entry.items() if k != "type"})
            backends[name] = BackendConfig(name, entry["type"], raw=raw, path=path, validated=True)
    setting = {name: data.get(name, default) for name, default in DEFAULTS.items()}
    cooldown = data.get("cooldown", {})
    regex_timeout_ms = int(setting["regex_timeout_ms"])
    return RouterConfig(
        path=path,
        threshold=float(setting["threshold"]),
        timeout_ms=int(setting["timeout_ms"]),
        result_limit=int(setting["result_limit"]),
        max_query_chars=int(setting["max_query_chars"]),
        regex_timeout_ms=regex_timeout_ms,
        rules=RuleTable(tuple(rules), regex_timeout_s=regex_timeout_ms / 1000),
        backends=MappingProxyType(backends),
        deadline_ms=None if data.get("deadline_ms") is None else int(data["deadline_ms"]),
        cooldown=None
        if cooldown is None or not cooldown.get("enabled", True)
        else CooldownConfig(
            int(cooldown.get("failures", COOLDOWN_DEFAULT.failures)),
            float(cooldown.get("seconds", COOLDOWN_DEFAULT.seconds)),
        ),
        table=table,
        strategy=str(setting["strategy"]),
        rule_strategies=MappingProxyType(rule_strategies),
        calibration=str(setting["calibration"]),
    )


def chain_of(
    chain: Iterable[tuple[str, str | None]], extend: Iterable[tuple[str, str | None, str | None]], table: str
) -> tuple[ChainStep, ...]:
    """A rule's chain as the config's ``table`` has it: the spec's steps in their order, and
    (``extended``) its ``extend`` steps that are not in it already, marked as extensions, each
    before the chain step its ``before`` names (``backend`` or ``backend/mode``) or else last."""
    steps = [ChainStep(backend, mode) for backend, mode in chain]
    if table != "extended":
        return tuple(steps)
    spec = tuple(steps)
    for backend, mode, before in extend:
        step = ChainStep(backend, mode, True)
        if ChainStep(backend, mode) in spec:
            continue
        at = next((i for i, s in enumerate(steps) if not s.extension and s.health_key == before), len(steps))
        steps.insert(at, step)
    return tuple(steps)


def _steps(chain: Any, extend: Any, label: str) -> Any:
    """``(index, step, field path)`` of a rule's chain, then of its ``extend`` steps."""
    for key, steps in (("chain", chain), ("extend", extend)):
        for index, step in enumerate(steps):
            yield index, step, f"{label}.{key}[{index}]"
