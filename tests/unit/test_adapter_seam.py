"""The declared backend seam (backends/base.py): every built-in adapter module has the
``AdapterModule`` shape, ``register_adapter`` adds a type the router then uses, and the daemon's
optional hooks (``aclose``, watching) are found through the declared protocols."""

from __future__ import annotations

import asyncio
import pickle
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from memory_router.backends import ADAPTER_MODULES, adapter_module, register_adapter
from memory_router.backends.base import (
    AdapterModule,
    BackendContext,
    BackendRequest,
    BackendResponse,
    ClosableBackend,
    Probe,
    Result,
    WatchableBackend,
)
from memory_router.backends.common.settings import AdapterSettings, settings_from_json, validation_dataclass
from memory_router.config.installed import parse_installed
from memory_router.config.router_config import parse_config, validate_settings
from memory_router.core.errors import InvalidConfig
from memory_router.routing.router import Router
from memory_router.routing.routerlog import RouterLog

BUILT_IN = ("totalrecall", "qmd", "lossless", "cognee", "command")


@pytest.mark.parametrize("type_name", BUILT_IN)
def test_each_built_in_adapter_module_has_the_declared_shape(type_name: str) -> None:
    module = adapter_module(type_name)
    missing = [name for name in ("Settings", "create", "MODES", "demo_setup") if not hasattr(module, name)]
    assert missing == [], f"{type_name}: missing {missing}"
    assert issubclass(module.Settings, AdapterSettings)  # a Frozen value: immutable, equal and hashed by value
    assert module.Settings.__pydantic_config__ == {"extra": "forbid", "strict": True}
    assert module.MODES is None or (isinstance(module.MODES, frozenset) and all(module.MODES))
    assert module.demo_setup is None or callable(module.demo_setup)


def test_only_the_adapters_with_modes_declare_them() -> None:
    assert adapter_module("qmd").MODES == frozenset({"search", "vsearch", "query"})
    cognee_modes = adapter_module("cognee").MODES
    assert cognee_modes and "graph" in cognee_modes
    assert [t for t in BUILT_IN if adapter_module(t).MODES is None] == ["totalrecall", "lossless", "command"]


# The smallest valid settings of each built-in type (command needs its argv).
MINIMAL: dict[str, dict[str, object]] = {"command": {"argv": ["prog"]}}
# Each built-in type's mapping field (stored read-only, hashed by its items).
MAPPINGS: dict[str, dict[str, dict[str, Any]]] = {
    "qmd": {"agent_collections": {"a": ["notes"]}},
    "cognee": {"agent_datasets": {"a": ["notes"]}},
    "command": {"env": {"a": "1"}},
}


@pytest.mark.parametrize("type_name", BUILT_IN)
def test_every_settings_field_is_validated(type_name: str, tmp_path: Path) -> None:
    """An unknown key is refused, and so is a wrong JSON type for each field: a list of objects
    fits no field, and in strict mode a number or flag written as a string is not converted."""
    settings_class = adapter_module(type_name).Settings
    path = tmp_path / "router-config.json"
    base = MINIMAL.get(type_name, {})
    validate_settings(path, "b", type_name, base)
    with pytest.raises(InvalidConfig, match=r"backends\.b\.bogus: unknown key.*Known keys: "):
        validate_settings(path, "b", type_name, {**base, "bogus": 1})
    hints = typing.get_type_hints(validation_dataclass(settings_class))
    assert list(hints) == list(settings_class._FIELDS)
    for name in settings_class._FIELDS:
        with pytest.raises(InvalidConfig, match=rf"backends\.b\.{name}\b"):
            validate_settings(path, "b", type_name, {**base, name: [{"x": 1}]})
        if hints[name] in (int, float, bool):
            with pytest.raises(InvalidConfig, match=rf"backends\.b\.{name}: Input should be a valid"):
                validate_settings(path, "b", type_name, {**base, name: "1"})


@pytest.mark.parametrize("type_name", BUILT_IN)
def test_settings_are_immutable_values_equal_and_hashed_by_value(type_name: str, tmp_path: Path) -> None:
    """The daemon keeps a warm backend across a reload when its settings are equal: every
    Settings, mapping fields included, is immutable, equal by value and hashable."""
    settings_class = adapter_module(type_name).Settings
    raw: dict[str, Any] = {**MINIMAL.get(type_name, {}), **MAPPINGS.get(type_name, {})}
    one = validate_settings(tmp_path / "router-config.json", "b", type_name, raw)
    other = settings_from_json(settings_class, raw)
    assert one == other and hash(one) == hash(other) and one is not other
    assert pickle.loads(pickle.dumps(one)) == one
    name = settings_class._FIELDS[-1]
    with pytest.raises(AttributeError, match="immutable"):
        setattr(one, name, getattr(one, name))
    for value in (getattr(one, n) for n in settings_class._FIELDS):
        assert not isinstance(value, list | dict)  # read-only all the way down
    if type_name in MAPPINGS:
        (field,) = MAPPINGS[type_name]
        changed = {**raw, field: {**raw[field], "z": raw[field]["a"]}}
        assert settings_from_json(settings_class, changed) != one
        with pytest.raises(TypeError):
            getattr(one, field)["a"] = raw[field]["a"]


class _Settings(AdapterSettings):
    answer: str = "registered"


class _Registered:
    def __init__(self, name: str, answer: str) -> None:
        self.name, self.answer = name, answer

    async def search(self, request: BackendRequest) -> BackendResponse:
        return BackendResponse.from_results(
            self.name, request.query, [Result(content=self.answer, relevance=0.9, source=self.name)]
        )

    def probe(self) -> Probe:
        return Probe(True, "registered in a test")


def _fake_module(name: str) -> types.ModuleType:
    """A FAKE adapter module with the AdapterModule shape, importable by ``name``."""
    module = types.ModuleType(name)
    module.Settings = _Settings  # type: ignore[attr-defined]
    module.MODES = None  # type: ignore[attr-defined]
    module.ENV_VARS = frozenset()  # type: ignore[attr-defined]
    module.demo_setup = None  # type: ignore[attr-defined]
    module.create = lambda n, s, c: _Registered(n, s.answer)  # type: ignore[attr-defined]
    return module


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> str:
    module = _fake_module("memory_router_test_seam_adapter")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr("memory_router.backends.ADAPTER_MODULES", dict(ADAPTER_MODULES))
    register_adapter("seamtest", module.__name__)
    return "seamtest"


def test_a_registered_type_is_configured_and_routed_to(registered: str, tmp_path: Path) -> None:
    data = {
        "rules": [{"number": 1, "id": "default", "chain": [{"backend": "mine"}]}],
        "backends": {"mine": {"type": registered, "answer": "from the registered adapter"}},
    }
    config = parse_config(data, tmp_path / "router-config.json")
    router = Router(config, context=BackendContext(state_dir=tmp_path), log=RouterLog(None))
    installed = parse_installed({"backends": {"mine": {"status": "ready"}}}, tmp_path / "backends.json")
    envelope = asyncio.run(router.route("anything", installed))
    assert envelope.routed_to == "mine" and [r.content for r in envelope.results] == ["from the registered adapter"]


def test_a_registered_type_still_rejects_unknown_settings(registered: str, tmp_path: Path) -> None:
    data = {
        "rules": [{"number": 1, "id": "default", "chain": [{"backend": "mine"}]}],
        "backends": {"mine": {"type": registered, "anwser": "typo"}},
    }
    with pytest.raises(Exception, match="anwser"):
        parse_config(data, tmp_path / "router-config.json")


def test_register_adapter_refuses_to_replace_a_type(registered: str) -> None:
    register_adapter(registered, "memory_router_test_seam_adapter")  # the same module again: fine
    with pytest.raises(ValueError, match="already registered"):
        register_adapter(registered, "some.other.module")
    with pytest.raises(ValueError, match="'qmd' is already registered"):
        register_adapter("qmd", "memory_router_test_seam_adapter")
    with pytest.raises(ValueError, match="non-empty string"):
        register_adapter("", "memory_router_test_seam_adapter")


def test_a_module_without_the_shape_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    module = _fake_module("memory_router_test_seam_shapeless")
    del module.MODES
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr("memory_router.backends.ADAPTER_MODULES", dict(ADAPTER_MODULES))
    register_adapter("shapeless", module.__name__)
    with pytest.raises(
        TypeError, match=r"memory_router_test_seam_shapeless \(type 'shapeless'\) does not define MODES"
    ):
        adapter_module("shapeless")


def test_a_module_whose_settings_are_not_adapter_settings_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = _fake_module("memory_router_test_seam_plain_settings")

    class Plain:  # not an AdapterSettings value: nothing would validate or build it
        answer: str = "x"

    module.Settings = Plain  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr("memory_router.backends.ADAPTER_MODULES", dict(ADAPTER_MODULES))
    register_adapter("plain", module.__name__)
    with pytest.raises(TypeError, match=r"\(type 'plain'\): Settings must subclass AdapterSettings"):
        adapter_module("plain")


def test_the_optional_hooks_are_recognised_by_their_protocols(tmp_path: Path) -> None:
    totalrecall = adapter_module("totalrecall")
    backend = totalrecall.create("totalrecall", totalrecall.Settings(), BackendContext(state_dir=tmp_path))
    assert isinstance(backend, WatchableBackend)
    assert not isinstance(_Registered("x", "y"), WatchableBackend)
    assert not isinstance(_Registered("x", "y"), ClosableBackend)

    class Closing(_Registered):
        async def aclose(self) -> None:
            pass

    assert isinstance(Closing("x", "y"), ClosableBackend)


def test_the_protocol_names_every_member_the_router_and_daemon_use() -> None:
    members = {m for m in dir(AdapterModule) if not m.startswith("_")}
    assert members == {"Settings", "create", "MODES", "ENV_VARS", "demo_setup"}
