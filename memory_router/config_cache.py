"""The compiled config cache: router-config.json validated once by pydantic, then loaded without it.

Like a ``.pyc``: ``<state dir>/router-config.cache`` holds what :func:`~.config.parse_config`
compiled (settings, rule table sources, chains) under a key made of the config file's bytes and
the code that compiled it (package version, fingerprints of the validating modules and adapters,
the ``regex`` and Python versions). A cache that is missing, changed, corrupt, from another
version, not a regular file, not owned by this user or writable by others is ignored and rebuilt,
never trusted blindly. It holds no backend settings: those are re-read from the config file itself
and built (``settings_from_json``, no pydantic) into the adapter's ``Settings`` dataclass when a
query first calls that backend; the key proves those bytes passed pydantic validation when the
cache was written (``BackendConfig(validated=True)``). Written
atomically (``O_EXCL|O_NOFOLLOW`` temporary file, mode 0600, then ``rename``).
``MEMORY_ROUTER_CONFIG_CACHE=off`` disables it. Figures and the reasoning are in README.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson

from . import __version__
from .config import BackendConfig, CooldownConfig, RouterConfig, parse_config, parse_json, read_bytes
from .paths import packaged_config
from .rules import Rule, RuleTable, Step

CACHE_NAME = "router-config.cache"
FORMAT = 2  # 2: chain steps carry their extension flag; table, strategy, calibration
MAX_CACHE_BYTES = 1 << 20  # a config and its compiled form are a few KB; anything bigger is not ours
ENV_SWITCH = "MEMORY_ROUTER_CONFIG_CACHE"


class _Bad(Exception):
    """The cache file does not hold what this code writes."""


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(ENV_SWITCH, "").strip().lower() not in ("0", "off", "false", "no")


def load_config_cached(path: Path | None, state_dir: Path, environ: Mapping[str, str] = os.environ) -> RouterConfig:
    """:func:`~.config.load_config`, answered from the compiled cache in ``state_dir`` when its key
    matches; otherwise validated in full and the cache rewritten. Raises the same errors."""
    path = path or packaged_config()
    raw = read_bytes(path)
    data = parse_json(raw, path)
    if not enabled(environ):
        return parse_config(data, path)
    key = cache_key(raw)
    cache_path = state_dir / CACHE_NAME
    stored = _read(cache_path)
    if stored is not None:
        try:
            return _from_cache(stored, key, data, path)
        except (_Bad, KeyError, TypeError, ValueError, AttributeError):
            pass  # corrupt, foreign or stale: rebuilt below
    config = parse_config(data, path)
    _write(cache_path, {"format": FORMAT, "key": key, "config": _to_cache(config)})
    return config


# ---------------------------------------------------------------------------- the key


def cache_key(raw: bytes) -> str:
    """Everything in this process that compiles the config, then the config's bytes themselves.

    Not a digest: the key is compared whole, so a changed config can never collide with a stale
    cache, and a cold query does not import ``hashlib`` (2 ms). ``raw`` was parsed as JSON already,
    so it is UTF-8."""
    import regex

    parts = (f"format={FORMAT}", __version__, sys.implementation.cache_tag, regex.__version__, *_code_stamps())
    return "\n".join([*parts, raw.decode()])


def _code_stamps() -> list[str]:
    """(mtime, size) of the modules whose code decides what a config compiles to: an edited
    checkout without a version bump still invalidates the cache."""
    from memory_router import backends

    here = Path(__file__).parent
    files = [here / name for name in ("config.py", "config_schema.py", "config_cache.py", "rules.py")]
    backends_dir = Path(backends.__file__).parent
    files.append(backends_dir / "_settings.py")  # settings_from_json builds every backend's settings
    for module in sorted(backends.ADAPTER_MODULES.values()):
        leaf = module.rpartition(".")[2]
        files.append(backends_dir / f"{leaf}.py" if module.startswith("memory_router.backends.") else Path(module))
    stamps = []
    for file in files:
        try:
            st = os.stat(file)
            stamps.append(f"{file}:{st.st_mtime_ns}:{st.st_size}")
        except OSError:
            stamps.append(f"{file}:-")
    return stamps


# ---------------------------------------------------------------------------- to and from JSON


def _to_cache(config: RouterConfig) -> dict[str, Any]:
    return {
        "threshold": config.threshold,
        "timeout_ms": config.timeout_ms,
        "result_limit": config.result_limit,
        "max_query_chars": config.max_query_chars,
        "regex_timeout_ms": config.regex_timeout_ms,
        "deadline_ms": config.deadline_ms,
        "cooldown": [config.cooldown.failures, config.cooldown.seconds] if config.cooldown else None,
        "rules": [
            {
                "number": r.number,
                "id": r.id,
                "description": r.description,
                "strong_sources": r.strong_sources,
                "weak_sources": r.weak_sources,
                "strong_regex": r.strong_regex,
                "weak_regex": r.weak_regex,
                "chain": [[s.backend, s.mode, s.extension] for s in r.chain],
            }
            for r in config.rules.rules
        ],
        "backends": [[b.name, b.type] for b in config.backends.values()],
        "table": config.table,
        "strategy": config.strategy,
        "rule_strategies": dict(config.rule_strategies),
        "calibration": config.calibration,
    }


def _from_cache(stored: Any, key: str, data: Any, path: Path) -> RouterConfig:
    if not isinstance(stored, dict) or stored.get("format") != FORMAT or stored.get("key") != key:
        raise _Bad("another key")
    c = stored["config"]
    rules = tuple(
        Rule(
            _typed(r["number"], int),
            _typed(r["id"], str),
            _typed(r["description"], str),
            _strs(r["strong_sources"]),
            _strs(r["weak_sources"]),
            tuple(Step(_typed(b, str), _optional(m, str), _typed(x, bool)) for b, m, x in r["chain"]),
            _optional(r["strong_regex"], str),
            _optional(r["weak_regex"], str),
        )
        for r in c["rules"]
    )
    if not rules or not all(rule.chain for rule in rules):
        raise _Bad("no rules")
    backends: dict[str, BackendConfig] = {}
    for name, type_name in c["backends"]:
        entry = data["backends"][name]
        if entry.get("type") != type_name:  # the same bytes cannot disagree: not our cache
            raise _Bad("backend type")
        settings = MappingProxyType({k: v for k, v in entry.items() if k != "type"})
        # validated=True: these bytes (the key) passed validate_settings when this cache was written
        backends[_typed(name, str)] = BackendConfig(name, type_name, raw=settings, path=path, validated=True)
    regex_timeout_ms = _typed(c["regex_timeout_ms"], int)
    cooldown = c["cooldown"]
    return RouterConfig(
        path=path,
        threshold=_typed(c["threshold"], float),
        timeout_ms=_typed(c["timeout_ms"], int),
        result_limit=_typed(c["result_limit"], int),
        max_query_chars=_typed(c["max_query_chars"], int),
        regex_timeout_ms=regex_timeout_ms,
        rules=RuleTable(rules, regex_timeout_s=regex_timeout_ms / 1000),
        backends=MappingProxyType(backends),
        deadline_ms=_optional(c["deadline_ms"], int),
        cooldown=None if cooldown is None else CooldownConfig(_typed(cooldown[0], int), _typed(cooldown[1], float)),
        table=_typed(c["table"], str),
        strategy=_typed(c["strategy"], str),
        rule_strategies=MappingProxyType({_typed(k, str): _typed(v, str) for k, v in c["rule_strategies"].items()}),
        calibration=_typed(c["calibration"], str),
    )


def _typed(value: Any, kind: type) -> Any:
    if type(value) is not kind:
        raise _Bad(f"expected {kind.__name__}")
    return value


def _optional(value: Any, kind: type) -> Any:
    return None if value is None else _typed(value, kind)


def _strs(values: Any) -> tuple[str, ...]:
    return tuple(_typed(v, str) for v in values)


# ---------------------------------------------------------------------------- the file


def _read(cache_path: Path) -> Any:
    """The parsed cache file, or ``None`` if it is absent, unsafe or unreadable. ``O_NOFOLLOW``:
    a symlink planted in its place is not followed; ``O_NONBLOCK``: a FIFO cannot hang us."""
    try:
        fd = os.open(cache_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not _safe(st) or st.st_size > MAX_CACHE_BYTES:
            return None
        raw = os.read(fd, MAX_CACHE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _safe(st: os.stat_result) -> bool:
    import stat

    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _write(cache_path: Path, payload: dict[str, Any]) -> None:
    """Atomically replace the cache; a state dir we cannot write to just means no cache."""
    if not cache_path.parent.is_dir():
        return  # never create the state dir for a cache
    tmp = cache_path.with_name(f".{CACHE_NAME}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        try:
            view = memoryview(orjson.dumps(payload))
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, cache_path)  # rename: replaces a symlink itself, never its target
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
