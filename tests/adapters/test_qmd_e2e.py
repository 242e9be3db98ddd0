"""Real `qmd search` end to end: a small collection built with the real qmd CLI in a tmp dir,
queried through the router (rules -> plan -> the qmd adapter -> envelope).

Skips only when qmd/Node 22 are genuinely not installed (CI installs them with
.ci/setup.d/20-qmd.sh, so these run there)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection, index_lock
from memory_router.config.installed import Installed, load_installed
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import load_config
from memory_router.routing.router import Router

from ..support.qmd import needs_qmd

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)


NOTES = {
    "notes/raft-consensus.md": (
        "# Raft Consensus\n\nRaft is a consensus algorithm for managing a replicated log. A leader is elected\n"
        "and followers replicate its entries. Leader election uses randomized timeouts.\n"
    ),
    "notes/meeting-2024-03-01.md": (
        "# Meeting 2024-03-01\n\nDiscussed the quarterly roadmap. Alice owns the database migration; Bob will\n"
        "benchmark the new consensus layer. Deadline for the migration is April 15.\n"
    ),
    "src/auth/token.ts": (
        "// parseAuthToken: verify a JWT access token and return its claims.\n"
        "export function parseAuthToken(header: string): Claims {\n  return verify(header);\n}\n"
    ),
    "src/models/order.ts": (
        "// Order model: orders reference the user and a payment.\nexport class Order { id = ''; }\n"
    ),
    "src/models/user.ts": (
        "// UserService resolves users by id.\nexport class UserService { findById(id: string) { return id; } }\n"
    ),
    "docs/guide.md": "# Guide\n\nThe auth middleware calls parseAuthToken first.\n",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("qmdcorpus")
    source = base / "ws"
    for rel, text in NOTES.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(text)
    state = base / "state"
    settings = {
        "index_path": str(base / "idx" / "index.sqlite"),
        "config_dir": str(base / "idx" / "cfg"),
        "collections": ["kb"],
    }
    backend = QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, settings), BackendContext(state_dir=state))
    build_collection(backend.transport(), source, "kb", "**/*.{md,ts}", base / "idx" / "index.lock")
    return {"base": base, "state": state, "settings": settings}


def make_router(corpus: dict, tmp_path: Path) -> tuple[Router, Installed]:
    config = json.loads(packaged_config().read_text())
    config["backends"]["qmd"] = {"type": "qmd", **corpus["settings"]}
    config["backends"]["totalrecall"]["root"] = str(tmp_path / "empty-memory")
    (tmp_path / "empty-memory").mkdir(exist_ok=True)
    cfg = tmp_path / "router-config.json"
    cfg.write_text(json.dumps(config))
    installed = tmp_path / "backends.json"
    installed.write_text(
        json.dumps({"tier": "starter", "backends": {"qmd": {"status": "ready"}, "totalrecall": {"status": "ready"}}})
    )
    router = Router(load_config(cfg), context=BackendContext(state_dir=corpus["state"], cwd=tmp_path))
    return router, load_installed(installed)


def backend_for(corpus: dict, **overrides: object) -> QmdBackend:
    settings = _settings.validate(qmd_adapter.Settings, {**corpus["settings"], **overrides})
    return QmdBackend("qmd", settings, BackendContext(state_dir=corpus["state"]))


@needs_qmd
def test_symbol_query_is_answered_by_real_qmd_search(corpus: dict, tmp_path: Path) -> None:
    router, installed = make_router(corpus, tmp_path)
    env = asyncio.run(router.route("find the function parseAuthToken", installed))
    assert env.rule is not None and env.rule["number"] == 1
    assert (env.routed_to, env.routed_mode, env.status) == ("qmd", "search", "success")
    first = env.attempts[0]
    assert first["query_sent"] == "parseAuthToken"  # trigger words and stopwords dropped
    top = env.results[0]
    assert top.path == "src/auth/token.ts" and top.collection == "kb"
    assert top.relevance >= 0.6 and isinstance(top.line, int)
    assert "@@" not in top.content and "parseAuthToken" in top.content
    assert top.docid.startswith("#") and top.uri == "qmd://kb/src/auth/token.ts"
    assert {r.path for r in env.results} == {"src/auth/token.ts", "docs/guide.md"}


@needs_qmd
def test_path_glob_query_finds_files_under_that_path(corpus: dict, tmp_path: Path) -> None:
    router, installed = make_router(corpus, tmp_path)
    env = asyncio.run(router.route("search in src/models/*.ts", installed))
    assert env.rule is not None and env.rule["number"] == 6 and env.routed_to == "qmd"
    assert env.attempts[0]["query_sent"] == '"src models" ts'
    assert {r.path for r in env.results} == {"src/models/order.ts", "src/models/user.ts"}


@needs_qmd
def test_natural_language_query_is_relaxed_until_qmd_finds_something(corpus: dict) -> None:
    backend = backend_for(corpus)
    response = asyncio.run(backend.search(BackendRequest("raft consensus zeppelin", mode="search")))
    # "raft consensus zeppelin" (ANDed) matches nothing; a relaxed form does, with lower relevance.
    assert response.status == "success"
    assert response.query_sent in ("consensus", "raft consensus", "consensus zeppelin")
    assert "zeppelin" not in response.query_sent
    assert response.results[0].path == "notes/raft-consensus.md"
    assert response.normalized_relevance < 1.0


@needs_qmd
def test_nothing_found_is_empty_with_the_last_form_reported(corpus: dict) -> None:
    response = asyncio.run(backend_for(corpus).search(BackendRequest("zeppelin quasar", mode="search")))
    assert response.status == "empty" and response.results == ()
    assert response.query_sent == "zeppelin"  # the most relaxed form tried: the longest word


@needs_qmd
def test_query_starting_with_a_dash_is_not_read_as_a_flag(corpus: dict) -> None:
    response = asyncio.run(backend_for(corpus).search(BackendRequest("-consensus", mode="search")))
    assert response.status == "success"
    assert response.query_sent == "consensus"


@needs_qmd
def test_unknown_collection_is_a_precise_backend_error(corpus: dict) -> None:
    response = asyncio.run(
        backend_for(corpus, collections=("nope",)).search(BackendRequest("consensus", mode="search"))
    )
    assert response.status == "error" and response.error_code == "BACKEND_ERROR"
    assert response.error_message is not None
    assert "Collection not found: nope" in response.error_message
    assert response.error_message is not None
    assert "backends.qmd.collections" in response.error_message


@needs_qmd
def test_stray_project_qmd_folder_cannot_take_over(corpus: dict, tmp_path: Path) -> None:
    # A project-local .qmd/ above qmd's working directory would replace the configured index
    # (qmd walks up from its cwd). The adapter always passes --index, so it is ignored.
    project = tmp_path / "project"
    (project / ".qmd").mkdir(parents=True)
    (project / ".qmd" / "index.yml").write_text("collections: {}\n")
    backend = QmdBackend(
        "qmd", _settings.validate(qmd_adapter.Settings, corpus["settings"]), BackendContext(state_dir=project / "state")
    )
    response = asyncio.run(backend.search(BackendRequest("parseAuthToken", mode="search")))
    assert response.status == "success"
    assert not (project / ".qmd" / "index.sqlite").exists()


@needs_qmd
def test_probe_reports_versions_and_modes(corpus: dict) -> None:
    probe = backend_for(corpus).probe()
    assert probe.ok
    assert probe.facts["node_version"].startswith("v") and int(probe.facts["node_version"][1:].split(".")[0]) >= 22
    assert "search" in probe.facts["modes_ready"]
    assert probe.facts["qmd_version"] and probe.facts["index_exists"] is True


@needs_qmd
def test_probe_says_when_the_index_is_not_built(tmp_path: Path) -> None:
    probe = QmdBackend(
        "qmd", qmd_adapter.Settings(index_path=str(tmp_path / "none.sqlite")), BackendContext(state_dir=tmp_path)
    ).probe()
    assert probe.ok and probe.facts["index_exists"] is False
    assert "no index at" in probe.detail and "qmd collection add" in probe.detail


@needs_qmd
def test_demo_setup_indexes_the_demo_workspace(tmp_path: Path) -> None:
    import shutil

    from memory_router.demo import WORKSPACE

    ws = tmp_path / "ws"
    shutil.copytree(WORKSPACE, ws)
    settings = qmd_adapter.demo_setup(ws, tmp_path / "state")
    assert settings["collections"] == ["demo"]
    again = qmd_adapter.demo_setup(ws, tmp_path / "state")  # re-run: `qmd update`, not a second add
    assert again == settings
    backend = QmdBackend(
        "qmd", _settings.validate(qmd_adapter.Settings, settings), BackendContext(state_dir=tmp_path / "state")
    )
    response = asyncio.run(
        backend.search(
            BackendRequest("find all usages of UserService", mode="search", signal=r"\bfind all usages of\b")
        )
    )
    assert response.status == "success" and response.query_sent == "UserService"
    assert any(r.path == "src/models/user.ts" for r in response.results)


@needs_qmd
def test_index_writers_wait_for_the_lock(tmp_path: Path) -> None:
    # Two concurrent `qmd update`s crash (SQLITE_CONSTRAINT_PRIMARYKEY); writers take a file lock.
    import threading

    source = tmp_path / "src"
    source.mkdir()
    (source / "a.md").write_text("# A\n\nalpha bravo\n")
    settings = {"index_path": str(tmp_path / "i.sqlite"), "config_dir": str(tmp_path / "cfg")}
    backend = QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, settings), BackendContext(state_dir=tmp_path))
    lock = tmp_path / "index.lock"
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            build_collection(backend.transport(), source, "kb", "**/*.md", lock)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    with index_lock(lock):
        thread = threading.Thread(target=writer)
        thread.start()
        assert not done.wait(1.0), "the writer ran while another held the index lock"
    assert done.wait(30) and not errors
    thread.join()
    response = asyncio.run(backend.search(BackendRequest("alpha", mode="search")))
    assert response.status == "success"


@needs_qmd
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.sampled_from(
            [
                "consensus",
                "parseAuthToken",
                "src/auth",
                "token.ts",
                "a_b",
                "DEC-1",
                "v2.8",
                '"',
                "'",
                "`",
                "-",
                "--",
                "*",
                "/",
                ".",
                ":",
                "(",
                "é",
                "日本",
                "$x",
                " ",
                " ",
                "AND",
                "OR",
                "NOT",
                "NEAR",
                "^",
                "+",
            ]
        ),
        min_size=1,
        max_size=8,
    ).map("".join)
)
def test_any_query_gives_an_answer_never_a_qmd_error(corpus: dict, query: str) -> None:
    # Whatever an agent types, the rewritten query is valid qmd syntax: success or empty.
    response = asyncio.run(backend_for(corpus).search(BackendRequest(query, mode="search")))
    assert response.status in ("success", "empty"), (query, response.query_sent, response.error_message)


@needs_qmd
def test_a_scoped_query_searches_only_the_agent_s_collections_and_the_shared_ones(tmp_path: Path) -> None:
    """One qmd index, three collections: alice's notes, bob's notes, and a team collection shared
    on purpose (``shared_collections``). Each agent finds its own and the shared one, never the
    other's; an agent with no collection gets only the shared one; an unscoped query all three."""
    from memory_router.core.scope import parse_scope

    notes = {
        "alice-notes": "# Alice\n\nThe vault code for the house sale is 4711-alpha.\n",
        "bob-notes": "# Bob\n\nThe vault code for the garage is 9090-beta.\n",
        "team": "# Team\n\nThe vault code policy: rotate every quarter.\n",
    }
    settings = {
        "index_path": str(tmp_path / "idx" / "index.sqlite"),
        "config_dir": str(tmp_path / "idx" / "cfg"),
        "collections": list(notes),
        "agent_collections": {"alice": ["alice-notes"], "bob": ["bob-notes"]},
        "shared_collections": ["team"],
    }
    backend = QmdBackend(
        "qmd", _settings.validate(qmd_adapter.Settings, settings), BackendContext(state_dir=tmp_path / "state")
    )
    for name, text in notes.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "vault.md").write_text(text)
        build_collection(backend.transport(), tmp_path / name, name, "**/*.md", tmp_path / "idx" / "lock")

    def found(agent: str | None) -> set[str]:
        request = BackendRequest("vault code", mode="search", scope=parse_scope(agent) if agent else None)
        response = asyncio.run(backend.search(request))
        assert response.status in ("success", "empty"), response.error_message
        return {r.collection for r in response.results}

    assert found("alice") == {"alice-notes", "team"}
    assert found("bob") == {"bob-notes", "team"}
    assert found("carol") == {"team"}  # listed nowhere: the shared collection only, never everyone's
    assert found(None) == set(notes)
