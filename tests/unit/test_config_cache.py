"""The compiled config cache: a cold answer equals a validated-config answer; a bad cache is never trusted."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from memory_router.backends import BackendContext
from memory_router.config import cache as config_cache
from memory_router.config.cache import CACHE_NAME, load_config_cached
from memory_router.config.installed import load_installed
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import RouterConfig, load_config
from memory_router.core.errors import InvalidConfig
from memory_router.demo import SPEC_EXAMPLES, DemoWorkspace, materialize
from memory_router.routing.router import Router

from ..conftest import cli
from ..support.client import assert_same_answer


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return materialize(tmp_path_factory.mktemp("demo") / "ws", log=lambda m: None)


@pytest.fixture()
def state(tmp_path: Path) -> Path:
    (tmp_path / "state").mkdir()
    return tmp_path / "state"


def route_all(config: RouterConfig, ws: DemoWorkspace) -> list[dict]:
    router = Router(config, context=BackendContext(state_dir=ws.state_dir, cwd=ws.root))
    installed = load_installed(ws.backends_path)

    async def run() -> list[dict]:
        return [orjson.loads((await router.route(ex.query, installed)).to_json()) for ex in SPEC_EXAMPLES]

    return asyncio.run(run())


@pytest.mark.slow
def test_cached_config_answers_the_15_spec_queries_exactly_like_the_validated_one(demo, tmp_path):
    validated = load_config(demo.config_path)
    load_config_cached(demo.config_path, tmp_path)  # builds the cache
    cached = load_config_cached(demo.config_path, tmp_path)  # loaded from it
    assert all(not rule._compiled for rule in cached.rules.rules)  # really from the cache: nothing compiled yet
    for example, a, b in zip(SPEC_EXAMPLES, route_all(cached, demo), route_all(validated, demo), strict=True):
        assert_same_answer(a, b, f"example {example.number}: cached vs validated config")
    for field in ("path", "threshold", "timeout_ms", "result_limit", "max_query_chars", "regex_timeout_ms"):
        assert getattr(cached, field) == getattr(validated, field)
    assert (cached.deadline_ms, cached.cooldown) == (validated.deadline_ms, validated.cooldown)
    assert cached.rules.rules == validated.rules.rules
    assert dict(cached.backends) == dict(validated.backends)  # settings validated on demand, equal


@pytest.mark.slow
@pytest.mark.parametrize("example", SPEC_EXAMPLES, ids=lambda e: f"ex{e.number}")
def test_cold_cli_answer_equals_a_validated_config_answer(demo, example):
    args = ["query", example.query, "--state-dir", str(demo.state_dir), "--config", str(demo.config_path)]
    env = {**os.environ, "MEMORY_ROUTER_DAEMON": "off"}

    def answer(**extra: str) -> dict:
        proc = subprocess.run(cli(*args), capture_output=True, env={**env, **extra}, cwd=demo.root, timeout=60)
        assert proc.returncode in (0, 1), proc.stderr
        return orjson.loads(proc.stdout)

    answer()  # writes the cache (first run) or finds it
    assert (demo.state_dir / CACHE_NAME).is_file()
    assert_same_answer(answer(), answer(MEMORY_ROUTER_CONFIG_CACHE="off"), "cache on vs off")


@pytest.mark.slow
def test_a_cache_hit_imports_neither_pydantic_specs_nor_unused_adapters(demo, tmp_path):
    load_config_cached(demo.config_path, tmp_path)
    code = (
        "import sys; from pathlib import Path; from memory_router.config.cache import load_config_cached; "
        f"c = load_config_cached(Path({str(demo.config_path)!r}), Path({str(tmp_path)!r})); "
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'memory_router.config.schema', "
        "'memory_router.backends.')) and m not in ('memory_router.backends.common', "
        "'memory_router.backends.common.files', 'memory_router.core.frozen')))"
    )  # stdlib-only: common.files, the reader every config file goes through (a FIFO is refused), and
    # its package; core.frozen, Rule's base
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


_ENTRY = "import sys; from memory_router.cli.entry import main; sys.argv[0] = 'memory-router'; main()"


@pytest.mark.slow
@pytest.mark.parametrize("example", SPEC_EXAMPLES, ids=lambda e: f"ex{e.number}")
def test_a_cold_cli_query_on_a_cache_hit_imports_neither_pydantic_nor_click(demo, example):
    # The first query of a session pays for every import; pydantic alone costs more than routing.
    # -X importtime lists every import on stderr as it happens (the CLI leaves with os._exit).
    args = ["query", example.query, "--state-dir", str(demo.state_dir), "--config", str(demo.config_path)]
    env = {**os.environ, "MEMORY_ROUTER_DAEMON": "off"}
    argv = [sys.executable, "-X", "importtime", "-c", _ENTRY, *args]
    runs = [subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60) for _ in range(2)]
    last = runs[1]  # the first run may have written the cache
    assert last.returncode in (0, 1) and orjson.loads(last.stdout)["query_echo"] == example.query
    imported = {line.rpartition("|")[2].strip().partition(".")[0] for line in last.stderr.splitlines()}
    assert "memory_router" in imported and "re" in imported  # the listing is real (the rule engine)
    assert not imported & {"pydantic", "pydantic_core", "click"}, sorted(imported & {"pydantic", "click"})
    # Every packaged signal reads the same in re: an ASCII query is matched without regex.
    assert "regex" not in imported or not example.query.isascii()


def test_writes_the_cache_0600_atomically(state):
    load_config_cached(None, state)
    cache = state / CACHE_NAME
    assert cache.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in state.iterdir()] == [CACHE_NAME]  # no temporary file left behind
    stored = orjson.loads(cache.read_bytes())
    assert stored["key"] == config_cache.cache_key(packaged_config().read_bytes())


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x00\xff garbage",
        b'{"format": 1, "key": "',
        b"[]",
        b'{"format": 1, "key": "0000", "config": {}}',
        b'{"format": 99, "key": "KEY", "config": {}}',
        b'{"format": 1, "key": "KEY", "config": {"rules": "nope"}}',
    ],
    ids=["empty", "binary", "truncated", "not-an-object", "other-key", "other-format", "wrong-shape"],
)
def test_a_corrupt_or_foreign_cache_is_ignored_and_rebuilt(state, content):
    key = config_cache.cache_key(packaged_config().read_bytes())
    (state / CACHE_NAME).write_bytes(content.replace(b"KEY", key.encode()))
    (state / CACHE_NAME).chmod(0o600)
    config = load_config_cached(None, state)
    assert config.rules.match("find the function parseAuthToken").rule.number == 1
    assert orjson.loads((state / CACHE_NAME).read_bytes())["key"] == key  # rebuilt


@pytest.mark.parametrize(
    "body",
    [{"threshold": "0.4"}, {"threshold": 0.9}, {"cooldown": []}, {"rules": [{"strong_regex": "("}]}],
    ids=["wrong-type", "another-value", "bad-cooldown", "bad-regex"],
)
def test_values_beside_the_right_key_are_never_used(state, body):
    """Issue 22, item 7: the cache holds only its key; the values come from the config file."""
    load_config_cached(None, state)
    cache = state / CACHE_NAME
    stored = orjson.loads(cache.read_bytes())
    assert set(stored) == {"format", "key"}
    cache.write_bytes(orjson.dumps({**stored, "config": body, **body}))
    assert_same_config(load_config_cached(None, state), load_config(packaged_config()))


def assert_same_config(a: RouterConfig, b: RouterConfig) -> None:
    assert a.replace(rules=None) == b.replace(rules=None)  # a RuleTable compares by identity
    assert a.rules.rules == b.rules.rules and a.rules.regex_timeout_s == b.rules.regex_timeout_s


CONFIG_VARIANTS: dict[str, dict[str, Any]] = {
    "cooldown-null": {"cooldown": None},
    "cooldown-disabled": {"cooldown": {"enabled": False}},
    "cooldown-partial": {"cooldown": {"seconds": 5}},
    "deadline-integral-threshold": {"deadline_ms": 1500, "threshold": 1, "timeout_ms": 900},
    "no-optional-keys": {"drop": ["threshold", "timeout_ms", "result_limit", "max_query_chars", "regex_timeout_ms"]},
    "no-file-extensions": {"drop": ["file_extensions"]},
}


@pytest.mark.parametrize("variant", list(CONFIG_VARIANTS))
def test_the_config_compiled_from_the_cache_equals_the_validated_one(state, tmp_path, variant):
    data = orjson.loads(packaged_config().read_bytes())
    change = dict(CONFIG_VARIANTS[variant])
    for key in change.pop("drop", []):
        data.pop(key, None)
    data.update(change)
    path = tmp_path / "router-config.json"
    path.write_bytes(orjson.dumps(data))
    validated = load_config_cached(path, state)  # validated in full, the cache written
    cached = load_config_cached(path, state)  # compiled from the file under the cache's key
    assert all(not rule._compiled for rule in cached.rules.rules)
    assert_same_config(cached, validated)
    numbers = ("threshold", "timeout_ms", "result_limit", "max_query_chars", "regex_timeout_ms")
    assert [type(getattr(cached, n)) for n in numbers] == [type(getattr(validated, n)) for n in numbers]


def test_a_cache_over_its_cap_is_not_written_so_never_rewritten(state, tmp_path, monkeypatch):
    monkeypatch.setattr(config_cache, "MAX_CACHE_BYTES", 1024)  # the packaged config is larger
    writes: list[int] = []
    real_write = os.write

    def counting_write(fd: int, data: bytes) -> int:
        writes.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", counting_write)  # the os module config_cache writes through
    for _ in range(3):
        assert load_config_cached(None, state).rules.default.id
    assert writes == [] and not (state / CACHE_NAME).exists()


def test_a_changed_config_is_revalidated_not_answered_from_the_stale_cache(state, tmp_path):
    path = tmp_path / "router-config.json"
    data = orjson.loads(packaged_config().read_bytes())
    path.write_bytes(orjson.dumps(data))
    assert load_config_cached(path, state).threshold == data["threshold"]
    path.write_bytes(orjson.dumps({**data, "threshold": 0.75}))
    assert load_config_cached(path, state).threshold == 0.75
    path.write_bytes(orjson.dumps({**data, "threshold": 7}))
    with pytest.raises(InvalidConfig, match="threshold"):
        load_config_cached(path, state)  # an invalid file is an error even with a cache present


def test_a_group_writable_cache_is_not_trusted(state, tmp_path):
    path = tmp_path / "router-config.json"
    data = orjson.loads(packaged_config().read_bytes())
    path.write_bytes(orjson.dumps(data))
    load_config_cached(path, state)
    cache = state / CACHE_NAME
    cache.chmod(0o620)  # the right key, but others could have written it
    assert load_config_cached(path, state).threshold == data["threshold"]
    assert cache.stat().st_mode & 0o777 == 0o600  # replaced by our own


def test_a_symlink_in_place_of_the_cache_is_neither_followed_nor_written_through(state, tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_bytes(b"precious")
    (state / CACHE_NAME).symlink_to(target)
    load_config_cached(None, state)
    assert target.read_bytes() == b"precious"
    assert not (state / CACHE_NAME).is_symlink() and (state / CACHE_NAME).stat().st_mode & 0o777 == 0o600


def test_a_missing_state_dir_is_not_created_for_the_cache(tmp_path):
    config = load_config_cached(None, tmp_path / "absent")
    assert config.rules.default.id and not (tmp_path / "absent").exists()


def test_switched_off_it_neither_reads_nor_writes(state):
    load_config_cached(None, state, environ={"MEMORY_ROUTER_CONFIG_CACHE": "off"})
    assert not (state / CACHE_NAME).exists()


def test_a_code_change_changes_the_key(monkeypatch):
    raw = packaged_config().read_bytes()
    before = config_cache.cache_key(raw)
    monkeypatch.setattr(config_cache, "_code_stamps", lambda: ["rules.py:1:2"])
    assert config_cache.cache_key(raw) != before
    monkeypatch.setattr(config_cache, "__version__", "9.9.9")
    assert config_cache.cache_key(raw) != before


@pytest.mark.parametrize("bad_type", [[], {}, 3, None])
def test_a_backend_type_that_is_not_a_string_is_a_clear_error_cached_or_not(state, tmp_path, bad_type):
    data = orjson.loads(packaged_config().read_bytes())
    data["backends"]["qmd"]["type"] = bad_type
    path = tmp_path / "router-config.json"
    path.write_bytes(orjson.dumps(data))
    for load in (lambda: load_config(path), lambda: load_config_cached(path, state)):
        with pytest.raises(InvalidConfig, match=r"backends\.qmd\.type: unknown backend type"):
            load()
    assert not (state / CACHE_NAME).exists()


@pytest.mark.parametrize(
    "change, read_as",
    [
        ({"cooldown": {"enabled": "false"}}, lambda c: c.cooldown is None),  # truthy to Python
        ({"timeout_ms": "900"}, lambda c: c.timeout_ms == 900),
    ],
    ids=["bool-as-string", "int-as-string"],
)
def test_a_file_whose_values_validation_coerces_is_never_answered_from_the_cache(state, tmp_path, change, read_as):
    # Compiled without pydantic, "enabled": "false" would read as true: such a file is validated
    # on every load (correct, if slower) rather than recorded in the cache.
    data = {**orjson.loads(packaged_config().read_bytes()), **change}
    path = tmp_path / "router-config.json"
    path.write_bytes(orjson.dumps(data))
    for _ in range(2):
        assert read_as(load_config_cached(path, state))
    assert not (state / CACHE_NAME).exists()


class VouchingRecorder:
    def __init__(self, vouches: bool) -> None:
        self.vouches = vouches
        self.recorded: list[bytes] = []

    def vouches_for(self, raw: bytes) -> bool:
        return self.vouches

    def record(self, raw: bytes) -> None:
        self.recorded.append(raw)


def test_load_config_validates_what_no_cache_vouches_for_and_records_it(tmp_path):
    path = tmp_path / "router-config.json"
    path.write_bytes(packaged_config().read_bytes())
    cache = VouchingRecorder(vouches=False)
    config = load_config(path, cache)
    assert cache.recorded == [path.read_bytes()]
    assert all(rule._compiled or not (rule.strong_regex or rule.weak_regex) for rule in config.rules.rules)


def test_load_config_trusts_a_cache_that_vouches_and_compiles_without_validating(tmp_path):
    data = orjson.loads(packaged_config().read_bytes())
    data["threshold"] = 7  # out of range: validation would refuse it
    path = tmp_path / "router-config.json"
    path.write_bytes(orjson.dumps(data))
    with pytest.raises(InvalidConfig, match="threshold"):
        load_config(path, VouchingRecorder(vouches=False))
    cache = VouchingRecorder(vouches=True)
    assert load_config(path, cache).threshold == 7.0 and cache.recorded == []
