"""The config cache: a thin layer around :func:`~memory_router.config.router_config.load_config`
that lets it skip validation (and pydantic) for bytes it validated before.

Like a ``.pyc``: ``<state dir>/router-config.cache`` records that the config file's bytes passed
:func:`~memory_router.config.router_config.validate_config` (pydantic, every adapter's
``Settings``, every signal regex compiled and checked) under a key made of those bytes and the
code that validated them (package version, fingerprints of the validating modules and adapters,
the ``regex`` package's files and the Python version). When the key matches, ``load_config`` compiles the file's own
bytes without validating them (the same ``compile_config`` as after a validation). Only a file
whose values validation left as they are is recorded (``load_config`` checks), so the two compile
to the same config.

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
from typing import Any

from memory_router import __version__
from memory_router.config.router_config import MAX_CONFIG_BYTES, RouterConfig, load_config
from memory_router.output.jsonout import loads_as_orjson

CACHE_NAME = "router-config.cache"
# 1 held the compiled values as well (trusted blindly: issue 22, item 7); 2 was also written for
# a file whose values validation coerced ("enabled": "false"), which then compiled otherwise.
FORMAT = 3
# The key is the config's bytes (at most MAX_CONFIG_BYTES) plus the code's stamps (a few kB).
MAX_CACHE_BYTES = MAX_CONFIG_BYTES + (64 << 10)
ENV_SWITCH = "MEMORY_ROUTER_CONFIG_CACHE"


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(ENV_SWITCH, "").strip().lower() not in ("0", "off", "false", "no")


def load_config_cached(path: Path | None, state_dir: Path, environ: Mapping[str, str] = os.environ) -> RouterConfig:
    """:func:`~memory_router.config.router_config.load_config` with the cache in ``state_dir``
    (unless ``MEMORY_ROUTER_CONFIG_CACHE=off``). Raises the same errors."""
    return load_config(path, ConfigCache(state_dir) if enabled(environ) else None)


class ConfigCache:
    """``<state dir>/router-config.cache``: which config bytes this code validated last."""

    __slots__ = ("path",)

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / CACHE_NAME

    def vouches_for(self, raw: bytes) -> bool:
        stored = _read(self.path)
        return isinstance(stored, dict) and stored.get("format") == FORMAT and stored.get("key") == cache_key(raw)

    def record(self, raw: bytes) -> None:
        _write(self.path, {"format": FORMAT, "key": cache_key(raw)})


# ---------------------------------------------------------------------------- the key


def cache_key(raw: bytes) -> str:
    """Everything in this process that compiles the config, then the config's bytes themselves.

    Not a digest: the key is compared whole, so a changed config can never collide with a stale
    cache, and a cold query does not import ``hashlib`` (2 ms). ``raw`` was parsed as JSON already,
    so it is UTF-8."""
    parts = (f"format={FORMAT}", __version__, sys.implementation.cache_tag, *_regex_stamps(), *_code_stamps())
    return "\n".join([*parts, raw.decode()])


def _regex_stamps() -> list[str]:
    """(mtime, size) of the ``regex`` package's files, which validated the signals: another
    ``regex`` (an upgrade) invalidates the cache. Found without importing it (a fifth of a cold
    query, which matches its signals with ``re`` where it can: :mod:`memory_router.core.rules`)."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("regex")
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not folders:
        return ["regex:-"]
    stamps = []
    with os.scandir(folders[0]) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.is_file() and entry.name.endswith((".py", ".so", ".pyd")):
                st = entry.stat()
                stamps.append(f"{entry.path}:{st.st_mtime_ns}:{st.st_size}")
    return stamps


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
        return loads_as_orjson(raw)  # no orjson on a cold query (memory_router.output.jsonout)
    except ValueError:
        return None


def _safe(st: os.stat_result) -> bool:
    import stat

    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _write(cache_path: Path, payload: dict[str, Any]) -> None:
    """Atomically replace the cache; a state dir we cannot write to just means no cache."""
    if not cache_path.parent.is_dir():
        return  # never create the state dir for a cache
    tmp = cache_path.with_name(f".{CACHE_NAME}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    import orjson  # a cache miss: the full validation has loaded it already

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
