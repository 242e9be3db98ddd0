"""The Cognee adapter against a REAL Cognee 1.6.5 API server, queried through the router's CLI.

The session fixture (``tests/support/cognee/server.py``) runs Cognee from its own venv
(``.tools/cognee-venv``, installed by ``.ci/setup.d/40-cognee.sh``) on 127.0.0.1 with access
control on, after loading a small architecture graph with Cognee's own ``add_data_points`` (no
LLM). Two stand-ins are unavoidable here and are fakes: the embeddings endpoint (deterministic
hashed bag-of-words vectors, because no embedding model can be downloaded on this machine) and
the LLM endpoint (a socket that never answers, which is what makes a full completion stall).

Skipped only when the Cognee venv is absent. If the server cannot start, the tests FAIL with
its log. One command: ``python3 -m pytest -q tests/adapters/test_cognee_server.py``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pytest

from memory_router.backends.common import settings as _settings
from memory_router.config.paths import packaged_config

from ..support.cognee import cognee_server as cognee_harness
from ..support.cognee import relation_questions as rq

if TYPE_CHECKING:
    from memory_router.backends.cognee.adapter import CogneeBackend

PYTHON = cognee_harness.cognee_python()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PYTHON is None,
        reason="the Cognee venv (.tools/cognee-venv) is not installed: run `bash .ci/setup.d/40-cognee.sh`",
    ),
]

POSTGRES_DEPENDENTS = {"AuthService", "OrderService", "BillingWorker"}


@pytest.fixture(scope="session")
def servers():
    """Two real servers, started in parallel: access control on (the default) and off. The
    second also keeps Cognee's default of refusing CYPHER searches."""
    from concurrent.futures import ThreadPoolExecutor

    assert PYTHON is not None  # the module is skipped without it
    with ThreadPoolExecutor(2) as pool:
        futures = {
            ac: pool.submit(cognee_harness.start, PYTHON, access_control=ac, allow_cypher=ac) for ac in (True, False)
        }
        started, failures = {}, []
        for ac, future in futures.items():
            try:
                started[ac] = future.result()
            except cognee_harness.ServerStartError as exc:
                failures.append(f"access_control={ac}: {exc}")
    if failures:
        for srv in started.values():
            srv.stop()
        pytest.fail("the real Cognee server did not come up: " + "\n".join(failures), pytrace=False)
    for ac, srv in started.items():
        print(f"\ncognee test server (access control {'on' if ac else 'off'}): {srv.timings}", file=sys.stderr)
    yield started
    for srv in started.values():
        srv.stop()
        shutil.rmtree(srv.root, ignore_errors=True)


@pytest.fixture(scope="session")
def cognee(servers):
    return servers[True]


@pytest.fixture(scope="session")
def cognee_open(servers):
    """Access control off: no auth, and answers are a bare list (no per-dataset objects)."""
    return servers[False]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A Total Recall memory for the fallback to land on."""
    reg = tmp_path / "ws" / "memory" / "registers"
    reg.mkdir(parents=True)
    (reg / "tech-stack.md").write_text(
        "# Tech stack\n\n- Postgres is the primary database; AuthService, OrderService and "
        "BillingWorker depend on Postgres.\n"
    )
    return tmp_path / "ws"


def write_setup(
    tmp_path: Path, workspace: Path, cognee_settings: dict | None = None, chain_mode: str | None = None
) -> tuple[Path, Path]:
    config = orjson.loads(packaged_config().read_bytes())
    # What Cognee answers, alone in the envelope: the spec's walk (the packaged "fill" would add
    # Total Recall's notes after the graph's answer; tests/unit/test_fallback_machine.py has that).
    config["strategy"] = "sequential"
    config["backends"]["cognee"] = {"type": "cognee", "datasets": ["arch"], **(cognee_settings or {})}
    if config["backends"]["cognee"]["datasets"] is None:
        del config["backends"]["cognee"]["datasets"]
    config["backends"]["totalrecall"] = {"type": "totalrecall", "root": str(workspace)}
    if chain_mode:
        rule = next(r for r in config["rules"] if r["id"] == "relationship")
        rule["chain"][0]["mode"] = chain_mode
    config_path = tmp_path / "router-config.json"
    config_path.write_bytes(orjson.dumps(config))
    # qmd is left out on purpose: the chain is then exactly cognee -> totalrecall, whatever the
    # qmd adapter does on this machine.
    backends_path = tmp_path / "backends.json"
    backends_path.write_bytes(
        orjson.dumps(
            {
                "tier": "pro",
                "backends": {
                    "cognee": {"status": "ready"},
                    "totalrecall": {"status": "ready"},
                    "qmd": {"status": "unavailable"},
                },
            }
        )
    )
    return config_path, backends_path


def route(
    tmp_path: Path, config: Path, backends: Path, query: str, env: dict[str, str], *extra: str
) -> tuple[dict, subprocess.CompletedProcess, str]:
    import os

    state = tmp_path / "state"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("COGNEE_")}
    full_env.update(env)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memory_router",
            "query",
            query,
            "--state-dir",
            str(state),
            "--config",
            str(config),
            "--backends-json",
            str(backends),
            *extra,
        ],
        capture_output=True,
        env=full_env,
        timeout=120,
    )
    assert proc.stdout, proc.stderr.decode()
    log = state / "router.log"
    return orjson.loads(proc.stdout), proc, log.read_text() if log.exists() else ""


def key_env(srv: cognee_harness.CogneeServer) -> dict[str, str]:
    return {"COGNEE_BASE_URL": srv.base_url, "COGNEE_API_KEY": srv.api_key}


def relationships(envelope: dict) -> list[tuple[str, str, str, float]]:
    return [
        (r["relationship"]["source"], r["relationship"]["relation"], r["relationship"]["target"], r["relevance"])
        for r in envelope["results"]
    ]


def assert_no_secret(srv: cognee_harness.CogneeServer, *texts: str) -> None:
    for text in texts:
        assert srv.api_key not in text
        assert srv.password not in text


def test_what_depends_on_postgres(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace)
    env, proc, log = route(tmp_path, config, backends, "what depends on Postgres", key_env(cognee))
    assert proc.returncode == 0
    assert env["rule"]["id"] == "relationship"
    assert env["fallback_chain"] == ["cognee", "totalrecall"]
    assert (env["status"], env["routed_to"], env["fallbacks_used"]) == ("success", "cognee", 0)
    rels = relationships(env)
    assert {(s, r, t) for s, r, t, _ in rels} == {(s, "depends_on", "Postgres") for s in POSTGRES_DEPENDENTS}
    assert all(rel == 1.0 for *_, rel in rels)
    assert env["normalized_relevance"] == 1.0
    # the node descriptions from the graph context come along
    assert env["results"][0]["nodes"]["Postgres"] == "Primary relational database."
    assert log == ""
    assert_no_secret(cognee, proc.stdout.decode(), proc.stderr.decode())


def test_how_does_apigateway_relate_to_authservice(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace)
    env, proc, _ = route(tmp_path, config, backends, "how does ApiGateway relate to AuthService", key_env(cognee))
    assert (env["status"], env["routed_to"]) == ("success", "cognee")
    rels = relationships(env)
    assert rels[0] == ("ApiGateway", "depends_on", "AuthService", 1.0)
    # every other result touches exactly one of the two components: half coverage
    assert rels[1:] and all(rel == 0.5 and ({s, t} & {"ApiGateway", "AuthService"}) for s, _, t, rel in rels[1:])


def test_cypher_mode_finds_the_same_edges(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace, chain_mode="cypher")
    env, _, _ = route(tmp_path, config, backends, "what depends on Postgres", key_env(cognee))
    assert (env["status"], env["routed_to"], env["routed_mode"]) == ("success", "cognee", "cypher")
    assert {(s, t) for s, _, t, _ in relationships(env)} == {(s, "Postgres") for s in POSTGRES_DEPENDENTS}
    assert env["attempts"][0]["query_sent"].startswith(
        "MATCH (a:Node)-[r]->(b:Node) WHERE lower(a.name) CONTAINS 'postgr'"
    )


def test_a_query_with_no_graph_match_is_empty_and_falls_through_quietly(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace)
    env, proc, log = route(
        tmp_path, config, backends, "how does the flux capacitor relate to the banana", key_env(cognee)
    )
    first = env["attempts"][0]
    # Cognee returns its nearest triplets anyway; none names a queried entity, so none is kept.
    assert (first["backend"], first["status"], first["result_count"]) == ("cognee", "empty", 0)
    assert env["routed_to"] != "cognee"
    assert log == ""  # empty is not an error: no FALLBACK line


def test_no_searchable_chunks_is_empty_not_an_error(cognee, tmp_path, workspace):
    # The test graph has no text chunks: Cognee answers 404 [NoDataError] for CHUNKS.
    config, backends = write_setup(tmp_path, workspace, chain_mode="chunks")
    env, _, log = route(tmp_path, config, backends, "what depends on Postgres", key_env(cognee))
    assert env["attempts"][0]["status"] == "empty"
    assert env["attempts"][0]["error_code"] is None
    assert log == ""


def test_chunks_mode_scores_by_distance(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace, {"datasets": ["runbooks"]}, chain_mode="chunks")
    env, _, _ = route(tmp_path, config, backends, "what depends on Postgres failover", key_env(cognee))
    first = env["attempts"][0]
    assert (first["backend"], first["mode"], first["status"]) == ("cognee", "chunks", "success")
    # relevance = 1 - cosine distance; chunks at distance >= 1 are dropped. With the FAKE hashed
    # embeddings the distances are large, so the best chunk is weak and the router moves on.
    assert first["result_count"] >= 1
    assert 0.0 < first["normalized_relevance"] < 1.0
    if not first["accepted"]:  # the router moved on, and returned the more relevant answer
        assert [a["backend"] for a in env["attempts"]] == ["cognee", "totalrecall"]
        best = max(env["attempts"], key=lambda a: a["normalized_relevance"] if a["status"] == "success" else -1)
        assert env["routed_to"] == best["backend"]


def test_lexical_mode_scores_by_coverage(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace, {"datasets": ["runbooks"]}, chain_mode="lexical")
    env, _, _ = route(tmp_path, config, backends, "what depends on Postgres failover", key_env(cognee))
    assert (env["status"], env["routed_to"], env["routed_mode"]) == ("success", "cognee", "lexical")
    best = env["results"][0]
    assert best["content"].startswith("Postgres failover: promote the replica")
    assert (best["relevance"], best["document_name"], best["dataset"]) == (1.0, "runbook.md", "runbooks")


def test_all_datasets_when_none_is_configured(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace, {"datasets": None})
    env, _, _ = route(tmp_path, config, backends, "what depends on Postgres", key_env(cognee))
    assert (env["status"], env["routed_to"]) == ("success", "cognee")
    strong = [r for r in env["results"] if r["relevance"] >= 0.4]
    assert {(r["relationship"]["source"], r["relationship"]["target"]) for r in strong} == {
        (s, "Postgres") for s in POSTGRES_DEPENDENTS
    }
    assert {r["dataset"] for r in strong} == {"arch"}
    # the runbook dataset's chunk that mentions Postgres comes along, weak (a structural edge
    # with Postgres at its source end: 0.35 for the wrong end x 0.6 for not a dependency)
    assert all(
        r["relationship"]["relation"] == "is_part_of" and r["relevance"] == 0.21
        for r in env["results"]
        if r["relevance"] < 0.4
    )


def test_access_control_off_answers_a_bare_list(cognee_open, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace)
    env, _, _ = route(tmp_path, config, backends, "what depends on Postgres", {"COGNEE_BASE_URL": cognee_open.base_url})
    assert (env["status"], env["routed_to"]) == ("success", "cognee")
    # One shared graph when access control is off: the runbook chunk's is_part_of edge shows
    # up too, weak (structural, and Postgres is at its source end).
    assert {(s, t) for s, _, t, rel in relationships(env) if rel == 1.0} == {
        (s, "Postgres") for s in POSTGRES_DEPENDENTS
    }
    assert all(rel == 0.21 and r == "is_part_of" for _, r, _, rel in relationships(env) if rel < 1.0)
    assert all("dataset" not in r for r in env["results"])  # no per-dataset wrapper to name it


def test_cognee_down_falls_back_to_totalrecall(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace)
    dead = f"http://127.0.0.1:{cognee_harness.free_port()}"
    env, proc, log = route(
        tmp_path,
        config,
        backends,
        "what depends on Postgres",
        {"COGNEE_BASE_URL": dead, "COGNEE_API_KEY": cognee.api_key},
    )
    assert proc.returncode == 0
    assert (env["status"], env["routed_to"], env["fallbacks_used"]) == ("success", "totalrecall", 1)
    assert env["fallback_chain"] == ["cognee", "totalrecall"]
    first = env["attempts"][0]
    assert (first["status"], first["error_code"]) == ("error", "BACKEND_UNAVAILABLE")
    assert "Connection refused" in first["error_message"] and dead in first["error_message"]
    [line] = log.splitlines()
    assert ' FALLBACK query="what depends on Postgres" backend=cognee error_code=BACKEND_UNAVAILABLE ' in line
    assert line.endswith(" next=totalrecall")
    assert_no_secret(cognee, proc.stdout.decode(), log)


def test_cognee_down_on_the_full_pro_chain_goes_on_to_qmd(cognee, tmp_path, workspace):
    # The spec's chain: cognee -> qmd/vsearch -> totalrecall. What qmd answers depends on this
    # machine (installed or not, an index or not); the cognee step and its log line do not.
    config, backends = write_setup(tmp_path, workspace)
    backends.write_bytes(
        orjson.dumps({"tier": "pro", "backends": {"cognee": "ready", "qmd": "ready", "totalrecall": "ready"}})
    )
    dead = f"http://127.0.0.1:{cognee_harness.free_port()}"
    env, proc, log = route(tmp_path, config, backends, "what depends on Postgres", {"COGNEE_BASE_URL": dead})
    assert env["fallback_chain"] == ["cognee", "qmd", "totalrecall"]
    assert (env["attempts"][0]["backend"], env["attempts"][0]["error_code"]) == ("cognee", "BACKEND_UNAVAILABLE")
    assert env["attempts"][1]["backend"] == "qmd" and env["attempts"][1]["mode"] == "vsearch"
    assert env["routed_to"] in ("qmd", "totalrecall") and env["status"] in ("success", "partial")
    first_line = log.splitlines()[0]
    assert " FALLBACK " in first_line and " backend=cognee error_code=BACKEND_UNAVAILABLE " in first_line
    assert first_line.endswith(" next=qmd")


def test_auth_with_a_wrong_key_is_a_clear_backend_error(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace)
    wrong = "wrong-" + cognee.api_key[:10]
    env, proc, log = route(
        tmp_path,
        config,
        backends,
        "what depends on Postgres",
        {"COGNEE_BASE_URL": cognee.base_url, "COGNEE_API_KEY": wrong},
    )
    first = env["attempts"][0]
    assert (first["status"], first["error_code"]) == ("error", "BACKEND_ERROR")
    assert "HTTP 401" in first["error_message"] and "COGNEE_API_KEY" in first["error_message"]
    assert env["routed_to"] == "totalrecall"
    assert "backend=cognee error_code=BACKEND_ERROR" in log and "COGNEE_API_KEY" in log
    for text in (proc.stdout.decode(), proc.stderr.decode(), log):
        assert wrong not in text
    assert_no_secret(cognee, proc.stdout.decode(), log)


def test_no_credentials_on_an_auth_server_says_how_to_configure_auth(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace)
    env, _, _ = route(tmp_path, config, backends, "what depends on Postgres", {"COGNEE_BASE_URL": cognee.base_url})
    message = env["attempts"][0]["error_message"]
    assert "HTTP 401" in message and "ENABLE_BACKEND_ACCESS_CONTROL=false" in message


def test_login_with_username_and_password_gets_a_bearer_token(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace)
    env, proc, log = route(
        tmp_path,
        config,
        backends,
        "what depends on Postgres",
        {
            "COGNEE_BASE_URL": cognee.base_url,
            "COGNEE_USERNAME": cognee_harness.USER,
            "COGNEE_PASSWORD": cognee.password,
        },
    )
    assert (env["status"], env["routed_to"]) == ("success", "cognee")
    assert {s for s, *_ in relationships(env)} == POSTGRES_DEPENDENTS
    assert_no_secret(cognee, proc.stdout.decode(), log)


def test_an_expired_bearer_token_is_renewed_once(cognee):
    # The daemon keeps a backend (and its token) for hours; Cognee's JWT lives an hour.
    import asyncio

    from memory_router.backends.base import BackendRequest
    from memory_router.backends.cognee import adapter

    backend = adapter.CogneeBackend(
        "cognee",
        adapter.Settings(datasets=("arch",)),
        {
            "COGNEE_BASE_URL": cognee.base_url,
            "COGNEE_USERNAME": cognee_harness.USER,
            "COGNEE_PASSWORD": cognee.password,
        },
    )
    backend._token = "a.stale.token"
    response = asyncio.run(backend.search(BackendRequest("what depends on Postgres")))
    assert (response.status, response.result_count) == ("success", 3)
    assert backend._token not in (None, "a.stale.token")


def test_wrong_password_is_a_backend_error_without_the_password(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace)
    env, proc, log = route(
        tmp_path,
        config,
        backends,
        "what depends on Postgres",
        {"COGNEE_BASE_URL": cognee.base_url, "COGNEE_USERNAME": cognee_harness.USER, "COGNEE_PASSWORD": "not-it-1234"},
    )
    first = env["attempts"][0]
    assert first["error_code"] == "BACKEND_ERROR" and "login" in first["error_message"]
    assert "not-it-1234" not in proc.stdout.decode() + log


def test_unknown_dataset_reports_cognees_detail(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace, {"datasets": ["no-such-dataset"]})
    env, _, log = route(tmp_path, config, backends, "what depends on Postgres", key_env(cognee))
    first = env["attempts"][0]
    assert first["error_code"] == "BACKEND_ERROR"
    assert "HTTP 404" in first["error_message"] and "DatasetNotFoundError" in first["error_message"]
    assert "backends.cognee.datasets" in first["error_message"]
    assert "DatasetNotFoundError" in log


def test_a_scoped_query_searches_only_the_agent_s_datasets(cognee, tmp_path, workspace):
    """alice's dataset is the architecture graph, bob's the runbooks: a relationship question finds
    the Postgres dependents for alice only; an agent with no dataset searches nothing of anybody's
    (empty, with the reason, and the chain goes on); a dataset shared on purpose reaches bob."""
    question = "what depends on Postgres"
    scoped = {"datasets": None, "agent_datasets": {"alice": ["arch"], "bob": ["runbooks"]}}
    config, backends = write_setup(tmp_path, workspace, scoped)

    def ask(agent: str, config: Path = config) -> dict:
        return route(tmp_path, config, backends, question, key_env(cognee), "--agent", agent)[0]

    alice = ask("alice")
    assert alice["routed_to"] == "cognee" and {r.get("dataset") for r in alice["results"]} == {"arch"}
    assert {s for s, _, t, rel in relationships(alice) if rel >= 0.4 and t == "Postgres"} == POSTGRES_DEPENDENTS
    bob = ask("bob")
    assert bob["attempts"][0]["status"] in ("success", "empty"), bob["attempts"][0]  # his dataset was searched
    assert not {r.get("dataset") for r in bob["results"] if r["source"] == "cognee"} - {"runbooks"}
    carol = ask("carol")
    first = carol["attempts"][0]
    assert (first["backend"], first["status"]) == ("cognee", "empty") and "agent carol" in first["note"]
    assert all(r["source"] != "cognee" for r in carol["results"])
    (tmp_path / "shared").mkdir()
    shared, _ = write_setup(tmp_path / "shared", workspace, {**scoped, "shared_datasets": ["arch"]})
    bob_shared = ask("bob", shared)
    edges = {
        r["relationship"]["source"] for r in bob_shared["results"] if "relationship" in r and r["relevance"] >= 0.4
    }
    assert edges >= POSTGRES_DEPENDENTS and {r.get("dataset") for r in bob_shared["results"]} >= {"arch"}


def test_backends_command_probes_health(cognee, tmp_path, workspace):
    import os

    config, backends = write_setup(tmp_path, workspace)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memory_router",
            "backends",
            "--json",
            "--config",
            str(config),
            "--backends-json",
            str(backends),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        env={**os.environ, **key_env(cognee)},
        timeout=60,
    )
    rows = {r["backend"]: r for r in orjson.loads(proc.stdout)["backends"]}
    assert rows["cognee"]["runs_here"] is True
    assert rows["cognee"]["facts"]["version"] == "1.6.5"
    assert "auth: api key" in rows["cognee"]["detail"]
    assert cognee.api_key not in proc.stdout.decode()


def test_a_stalled_completion_is_cut_by_the_router_timeout(cognee, tmp_path, workspace):
    # A full GRAPH_COMPLETION needs the LLM, whose endpoint here accepts and never answers:
    # Cognee itself would retry for minutes. The router must cut it at its timeout.
    config, backends = write_setup(tmp_path, workspace, chain_mode="completion")
    started = time.monotonic()
    env, proc, log = route(
        tmp_path, config, backends, "what depends on Postgres", key_env(cognee), "--timeout-ms", "1500"
    )
    elapsed = time.monotonic() - started
    first = env["attempts"][0]
    assert (first["backend"], first["mode"], first["error_code"]) == ("cognee", "completion", "QUERY_TIMEOUT")
    assert 1500 <= first["duration_ms"] < 3000
    assert env["routed_to"] == "totalrecall"
    [line] = log.splitlines()
    assert ' TIMEOUT query="what depends on Postgres" backend=cognee duration_ms=' in line
    assert line.endswith(" next=totalrecall")
    assert elapsed < 15  # the CLI did not wait for Cognee's LLM retries


# --------------------------------------------------------------------------- relationship answers
# The "services" graph (tests/support/cognee/load_graph.py): 16 entities, typed relations
# (calls, depends_on, owns, publishes_to, reads_from), Cognee's is_a and contains edges.


def services_backend(srv, **settings):
    from memory_router.backends.cognee import adapter

    env = {"COGNEE_BASE_URL": srv.base_url, **({"COGNEE_API_KEY": srv.api_key} if srv.api_key else {})}
    return adapter.CogneeBackend(
        "cognee", _settings.validate(adapter.Settings, {"datasets": ["services"], **settings}), env
    )


def ask(backend: CogneeBackend, query: str, mode: str = "graph") -> list[dict]:
    import asyncio

    from memory_router.backends.base import BackendRequest

    # A generous budget: these tests check what is found, and 2 shared CPUs under load can make
    # each follow-up search take a second (bench/cognee_relations.py measures at the default 5 s).
    response = asyncio.run(backend.search(BackendRequest(query, mode, timeout_s=20.0)))
    assert response.status in ("success", "empty"), response.error_message
    return [r.as_dict() for r in response.results]


@pytest.mark.parametrize("mode", ["graph", "cypher"])
@pytest.mark.parametrize("q", rq.EDGE_QUESTIONS, ids=lambda q: q.query)
def test_the_right_edge_is_first(cognee, q, mode):
    results = ask(services_backend(cognee), q.query, mode)
    assert results and rq.edge_of(results[0]) in q.best, [r["content"] for r in results[:3]]
    assert results[0]["relevance"] == 1.0


@pytest.mark.parametrize("paths", ["auto", "expand"])
@pytest.mark.parametrize("q", rq.PATH_QUESTIONS, ids=lambda q: q.query)
def test_a_path_question_gets_the_whole_path_first(cognee, q, paths):
    results = ask(services_backend(cognee, paths=paths), q.query)
    assert rq.path_of(results[0]) == q.nodes, [r["content"] for r in results[:3]]
    assert results[0]["found_by"] == {"auto": "cypher", "expand": "expand"}[paths]
    assert results[0]["relevance"] >= 0.75 and len(results[0]["path"]) == len(q.nodes) - 1


@pytest.mark.parametrize("q", rq.PATH_QUESTIONS, ids=lambda q: q.query)
def test_a_server_that_refuses_cypher_gets_paths_by_expansion(cognee_open, q):
    backend = services_backend(cognee_open)
    results = ask(backend, q.query)
    assert backend._cypher_refused  # it asked once, Cognee said no (its default)
    assert rq.path_of(results[0]) == q.nodes, [r["content"] for r in results[:3]]
    assert results[0]["found_by"] == "expand"


@pytest.mark.parametrize("q", rq.UNKNOWN_QUESTIONS, ids=lambda q: q.query)
def test_an_unknown_entity_is_never_a_strong_answer(cognee, q):
    results = ask(services_backend(cognee), q.query)
    assert all(r["relevance"] < 0.4 for r in results)


def test_relation_type_through_the_cli(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace, {"datasets": ["services"]})
    env, _, _ = route(tmp_path, config, backends, "what depends on the billing database", key_env(cognee))
    assert (env["status"], env["routed_to"]) == ("success", "cognee")
    rels = relationships(env)
    assert {(s, r, t) for s, r, t, rel in rels if rel == 1.0} == {
        (s, "depends_on", "BillingDatabase") for s in ("BillingService", "LedgerService", "PaymentService")
    }
    assert ("PaymentsTeam", "owns", "BillingDatabase", 0.6) in rels  # right entity, another relation


def test_direction_through_the_cli(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace, {"datasets": ["services"]})
    env, _, _ = route(tmp_path, config, backends, "dependencies of BillingService", key_env(cognee))
    rels = relationships(env)
    assert rels[0] == ("BillingService", "depends_on", "BillingDatabase", 1.0)
    incoming = [rel for s, _, t, rel in rels if t == "BillingService" and s != "BillingService"]
    assert incoming and all(rel < 0.4 for rel in incoming)  # what depends on it: the wrong way round


def test_call_chain_through_the_cli_is_one_result_in_order(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace, {"datasets": ["services"]})
    query = "trace the call chain from the web gateway to the ledger"
    env, _, _ = route(tmp_path, config, backends, query, key_env(cognee))
    assert (env["rule"]["id"], env["routed_to"]) == ("relationship", "cognee")
    first = env["results"][0]
    assert first["content"] == (
        "WebGateway --[calls]--> CheckoutService --[calls]--> BillingService --[calls]--> LedgerService"
    )
    assert (first["relevance"], first["dataset"]) == (1.0, "services")
    assert first["path"][1] == {"source": "CheckoutService", "relation": "calls", "target": "BillingService"}


def test_cypher_mode_path_between(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace, {"datasets": ["services"]}, chain_mode="cypher")
    env, _, _ = route(tmp_path, config, backends, "path between CheckoutService and ShippingService", key_env(cognee))
    assert env["routed_mode"] == "cypher"
    assert env["results"][0]["content"] == (
        "CheckoutService --[publishes_to]--> OrderEventsTopic <--[reads_from]-- ShippingService"
    )


def test_a_half_known_question_falls_back(cognee, tmp_path, workspace):
    config, backends = write_setup(tmp_path, workspace, {"datasets": ["services"]})
    query = "how does CheckoutService relate to the FraudDetector"
    env, _, _ = route(tmp_path, config, backends, query, key_env(cognee))
    first = env["attempts"][0]
    assert (first["backend"], first["status"], first["accepted"]) == ("cognee", "success", False)
    assert first["normalized_relevance"] <= 0.35
    assert env["attempts"][1]["backend"] == "totalrecall"
