"""The compiled config cache: router-config.json validated once by pydantic, then loaded without it.

Like a ``.pyc``: ``<state dir>/router-config.cache`` records that the config file's bytes passed
:func:`~.config.parse_config` (pydantic, every adapter's ``Settings``, every signal regex compiled
and checked) under a key made of those bytes and the code that validated them (package version,
fingerprints of the validating modules and adapters, the ``regex`` and Python versions). When the
key matches, the config is compiled from the file's own bytes without pydantic
(:func:`_compiled`: defaults for absent keys, signals expanded, no regex compiled until a query
reaches its rule; backend settings built by ``settings_from_json`` when a query first calls that
backend, ``BackendConfig(validated=True)``).

The cache holds nothing but that key (issue 22, item 7): it used to hold the compiled values too,
and a body that disagreed with its key (``"cooldown": []``, an invalid regex, a threshold out of
range or merely not the file's) was used as it was: a crash on every query, or the wrong rule.
Now there is no second copy to disagree. A cache that is missing, changed, corrupt, from another
version, not a regular file, not owned by this user or writable by others is ignored and
rebuilt. It is capped at :data:`MAX_CACHE_BYTES`, which any config the router accepts fits, and
a cache that would not fit is not written (never written on every query and never read).
Written atomically (``O_EXCL|O_NOFOLLOW`` temporary file, mode 0600, then ``rename``).
``MEMORY_ROUTER_CONFIG_CACHE=off`` disables it. Figures and the reasoning are in docs/benchmarks.md (*Cold start*).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson

from memory_router import __version__
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import (
    COOLDOWN_DEFAULT,
    DEFAULTS,
    MAX_CONFIG_BYTES,
    BackendConfig,
    CooldownConfig,
    RouterConfig,
    chain_of,
    parse_config,
    parse_json,
    read_bytes,
)
from memory_router.core.rules import Rule, RuleTable, signal_regex

CACHE_NAME = "router-config.cache"
FORMAT = 2  # 1 held the compiled values as well (trusted blindly: issue 22, item 7)
# The key is the config's bytes (at most MAX_CONFIG_BYTES) plus the code's stamps (a few kB).
MAX_CACHE_BYTES = MAX_CONFIG_BYTES + (64 << 10)
ENV_SWITCH = "MEMORY_ROUTER_CONFIG_CACHE"


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(ENV_SWITCH, "").strip().lower() not in ("0", "off", "false", "no")


def load_config_cached(path: Path | None, state_dir: Path, environ: Mapping[str, str] = os.environ) -> RouterConfig:
    """:func:`~.config.load_config`, compiled without pydantic when the cache in ``state_dir``
    vouches for these bytes; otherwise validated in full and the cache rewritten. Raises the same
    errors."""
    path = path or packaged_config()
    raw = read_bytes(path)
    data = parse_json(raw, path)
    if not enabled(environ):
        return parse_config(data, path)
    key = cache_key(raw)
    cache_path = state_dir / CACHE_NAME
    stored = _read(cache_path)
    if isinstance(stored, dict) and stored.get("format") == FORMAT and stored.get("key") == key:
        try:
            return _compiled(data, path)
        except (KeyError, TypeError, ValueError, AttributeError):
            pass  # not the shape parse_config accepted: validated in full below, with its error
    config = parse_config(data, path)
    _write(cache_path, {"format": FORMAT, "key": key})
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

    package = Path(__file__).parent.parent
    names = ("config/router_config.py", "config/schema.py", "config/cache.py", "core/rules.py")
    files = [package / name for name in names]
    backends_dir = Path(backends.__file__).parent
    files.append(backends_dir / "common" / "settings.py")  # settings_from_json builds every backend's settings
    for module in sorted(backends.ADAPTER_MODULES.values()):
        inside = module.removeprefix("memory_router.backends.")
        files.append(backends_dir / f"{inside.replace('.', '/')}.py" if inside != module else Path(module))
    stamps = []
    for file in files:
        try:
            st = os.stat(file)
            stamps.append(f"{file}:{st.st_mtime_ns}:{st.st_size}")
        except OSError:
            stamps.append(f"{file}:-")
    return stamps


# ---------------------------------------------------------------------------- compiling


def _compiled(data: Any, path: Path) -> RouterConfig:
    """The :class:`RouterConfig` that :func:`~.config.parse_config` made of ``data`` when the cache
    was written, built without validating: the key vouches for these bytes. Same coercions as the
    schema's (an integral ``threshold`` is a float); tests hold the two equal."""
    extensions = data.get("file_extensions", ())
    table = data.get("table", DEFAULTS["table"])
    rules = []
    rule_strategies = {}
    for r in data["rules"]:
        strong_sources, weak_sources = tuple(r.get("strong", ())), tuple(r.get("weak", ()))
        chain = chain_of(
            ((step["backend"], step.get("mode")) for step in r["chain"]),
            ((step["backend"], step.get("mode")) for step in r.get("extend", ())),
            table,
        )
        if r.get("strategy") is not None:
            rule_strategies[r["id"]] = r["strategy"]
        strong_regex = signal_regex(strong_sources, extensions)[1]
        weak_regex = signal_regex(weak_sources, extensions)[1]
        description = r.get("description", "")
        rules.append(
            Rule(int(r["number"]), r["id"], description, strong_sources, weak_sources, chain, strong_regex, weak_regex)
        )
    backends: dict[str, BackendConfig] = {}
    for name, entry in data["backends"].items():
        settings = MappingProxyType({k: v for k, v in entry.items() if k != "type"})
        backends[name] = BackendConfig(name, entry["type"], raw=settings, path=path, validated=True)
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
    body = orjson.dumps(payload)
    if len(body) > MAX_CACHE_BYTES:
        return  # it would never be read: no cache, rather than one rewritten on every query
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        try:
            view = memoryview(body)
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
