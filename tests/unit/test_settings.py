"""Adapter ``Settings`` (backends/common/settings.py): immutable values that pydantic validates but is
not needed to build. ``settings_from_json`` (the compiled config cache's way, no pydantic) must
build exactly what pydantic's own validation of the same JSON builds, and importing an adapter
must not import pydantic."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from memory_router.backends import adapter_module
from memory_router.backends.cognee import adapter as cognee
from memory_router.backends.command import adapter as command
from memory_router.backends.common.settings import Secret, settings_from_json, validate, validation_dataclass
from memory_router.backends.lossless import adapter as lossless
from memory_router.backends.qmd import adapter as qmd
from memory_router.backends.qmd import indexing as qmd_indexing
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.config.cache import load_config_cached
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import parse_config
from memory_router.core.errors import InvalidConfig

BUILT_IN = ("totalrecall", "qmd", "lossless", "cognee", "command")


def pydantic_built(cls: type, raw: dict[str, Any]) -> Any:
    """What pydantic itself makes of ``raw`` (strict JSON mode, per the class's config), validated
    against the dataclass it validates ``cls``'s JSON with."""
    return _type_adapter(cls).validate_json(orjson.dumps(raw))


@functools.cache
def _type_adapter(cls: type) -> TypeAdapter[Any]:
    return TypeAdapter(validation_dataclass(cls))


def assert_same_value(where: str, mine: Any, pyd: Any) -> None:
    """Equal *and* of the same types (a tuple, not a list; a float, not an int), as pydantic
    builds them; a mapping read-only where pydantic's is a dict, a nested block our own class."""
    if isinstance(mine, MappingProxyType):
        assert type(pyd) is dict and dict(mine) == pyd, where
        for key in pyd:
            assert_same_value(f"{where}.{key}", mine[key], pyd[key])
    elif hasattr(mine, "_FIELDS"):
        assert type(pyd).__name__ == type(mine).__name__, where
        for name in mine._FIELDS:
            assert_same_value(f"{where}.{name}", getattr(mine, name), getattr(pyd, name))
    else:
        assert mine == pyd and type(mine) is type(pyd), f"{where}: {mine!r} vs {pyd!r}"
        if isinstance(pyd, tuple):
            assert [type(x) for x in mine] == [type(x) for x in pyd], where


def assert_same(cls: type, raw: dict[str, Any]) -> None:
    ours: Any = settings_from_json(cls, raw)
    assert_same_value(cls.__module__, ours, pydantic_built(cls, raw))
    assert validate(cls, raw) == ours


# --------------------------------------------------------------------------- the demo's settings


@pytest.fixture
def demo_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """Each built-in adapter's demo entry: the packaged config's keys plus its ``demo_setup``
    output (qmd's indexing and Cognee's health check are stubbed: only the returned dict matters)."""
    monkeypatch.setattr(qmd_indexing, "build_collection", lambda *args, **kwargs: None)
    monkeypatch.setattr(QmdBackend, "transport", lambda self: SimpleNamespace(env={}))
    monkeypatch.setattr(qmd_indexing, "embed_collection", lambda *args, **kwargs: None)
    monkeypatch.setattr(cognee, "fetch_health", lambda url, timeout: {"health": "up"})
    packaged = orjson.loads(packaged_config().read_bytes())["backends"]
    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    state.mkdir()
    out = {}
    for entry in packaged.values():
        type_name = entry["type"]
        raw = {k: v for k, v in entry.items() if k != "type"}
        setup = adapter_module(type_name).demo_setup
        out[type_name] = {**raw, **(setup(workspace, state) if setup is not None else {})}
    return out


def test_demo_settings_build_the_same_with_and_without_pydantic(demo_settings: dict[str, dict[str, Any]]) -> None:
    assert set(demo_settings) == {"qmd", "totalrecall", "cognee", "lossless"}
    assert isinstance(demo_settings["qmd"]["collections"], list)  # JSON: a list, to become a tuple
    for type_name, raw in demo_settings.items():
        assert_same(adapter_module(type_name).Settings, raw)


# --------------------------------------------------------------------------- every field, by hand

FULL: dict[str, dict[str, Any]] = {
    "lossless": {
        "db_path": "$HOME/lcm.db",
        "busy_timeout_ms": 0,
        "include_messages": False,
        "max_content_chars": 100,
        "session_key": "agent:main:main",
        "unkeyed_agents": ["main"],
    },
    "totalrecall": {"root": "/srv/memory", "max_file_bytes": 1},
    "qmd": {
        "qmd": "/opt/qmd/dist/cli/qmd.js",
        "node": "/usr/bin/node",
        "collections": ["notes", "code"],
        "agent_collections": {"alice": ["alice-notes"], "bob": ["bob-notes", "bob-code"]},
        "shared_collections": ["team"],
        "index": "work",
        "index_path": "/tmp/i.sqlite",
        "config_dir": "/tmp/cfg",
        "cache_dir": "/tmp/cache",
        "working_dir": "/tmp",
        "max_search_calls": 8,
        "query_expansion": False,
        "engine": "off",
        "engine_warmup": False,
        "engine_idle_s": 0,  # an int for a float field: 0.0
        "vsearch_expansion": True,
        "http_url": "http://127.0.0.1:8181",
        "refresh": {"enabled": False, "debounce_ms": 0, "max_wait_ms": 5, "embed": False, "timeout_s": 30},
    },
    "cognee": {
        "base_url": "https://user:pw@cognee.example:8000",
        "api_key": "sekrit-key-123",
        "username": "me",
        "password": "p@ss word",
        "datasets": ["services", "arch"],
        "agent_datasets": {"alice": ["alice"]},
        "shared_datasets": ["team"],
        "top_k": 1000,
        "default_mode": "chunks",
        "graph_search_type": "GRAPH_COMPLETION_COT",
        "probe_timeout_s": 30,
        "paths": "expand",
        "explore_share": 0.9,
    },
    "command": {
        "argv": ["~/bin/search", "--adapter", "{query}", ["--hint", "{mode}"], ["-n", "{limit}"]],
        "cwd": "~/work",
        "env": {"URL": "http://127.0.0.1:1933", "EMPTY": ""},
        "stdin": "json",
        "max_output_bytes": 1024,
        "modes": ["fast", "deep"],
        "default_mode": "fast",
    },
}


@pytest.mark.parametrize("type_name", BUILT_IN)
def test_full_settings_build_the_same_with_and_without_pydantic(type_name: str) -> None:
    cls = adapter_module(type_name).Settings
    raw = FULL[type_name]
    assert set(raw) == set(cls._FIELDS), "FULL must set every field"
    assert_same(cls, raw)
    minimal = {"argv": ["prog"]} if type_name == "command" else {}
    assert_same(cls, minimal)  # every default


def test_conversions_are_the_types_the_fields_declare() -> None:
    s = settings_from_json(command.Settings, FULL["command"])
    assert s.argv == ("~/bin/search", "--adapter", "{query}", ("--hint", "{mode}"), ("-n", "{limit}"))
    assert s.modes == ("fast", "deep") and s.env == MappingProxyType({"URL": "http://127.0.0.1:1933", "EMPTY": ""})
    q = settings_from_json(qmd.Settings, {"engine_idle_s": 5, "collections": ["a"]})
    assert type(q.engine_idle_s) is float and q.collections == ("a",)
    c = settings_from_json(cognee.Settings, {"api_key": "k", "password": None})
    assert c.api_key == Secret("k") and c.password is None
    with pytest.raises(TypeError, match="no field bogus"):
        settings_from_json(lossless.Settings, {"bogus": 1})


def test_settings_are_frozen_and_hashable() -> None:
    s = settings_from_json(qmd.Settings, FULL["qmd"])
    with pytest.raises(AttributeError, match="immutable"):
        s.engine = "auto"  # type: ignore[misc]
    assert hash(s) == hash(settings_from_json(qmd.Settings, FULL["qmd"]))
    assert s.replace(qmd="/x").qmd == "/x"
    assert s.replace(agent_collections={"a": ("b",)}).agent_collections == MappingProxyType({"a": ("b",)})


def test_secrets_are_never_shown() -> None:
    s = settings_from_json(cognee.Settings, FULL["cognee"])
    shown = repr(s) + str(s) + f"{s.api_key} {s.password!r} {s.password!s}"
    assert "sekrit-key-123" not in shown and "p@ss word" not in shown and "**********" in shown
    assert s.api_key is not None and s.api_key.get_secret_value() == "sekrit-key-123"
    assert Secret("a") == Secret("a") != Secret("b") and Secret("a") != "a"
    assert hash(Secret("a")) == hash(Secret("a"))


# --------------------------------------------------------------------------- generated values

_int = st.integers
_path = st.one_of(st.none(), st.text(max_size=30))
LOSSLESS = st.fixed_dictionaries(
    {},
    optional={
        "db_path": _path,
        "busy_timeout_ms": _int(0, 600_000),
        "include_messages": st.booleans(),
        "max_content_chars": _int(100, 1_000_000),
        "session_key": _path,
    },
)
QMD = st.fixed_dictionaries(
    {},
    optional={
        "qmd": _path,
        "node": _path,
        "collections": st.lists(st.text(max_size=10), max_size=4),
        "index": _path,
        "index_path": _path,
        "config_dir": _path,
        "cache_dir": _path,
        "working_dir": _path,
        "max_search_calls": _int(1, 8),
        "query_expansion": st.booleans(),
        "engine": st.sampled_from(["auto", "off"]),
        "engine_warmup": st.booleans(),
        "engine_idle_s": st.one_of(_int(0, 10**6), st.floats(0, 1e9, allow_nan=False, allow_infinity=False)),
        "vsearch_expansion": st.booleans(),
        "http_url": _path,
        "refresh": st.fixed_dictionaries(
            {},
            optional={"enabled": st.booleans(), "debounce_ms": _int(0, 600_000), "timeout_s": _int(1, 7200)},
        ),
    },
)


@given(LOSSLESS)
def test_generated_lossless_settings_build_the_same(raw: dict[str, Any]) -> None:
    assert_same(lossless.Settings, raw)


@given(QMD)
def test_generated_qmd_settings_build_the_same(raw: dict[str, Any]) -> None:
    assert_same(qmd.Settings, raw)


# --------------------------------------------------------------------------- strict mode, errors


# (type, settings, what the error says after "<file>: backends.b.")
BAD = [
    ("lossless", {"busy_timeout_ms": "5000"}, 'busy_timeout_ms: Input should be a valid integer (got "5000")'),
    ("lossless", {"include_messages": 1}, "include_messages: Input should be a valid boolean (got 1)"),
    ("lossless", {"busy_timeout_ms": 5000.0}, "busy_timeout_ms: Input should be a valid integer (got 5000.0)"),
    ("lossless", {"max_content_chars": 99}, "max_content_chars: Input should be greater than or equal to 100 (got 99)"),
    ("qmd", {"collections": "notes"}, 'collections: Input should be a valid array (got "notes")'),
    ("qmd", {"engine_idle_s": "300"}, 'engine_idle_s: Input should be a valid number (got "300")'),
    (
        "totalrecall",
        {"rooot": "/x"},
        "rooot: unknown key (misspelt, or not supported by this version). Known keys: root,",
    ),
    ("cognee", {"base_url": "127.0.0.1:8000"}, "base_url: must be an http:// or https:// URL"),
    ("cognee", {"api_key": 12345}, "api_key: Input should be a valid string (got 12345)"),
    ("command", {"argv": []}, "argv: Tuple should have at least 1 item"),
    ("command", {"argv": ["p", "{qury}"]}, "argv: argv[1] '{qury}': unknown placeholder {qury}"),
    ("command", {"argv": ["p"], "env": {"A": 1}}, "env.A: Input should be a valid string (got 1)"),
    ("command", {}, "argv: Field required."),
]


@pytest.mark.parametrize(("type_name", "raw", "message"), BAD)
def test_bad_settings_name_file_field_and_value(type_name: str, raw: dict, message: str, tmp_path: Path) -> None:
    path = tmp_path / "router-config.json"
    rules = [{"number": 1, "id": "default", "chain": [{"backend": "b"}]}]
    with pytest.raises(InvalidConfig) as err:
        parse_config({"rules": rules, "backends": {"b": {"type": type_name, **raw}}}, path)
    assert str(err.value).startswith(f"{path}: backends.b.{message}"), str(err.value)


def test_a_wrong_type_is_a_pydantic_error_not_a_coercion() -> None:
    with pytest.raises(ValidationError):
        validate(lossless.Settings, {"busy_timeout_ms": "5000"})
    with pytest.raises(ValidationError):
        validate(qmd.Settings, {"query_expansion": "false"})


# --------------------------------------------------------------------------- the cache path


def _full_config(tmp_path: Path) -> tuple[Path, Path]:
    """A router-config.json setting every field of every built-in adapter, and a state dir."""
    path = tmp_path / "router-config.json"
    backends = {name: {"type": name, **raw} for name, raw in FULL.items()}
    rules = [{"number": 1, "id": "default", "chain": [{"backend": name} for name in backends]}]
    path.write_bytes(orjson.dumps({"rules": rules, "backends": backends}))
    state = tmp_path / "state"
    state.mkdir()
    return path, state


def test_a_cache_hit_builds_the_same_settings_without_validating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, state = _full_config(tmp_path)
    first = load_config_cached(path, state, environ={})  # validated, cache written
    import memory_router.backends.common.settings as settings_module

    def no_pydantic(cls: type, raw: Any) -> Any:
        raise AssertionError("a cache hit must not validate the settings again")

    monkeypatch.setattr(settings_module, "validate", no_pydantic)
    hit = load_config_cached(path, state, environ={})
    assert "not built yet" in repr(hit.backends["qmd"])
    for name in FULL:
        assert hit.backends[name].settings == first.backends[name].settings
        assert hit.backends[name] == first.backends[name]


# --------------------------------------------------------------------------- imports

_WHO_IMPORTS_PYDANTIC = """
import builtins, sys
importers = set()
real_import = builtins.__import__
def spy(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__") or ""
    if name.partition(".")[0] in ("pydantic", "pydantic_core") and not importer.startswith("pydantic"):
        importers.add(importer)
    return real_import(name, globals, locals, fromlist, level)
builtins.__import__ = spy
%s
print(sorted(importers))
print("pydantic" in sys.modules)
"""


@pytest.mark.slow
@pytest.mark.parametrize("type_name", BUILT_IN)
def test_importing_an_adapter_imports_no_pydantic(type_name: str) -> None:
    module = f"memory_router.backends.{type_name}"
    done = subprocess.run(
        [sys.executable, "-c", _WHO_IMPORTS_PYDANTIC % f"import {module}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    importers_line, loaded = done.stdout.strip().splitlines()
    importers = set(ast.literal_eval(importers_line))
    assert not importers, f"{module}: pydantic imported by {sorted(importers)}"
    assert loaded == "False"


@pytest.mark.slow
def test_a_cache_hit_builds_settings_without_pydantic(tmp_path: Path) -> None:
    path, state = _full_config(tmp_path)
    load_config_cached(path, state, environ={})  # writes the cache
    hit = (
        "from pathlib import Path\n"
        "from memory_router.config.cache import load_config_cached\n"
        "from memory_router.backends.common import settings as _settings\n"
        f"c = load_config_cached(Path({str(path)!r}), Path({str(state)!r}), environ={{}})\n"
        "assert all(b.settings is not None for b in c.backends.values())\n"
        "assert not _settings._adapters, 'a TypeAdapter was built: the settings were validated again'\n"
        "assert 'memory_router.config.schema' not in sys.modules"
    )
    done = subprocess.run(
        [sys.executable, "-c", _WHO_IMPORTS_PYDANTIC % hit], capture_output=True, text=True, timeout=60, check=True
    )
    importers = set(ast.literal_eval(done.stdout.strip().splitlines()[0]))
    assert not importers, f"pydantic imported by {sorted(importers)}"
