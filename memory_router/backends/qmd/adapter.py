"""QMD: the real ``qmd`` CLI (``@tobilu/qmd`` 2.8.x on Node >= 22) as a memory backend.

**Modes.** ``search`` -> ``qmd search`` (BM25), ``vsearch`` -> ``qmd vsearch`` (vectors),
``query`` -> ``qmd query --explain`` (hybrid + rerank). Every call is an argument list, options
first, then ``--``, then the query (a query starting with ``-`` is never read as a flag)::

    node .../dist/cli/qmd.js search --json -n 10 -c notes -- parseAuthToken

run through :mod:`.common.process` in its own session, so the router's timeout (task cancellation)
kills the whole process group: no qmd or node process outlives a query.

**Isolation.** A ``.qmd/index.yml`` in qmd's working directory or any parent replaces the
configured index and config (even with ``INDEX_PATH`` set; observed). So qmd runs from a
controlled directory (the state directory's ``qmd-cwd/``) *and* always gets ``--index NAME``
(``index``, qmd's default name, unless configured), which makes qmd skip that lookup. Setting
``working_dir`` without ``index`` is the way to use a project's ``.qmd/`` on purpose. ``index_path``,
``config_dir``, ``cache_dir`` (models live in ``<cache_dir>/qmd/models``) and ``index`` become
``INDEX_PATH``, ``QMD_CONFIG_DIR``, ``XDG_CACHE_HOME`` and ``--index``; unset ones keep qmd's
defaults (``~/.cache/qmd/index.sqlite``, ``~/.config/qmd/index.yml``), i.e. the user's own index.

**Keyword queries.** ``search`` sends a keyword form of the query and relaxes it when the strict
form finds nothing (see ``_qmd_keywords``); the form that answered is ``query_sent``.

**Relevance.** Per mode, documented in ``_qmd_parse``: search ``coverage * (0.6 + 0.4 *
score/best)``, vsearch ``(cosine - 0.3) / 0.5``, query the reranker's score (else the best
vector/BM25 evidence). 0.4 means "usable" as for every backend.

**Failing fast.** vsearch/query load GGUF models; when one is missing qmd retries the download
for ~12 minutes. The adapter checks the model cache first. The generate (query expansion) and
rerank models are optional: when one is absent the call skips it (a typed ``lex:``/``vec:``
document, ``--no-rerank``) and the attempt's ``note`` says so. A missing embedding model answers
``BACKEND_UNAVAILABLE`` with the fix (``qmd pull``) at once. With ``CI`` set qmd refuses model work ("LLM operations are
disabled in CI"); that, a missing qmd/Node, and an index without embeddings are
``BACKEND_UNAVAILABLE`` too; other failures are ``BACKEND_ERROR`` with qmd's stderr tail.

**Transports.** The backend talks to a :class:`Transport`: :class:`CliTransport` (a process per
call: the one-shot CLI), :class:`EngineTransport` (the warm engine of a long-lived router, see
``_qmd_engine``) or :class:`HttpTransport` (a running ``qmd mcp --http``, ``http_url``). Query
rewriting and scoring are the same over all three.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from memory_router.backends import BackendContext, DemoUnavailable
from memory_router.backends.base import (
    BACKEND_ERROR,
    BACKEND_UNAVAILABLE,
    BackendRequest,
    BackendResponse,
    Probe,
    Stopwatch,
)
from memory_router.backends.common.process import ExecutableNotFound, OutputTooLarge, run
from memory_router.backends.common.settings import Limits, settings_from_json
from memory_router.backends.qmd.engine import ENGINE_SCRIPT, EngineFailed, QmdEngine
from memory_router.backends.qmd.keywords import keyword_forms
from memory_router.backends.qmd.locate import (
    INSTALL_HINT,
    TOOLS,
    QmdCommand,
    QmdNotFound,
    configured_models,
    missing_models,
    models_dir,
    qmd_version,
    resolve_command,
)
from memory_router.backends.qmd.parse import (
    VSEARCH_FLOOR,
    CollectionFiles,
    QmdOutputError,
    definitions_first,
    parse_hits,
    to_results,
)
from memory_router.backends.qmd.refresh import Command, Refresher, freshness, index_lock_path
from memory_router.backends.qmd.refresh import Settings as RefreshSettings
from memory_router.config import paths
from memory_router.config.envvars import QMD
from memory_router.contract import say
from memory_router.core.frozen import Frozen
from memory_router.core.routerlog import RouterLog

ENV_VARS: frozenset[str] = QMD  # the environment variables it reads: memory_router.config.envvars
WARM_TIMEOUT_S = 300.0  # a start-up model load longer than this is reported as failed

MODES = frozenset({"search", "vsearch", "query"})
DEFAULT_MODE = "query"
CI_REFUSAL = "LLM operations are disabled in CI"
_NEEDS_EMBEDDINGS = re.compile(r"(\d+) documents? \((\d+)%\) need embeddings")


@dataclass(frozen=True, slots=True)
class Settings:
    """``backends.<name>`` in router-config.json for ``"type": "qmd"`` (all optional)."""

    __pydantic_config__ = {"extra": "forbid", "strict": True}

    qmd: str | None = None
    """qmd to run: its ``dist/cli/qmd.js``, the ``@tobilu/qmd`` package folder, or an executable."""
    node: str | None = None
    """Node >= 22 to run qmd.js with."""
    collections: tuple[str, ...] = ()
    """Collections to search (``-c`` each); empty = all collections of the index. Unscoped queries only."""
    agent_collections: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)  # a dict: not hashed
    """A query scoped to an OpenClaw agent (``--agent``, ``scope``) searches only these collections of
    that agent (by agent id), plus ``shared_collections``; an agent listed nowhere searches only the
    shared ones, and with none of either answers ``empty`` (never every collection)."""
    shared_collections: tuple[str, ...] = ()
    """Collections every agent's scoped queries also search: memory shared on purpose."""
    index: str | None = None
    """Named qmd index (``--index NAME``: ``<NAME>.sqlite`` / ``<NAME>.yml``)."""
    index_path: str | None = None
    """SQLite index file (``INDEX_PATH``)."""
    config_dir: str | None = None
    """Folder holding qmd's ``index.yml`` (``QMD_CONFIG_DIR``)."""
    cache_dir: str | None = None
    """``XDG_CACHE_HOME`` for qmd: its models are read from ``<cache_dir>/qmd/models``."""
    working_dir: str | None = None
    """Where qmd runs. Set it to a project to use that project's ``.qmd/`` index on purpose."""
    max_search_calls: Annotated[int, Limits(ge=1, le=8)] = 3
    """Keyword forms tried by ``search`` (strict, then relaxed) before answering empty."""
    query_expansion: bool = True
    """``query`` mode: let qmd expand the query with its 1.7B generate model (qmd's default). False
    sends a typed document instead (``lex: <keyword form>`` + ``vec: <query>``): still BM25 +
    vectors + rerank, but without the generate model - much faster on a CPU, one model fewer."""
    engine: Literal["auto", "off"] = "auto"
    """``auto``: a long-lived router (``serve``, ``serve --socket``, ``mcp``) answers through one
    warm qmd engine process that keeps the index and models loaded; ``off``: a ``qmd`` process per
    call everywhere. The one-shot CLI always runs ``qmd`` per call."""
    engine_warmup: bool = True
    """With the engine: start it and load the models at daemon start, in the background, so the
    first semantic query does not pay the load (3-5 s on a CPU); false: on the first qmd call."""
    engine_idle_s: Annotated[float, Limits(ge=0)] = 300.0
    """The engine unloads its models after this many idle seconds (0: never); the next semantic
    query loads them again."""
    vsearch_expansion: bool = False
    """Engine and ``http_url`` only: let ``vsearch`` also search qmd's expansions of the query
    (generate model, seconds per new query on a CPU). The ``qmd vsearch`` CLI always expands."""
    http_url: str | None = None
    """A running ``qmd mcp --http`` server (e.g. ``http://127.0.0.1:8181``) to answer instead of
    starting qmd. Its ``/query`` gives rank positions, not similarities: results count as weak
    (relevance <= 0.35), see docs/backends/qmd.md."""
    refresh: RefreshSettings = RefreshSettings()
    """In a long-lived router: watch the collections' folders and keep the index up to date
    (debounced ``qmd update``, then ``qmd embed``), see :mod:`.refresh`."""


def create(name: str, settings: Settings, context: BackendContext) -> QmdBackend:
    return QmdBackend(name, settings, context)


# --------------------------------------------------------------------------- transport


class SemanticPlan(Frozen):
    """How one vsearch/query call runs: the text ``sent`` (the question, or a typed ``lex:``/``vec:``
    document when qmd does not expand it), the models that must be on disk (``needs``, a key of
    ``_qmd_locate.MODES_NEED``: the embedding model, plus the generate model when expanding),
    whether qmd expands the query and reranks, and a ``note`` saying what was skipped and why
    (the attempt shows it)."""

    sent: str
    needs: str
    expand: bool
    rerank: bool
    note: str | None = None


class Answer(Frozen):
    """One qmd call's outcome: hits, or a failure already classified into a contract code."""

    hits: list[dict[str, Any]] | None
    error_code: str | None = None
    error_message: str | None = None
    stderr: str = ""
    rank_only: bool = False
    """The scores are rank positions (qmd's HTTP ``/query``), not similarities."""


class Transport(Protocol):
    """How a qmd search reaches qmd: a ``qmd`` process per call (:class:`CliTransport`), the
    daemon's warm engine (:class:`EngineTransport`) or a running ``qmd mcp --http``
    (:class:`HttpTransport`). ``query`` is the text to send (a keyword form for ``search``, a
    typed ``lex:``/``vec:`` document or the question for ``query``). ``expand`` and ``rerank``
    say whether qmd may use its generate and rerank models for this call (the backend decides
    from the models on disk; ``None``: the transport's own default)."""

    async def search(
        self,
        mode: str,
        query: str,
        limit: int,
        collections: Sequence[str],
        *,
        timeout_s: float | None = None,
        expand: bool | None = None,
        rerank: bool | None = None,
    ) -> Answer: ...


class CliTransport:
    def __init__(self, command: QmdCommand, *, env: Mapping[str, str], cwd: Path, index: str | None) -> None:
        self.command = command
        self.env = dict(env)
        self.cwd = cwd
        self.index = index

    def argv(self, subcommand: str, options: Sequence[str], query: str | None = None) -> list[str]:
        argv = [*self.command.argv_prefix]
        if self.index:
            argv += ["--index", self.index]
        argv += [subcommand, *options]
        if query is not None:
            argv += ["--", query]
        return argv

    @staticmethod
    def command_for(
        mode: str, query: str, limit: int, collections: Sequence[str], expand: bool | None, rerank: bool | None
    ) -> tuple[str, list[str], str]:
        """(qmd subcommand, options, query) for one call."""
        options = ["--json", "-n", str(limit)]
        for collection in collections:
            options += ["-c", collection]
        if mode == "vsearch" and expand is False:
            # `qmd vsearch` always expands the query (generate model). Without expansion: the same
            # vector search as a typed `vec:` query without reranking, scored by its cosine.
            return "query", [*options, "--explain", "--no-rerank"], f"vec: {vec_text(query)}"
        if mode == "query":
            options.append("--explain")
            if rerank is False:
                options.append("--no-rerank")  # else qmd would try to download the reranker
        return mode, options, query

    async def search(
        self,
        mode: str,
        query: str,
        limit: int,
        collections: Sequence[str],
        *,
        timeout_s: float | None = None,
        expand: bool | None = None,
        rerank: bool | None = None,
    ) -> Answer:
        subcommand, options, query = self.command_for(mode, query, limit, collections, expand, rerank)
        self.cwd.mkdir(parents=True, exist_ok=True)
        try:
            proc = await run(self.argv(subcommand, options, query), cwd=self.cwd, env=self.env)
        except ExecutableNotFound as exc:
            return Answer(None, BACKEND_UNAVAILABLE, f"cannot start qmd: {exc}. {INSTALL_HINT}")
        except OutputTooLarge as exc:
            return Answer(None, BACKEND_ERROR, f"qmd {mode}: {exc}")
        stderr = proc.stderr.decode("utf-8", "replace")
        if proc.returncode != 0:
            return Answer(None, *_classify_failure(mode, proc.returncode, stderr), stderr=stderr)
        try:
            hits = parse_hits(proc.stdout)
        except QmdOutputError as exc:
            return Answer(None, BACKEND_ERROR, f"qmd {mode}: {exc}", stderr=stderr)
        if subcommand != mode:
            hits = cosine_hits(hits)
        if not hits and mode != "search" and (m := _NEEDS_EMBEDDINGS.search(stderr)) and m.group(2) == "100":
            return Answer(
                None,
                BACKEND_UNAVAILABLE,
                f"qmd {mode}: the index has no embeddings yet ({m.group(1)} documents need them). "
                "Run `qmd embed` (needs the embedding model; `qmd pull` fetches it).",
                stderr=stderr,
            )
        return Answer(hits, stderr=stderr)


class EngineTransport:
    """qmd calls answered by the daemon's warm engine (:mod:`.qmd.engine`): the same qmd
    functions as the CLI, with the index and the models kept loaded between calls."""

    def __init__(
        self,
        engine: QmdEngine,
        *,
        index_file: Path,
        cwd: Path,
        expand_vsearch: bool,
        has_reranker: Callable[[], bool],
    ) -> None:
        self.engine = engine
        self.env = engine.env
        self.cwd = cwd
        self.index_file = index_file
        self.expand_vsearch = expand_vsearch
        self.has_reranker = has_reranker
        self._index_id: tuple[int, int] | None = None

    async def follow_index(self) -> str | None:
        """One ``stat`` per call: a missing index is reported (the engine would create an empty
        one), and an index replaced by a new file (a fresh ``qmd collection add`` after deleting
        it) restarts the engine, which still holds the old file open."""
        try:
            st = self.index_file.stat()
        except OSError:
            return (
                f"no qmd index at {self.index_file}. Create it with `qmd collection add <folder> --name <name>` "
                "(with the same INDEX_PATH/--index), or point backends.qmd.index_path in router-config.json at it."
            )
        identity, known = (st.st_dev, st.st_ino), self._index_id
        # Noted before the restart: concurrent calls that see the new file meanwhile go on to the
        # restarted engine instead of each closing it again.
        self._index_id = identity
        if known is not None and identity != known:
            await self.engine.aclose()
        return None

    async def search(
        self,
        mode: str,
        query: str,
        limit: int,
        collections: Sequence[str],
        *,
        timeout_s: float | None = None,
        expand: bool | None = None,
        rerank: bool | None = None,
    ) -> Answer:
        payload: dict[str, Any] = {"op": mode, "query": query, "limit": limit, "collections": list(collections)}
        if timeout_s:
            payload["deadline_ms"] = int(timeout_s * 1000)
        if mode == "vsearch":
            payload["expand"] = self.expand_vsearch if expand is None else expand
        elif mode == "query":
            payload["rerank"] = self.has_reranker() if rerank is None else rerank
            if (searches := typed_searches(query)) is not None:
                payload["searches"] = searches
        self.cwd.mkdir(parents=True, exist_ok=True)
        try:
            answer = await self.engine.request(payload, timeout_s)
        except EngineFailed as exc:
            code = BACKEND_UNAVAILABLE if exc.kind == "unavailable" else BACKEND_ERROR
            return Answer(None, code, f"qmd {mode}: {exc}")
        warnings = "\n".join(w for w in answer.get("warnings") or () if isinstance(w, str))
        if answer.get("ok") is True and isinstance(answer.get("hits"), list):
            return Answer([h for h in answer["hits"] if isinstance(h, dict)], stderr=warnings)
        return Answer(None, *_classify_engine_refusal(mode, answer), stderr=warnings)


class HttpTransport:
    """qmd calls answered by a running ``qmd mcp --http`` server (``POST /query``, typed searches).

    Its scores are RRF positions (``1/rank``, blended with the reranker when it ran), never a
    cosine or a BM25 strength, so answers are marked ``rank_only`` and scored as weak evidence."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    async def search(
        self,
        mode: str,
        query: str,
        limit: int,
        collections: Sequence[str],
        *,
        timeout_s: float | None = None,
        expand: bool | None = None,
        rerank: bool | None = None,
    ) -> Answer:
        import httpx

        searches = typed_searches(query) if mode == "query" else None
        if searches is None:
            searches = [{"type": "vec" if mode == "vsearch" else "lex", "query": query}]
        body: dict[str, Any] = {"searches": searches, "limit": limit, "rerank": mode == "query"}
        if collections:
            body["collections"] = list(collections)
        shown = _public_url(self.url)
        try:
            async with httpx.AsyncClient(timeout=timeout_s or 5.0, trust_env=False) as client:
                response = await client.post(f"{self.url}/query", json=body)
        except httpx.HTTPError as exc:
            return Answer(
                None,
                BACKEND_UNAVAILABLE,
                f"qmd {mode}: no answer from the qmd server at {shown} ({type(exc).__name__}: {exc}). "
                "Start it with `qmd mcp --http`, or unset backends.qmd.http_url to let memory-router run qmd.",
            )
        if response.status_code != 200:
            return Answer(
                None,
                BACKEND_ERROR,
                f"qmd {mode}: the qmd server at {shown} answered HTTP {response.status_code}: {response.text[:200]!r}",
            )
        try:
            hits = parse_hits(response.content)
        except QmdOutputError as exc:
            return Answer(None, BACKEND_ERROR, f"qmd {mode} ({shown}): {exc}")
        return Answer(hits, rank_only=True)


def typed_searches(document: str) -> list[dict[str, str]] | None:
    """``lex: a b\nvec: a b`` (what :func:`structured_query` writes) as qmd's typed searches;
    None for a plain question."""
    searches = []
    for line in document.split("\n"):
        kind, sep, text = line.partition(": ")
        if not sep or kind not in ("lex", "vec", "hyde") or not text.strip():
            return None
        searches.append({"type": kind, "query": text.strip()})
    return searches or None


def _public_url(url: str) -> str:
    """The URL without any ``user:password@`` part, for messages and logs."""
    return re.sub(r"//[^/@]*@", "//", url)


def _classify_engine_refusal(mode: str, answer: Mapping[str, Any]) -> tuple[str, str]:
    kind, message = answer.get("kind"), str(answer.get("error") or "no message")[:400]
    if kind == "collection":
        return BACKEND_ERROR, (
            f"qmd {mode}: {message}. Check backends.qmd.collections in router-config.json (`qmd collection list`)."
        )
    if kind == "no_vectors":
        return BACKEND_UNAVAILABLE, (
            f"qmd {mode}: the index has no embeddings yet ({message}). "
            "Run `qmd embed` (needs the embedding model; `qmd pull` fetches it)."
        )
    if kind == "expired":
        return BACKEND_ERROR, f"qmd {mode}: the engine was busy until the call's timeout; nothing was searched"
    if CI_REFUSAL in message:
        return _classify_failure(mode, 1, message)
    if re.search(r"gguf|model|ENOENT|fetch failed|ENOTFOUND", message, re.IGNORECASE):
        return BACKEND_UNAVAILABLE, (
            f"qmd {mode}: the engine could not load a model: {message}. Check the model files "
            "(`qmd doctor`; `qmd pull` fetches the defaults) and index.yml's models block."
        )
    return BACKEND_ERROR, f"qmd {mode} (engine): {message}"


_VEC_UNSAFE = re.compile(r"(^|\s)-+(?=[\w\"])")


def vec_text(query: str) -> str:
    """The query as a ``vec:`` line: one line, without ``-term`` negations (qmd rejects those)."""
    return _VEC_UNSAFE.sub(r"\1", " ".join(query.split()))


def cosine_hits(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hits of a typed ``vec:`` query (``--explain``, no rerank) as ``qmd vsearch`` reports them:
    the score is the hit's best vector score (a cosine), hits under qmd's vsearch floor of 0.3 are
    dropped, best first."""
    out = []
    for hit in hits:
        explain = hit.get("explain")
        if not isinstance(explain, dict):
            continue
        scores = [v for v in explain.get("vectorScores") or () if isinstance(v, (int, float))]
        if scores and max(scores) >= VSEARCH_FLOOR:
            out.append({k: v for k, v in hit.items() if k != "explain"} | {"score": round(max(scores), 2)})
    return sorted(out, key=lambda h: -h["score"])


def structured_query(query: str, signal: str | None = None) -> str:
    """A typed query document for ``qmd query``: the strict keyword form as ``lex:`` (when there
    is one) and the whole query, on one line and without ``-term`` negations (qmd rejects those
    in ``vec:``), as ``vec:``."""
    vec = vec_text(query)
    forms = keyword_forms(query, signal, 1)
    lines = [f"lex: {forms[0].text}"] if forms else []
    return "\n".join([*lines, f"vec: {vec}"])


def really_reranked(hits: list[dict[str, Any]], stderr: str) -> bool:
    """Whether ``qmd query`` blended a real reranker score into these hits.

    Not when it skipped reranking (``rrf.weight`` 1.0), nor when the reranker could not load:
    qmd then prints "Reranker unavailable" (first time only; later calls hit its cache) and
    scores every chunk exactly 0.5 (observed with a stand-in model), which carries no signal.
    """
    explains = [h["explain"] for h in hits if isinstance(h.get("explain"), dict)]
    if not explains or "Reranker unavailable" in stderr:
        return False
    if all(isinstance(e.get("rrf"), dict) and e["rrf"].get("weight", 1.0) == 1.0 for e in explains):
        return False
    return not all(e.get("rerankScore") == 0.5 for e in explains)


def _tail(stderr: str, limit: int = 300) -> str:
    lines = [ln for ln in stderr.replace("\x1b[?25l", "").replace("\x1b[?25h", "").splitlines() if ln.strip()]
    text = " | ".join(lines[-4:])
    return text[-limit:]


def _classify_failure(mode: str, returncode: int, stderr: str) -> tuple[str, str]:
    if CI_REFUSAL in stderr:
        return BACKEND_UNAVAILABLE, (
            f"qmd {mode} refused: {CI_REFUSAL} (qmd does no model work while the CI environment variable "
            "is set). Unset CI for vsearch/query, or use search."
        )
    if "Collection not found" in stderr:
        return (
            BACKEND_ERROR,
            f"qmd {mode}: {_tail(stderr)}. "
            "Check backends.qmd.collections in router-config.json (`qmd collection list`).",
        )
    if returncode < 0 or returncode in (134, 139):
        return BACKEND_UNAVAILABLE, f"qmd {mode} crashed (exit {returncode}); is Node >= 22 in use? {INSTALL_HINT}"
    return BACKEND_ERROR, f"qmd {mode} exited with code {returncode}: {_tail(stderr) or 'no message'}"


# --------------------------------------------------------------------------- backend


class QmdBackend:
    def __init__(self, name: str, settings: Settings, context: BackendContext) -> None:
        self.name = name
        self.settings = settings
        self.context = context
        self._transport: CliTransport | None = None
        self._engine: EngineTransport | None = None
        self._http: HttpTransport | None = None
        self._warmup: dict[str, Any] = {}  # what warm() did, for runtime_facts
        self._refresher: Refresher | None | Literal[False] = None  # False: this instance keeps no index fresh

    # -- environment -------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = dict(self.context.environ)
        for key, value in (
            ("INDEX_PATH", self.settings.index_path),
            ("QMD_CONFIG_DIR", self.settings.config_dir),
            ("XDG_CACHE_HOME", self.settings.cache_dir),
        ):
            if value:
                env[key] = os.path.expanduser(value)
        env.setdefault("NO_COLOR", "1")
        return env

    def working_dir(self) -> Path:
        if self.settings.working_dir:
            return Path(os.path.expanduser(self.settings.working_dir))
        return self.context.state_dir / "qmd-cwd"

    def index_name(self) -> str | None:
        """``--index`` to pass. Always one (default ``index``, qmd's own default name): with an
        explicit ``--index`` qmd never looks for a project-local ``.qmd/`` - which it otherwise
        does in the working directory and every parent, even with INDEX_PATH set. Only a
        configured ``working_dir`` without ``index`` opts into that project's ``.qmd/``."""
        if self.settings.index:
            return self.settings.index
        return None if self.settings.working_dir else "index"

    def config_file(self, env: Mapping[str, str]) -> Path:
        """qmd's index.yml as qmd resolves it (QMD_CONFIG_DIR, XDG_CONFIG_HOME, ~/.config)."""
        name = f"{self.settings.index or 'index'}.yml"
        if env.get("QMD_CONFIG_DIR"):
            return Path(env["QMD_CONFIG_DIR"]) / name
        if env.get("XDG_CONFIG_HOME"):
            return Path(env["XDG_CONFIG_HOME"]) / "qmd" / name
        return Path(env.get("HOME") or os.path.expanduser("~")) / ".config" / "qmd" / name

    def index_file(self, env: Mapping[str, str]) -> Path | None:
        """qmd's SQLite index as qmd resolves it (INDEX_PATH, then the cache folder); None when
        a project-local ``.qmd/`` decides (``working_dir`` without ``index``)."""
        if env.get("INDEX_PATH"):
            return Path(env["INDEX_PATH"])
        name = self.index_name()
        if name is None:
            return None
        cache = (
            Path(env["XDG_CACHE_HOME"])
            if env.get("XDG_CACHE_HOME")
            else Path(env.get("HOME") or os.path.expanduser("~")) / ".cache"
        )
        return cache / "qmd" / f"{name}.sqlite"

    def transport(self) -> CliTransport:
        """The CLI transport; resolution (and the node version check) happens once."""
        if self._transport is None:
            env = self.env()
            command = resolve_command(self.settings.qmd, self.settings.node, env)
            self._transport = CliTransport(command, env=env, cwd=self.working_dir(), index=self.index_name())
        return self._transport

    def answering(self) -> Transport:
        """The transport queries go through: ``http_url``'s server, else the warm engine in a
        long-lived router (``engine: auto``), else a ``qmd`` process per call."""
        if self.settings.http_url:
            if self._http is None:
                self._http = HttpTransport(self.settings.http_url)
            return self._http
        cli = self.transport()
        if self._engine is None and self.settings.engine == "auto" and self.context.long_lived:
            self._engine = self._make_engine(cli)
        return self._engine or cli

    def _make_engine(self, cli: CliTransport) -> EngineTransport | None:
        """The warm engine for this backend, or None where it cannot run (qmd is not a qmd.js run
        by a Node we found, or a project-local ``.qmd/`` decides the index)."""
        index_file = self.index_file(cli.env)
        if cli.command.node is None or index_file is None:
            return None
        config = self.config_file(cli.env)
        init = {
            "dbPath": str(index_file),
            "configPath": str(config),
            "models": configured_models(config, cli.env),
            "idleMs": int(self.settings.engine_idle_s * 1000),
        }
        package = cli.command.qmd.parent.parent.parent
        argv = [str(cli.command.node), str(ENGINE_SCRIPT), str(package), json.dumps(init)]
        return EngineTransport(
            QmdEngine(argv, env=cli.env, cwd=cli.cwd),
            index_file=index_file,
            cwd=cli.cwd,
            expand_vsearch=self.settings.vsearch_expansion,
            # The engine reranks when the reranker is on disk, else ranks by retrieval evidence.
            has_reranker=lambda: not missing_models("rerank", config, cli.env),
        )

    async def aclose(self) -> None:
        """Stop the index refresh and the warm engine, if started."""
        if self._refresher:
            await self._refresher.aclose()
        if self._engine is not None:
            await self._engine.engine.aclose()

    # -- keeping the index fresh (WatchableBackend: the daemon's watcher drives it) --------

    def refresher(self) -> Refresher | None:
        """The index refresh of a long-lived router (``refresh.enabled``, a local qmd and an
        index file we can name), made on first use; None elsewhere (one-shot queries never write)."""
        if self._refresher is None:
            self._refresher = self._make_refresher() or False
        return self._refresher or None

    def _make_refresher(self) -> Refresher | None:
        if not (self.context.long_lived and self.settings.refresh.enabled) or self.settings.http_url:
            return None
        try:
            cli = self.transport()
        except QmdNotFound:
            return None
        index_file = self.index_file(cli.env)
        if index_file is None:
            return None
        config = self.config_file(cli.env)

        def embed() -> Command | None:
            if missing_models("embed", config, cli.env):
                return None  # no embedding model on disk: qmd embed would start a download
            env = embedding_env(cli.env)
            env.pop("CI", None)  # qmd refuses model work under CI; the model is a local file
            return Command(tuple(cli.argv("embed", [])), env, cli.cwd)

        log = RouterLog(paths.router_log(self.context.state_dir))

        def report(kind: str, message: str) -> None:
            say(message, who="memory-router serve")
            log.event(kind, message)

        return Refresher(
            self.name,
            self.settings.refresh,
            index_file=index_file,
            config_file=config,
            collections=self.watched_collections(),
            update=Command(tuple(cli.argv("update", [])), dict(cli.env), cli.cwd),
            embed=embed,
            report=report,
        )

    def watched_collections(self) -> tuple[str, ...]:
        """The collections whose files are this backend's memory: every collection it searches
        (``collections``, ``shared_collections``, each agent's); none named means all of the index."""
        named = [*self.settings.collections, *self.settings.shared_collections]
        for collections in self.settings.agent_collections.values():
            named.extend(collections)
        return tuple(dict.fromkeys(named))

    def watch_paths(self) -> list[tuple[Path, bool]]:
        refresher = self.refresher()
        return [(root, True) for root in refresher.roots()] if refresher else []

    def set_watched(self, watched: bool) -> None:
        if refresher := self.refresher():
            refresher.set_watched(watched)

    def invalidate(self) -> None:
        if refresher := self.refresher():
            refresher.note_change()

    def freshness_facts(self) -> dict[str, Any] | None:
        """Blocking: how fresh the index is (pending files, last update), for ``backends``."""
        try:
            env = self.transport().env
        except QmdNotFound:
            return None
        index_file = self.index_file(env)
        if index_file is None or self.settings.http_url:
            return None
        facts = freshness(index_file, self.config_file(env), self.watched_collections())
        return {**facts, "enabled": self.settings.refresh.enabled, "lock": str(index_lock_path(index_file))}

    async def runtime_facts(self) -> dict[str, Any]:
        """The warm engine's state (pid, RSS, loaded models), asked of the engine itself, and the
        start-up warm-up's (:meth:`warm`)."""
        if self.settings.http_url:
            return {"transport": "http", "url": _public_url(self.settings.http_url)}
        warmup = {"warmup": dict(self._warmup)} if self._warmup else {}
        refresher = self.refresher()
        fresh = {"refresh": await refresher.facts()} if refresher else {}
        if self._engine is None:
            return {
                "transport": "engine" if self.context.long_lived and self.settings.engine == "auto" else "cli",
                "engine": {"state": "not started"},
                **warmup,
                **fresh,
            }
        return {"transport": "engine", "engine": await self._engine.engine.refresh(), **warmup, **fresh}

    async def warm(self) -> None:
        """:class:`~.base.WarmableBackend`: in a long-lived router whose semantic modes can run
        (the embedding model is on disk, the index exists), start the warm engine and load the
        models the configured modes use - the embedding model, the reranker and, when expansion is
        on, the generate model, each only if its file is on disk - so the first semantic query does
        not pay the load (3-5 s on a CPU). The outcome (``warming``, ``ready`` with the load time
        per model, ``failed`` with why, or ``skipped`` with why) is in :meth:`runtime_facts`.
        Never raises; a keyword query meanwhile is answered as usual (the engine runs searches
        beside model work)."""
        if not self.settings.engine_warmup:
            return
        try:
            transport = self.answering()
        except QmdNotFound:
            return  # nothing to warm; queries say what is missing
        if not isinstance(transport, EngineTransport):
            return  # the CLI (a process per call) or a qmd server: nothing of ours to warm
        env = transport.env
        if missing := missing_models("embed", self.config_file(env), env):
            self._warmup = {"state": "skipped", "reason": f"no embedding model ({missing[0]})"}
            return
        if why := await transport.follow_index():
            self._warmup = {"state": "skipped", "reason": why}
            return
        transport.cwd.mkdir(parents=True, exist_ok=True)  # qmd's working directory (search() makes it too)
        absent = self.optional_models(env)
        expands = self.settings.query_expansion or self.settings.vsearch_expansion
        roles = ["embed"] + [r for r in ("rerank", "generate") if absent[r] is None and (r != "generate" or expands)]
        self._warmup = {"state": "warming", "models": roles}
        started = time.perf_counter()
        try:
            answer = await asyncio.wait_for(transport.engine.request({"op": "warm", "roles": roles}), WARM_TIMEOUT_S)
        except (EngineFailed, asyncio.TimeoutError) as exc:
            why = str(exc) or f"no answer within {WARM_TIMEOUT_S:.0f} s"
            self._warmup = {"state": "failed", "models": roles, "error": why[:300]}
            return
        seconds = round(time.perf_counter() - started, 2)
        if answer.get("ok") is True:
            loaded = answer.get("loaded_ms") if isinstance(answer.get("loaded_ms"), dict) else {}
            self._warmup = {"state": "ready", "models": roles, "seconds": seconds, "loaded_ms": loaded}
        else:
            error = str(answer.get("error") or "no message")[:300]
            self._warmup = {"state": "failed", "models": roles, "seconds": seconds, "error": error}

    # -- the seam ------------------------------------------------------------------------

    async def search(self, request: BackendRequest) -> BackendResponse:
        watch = Stopwatch()
        mode = request.mode or DEFAULT_MODE
        if mode not in MODES:
            return BackendResponse.failure(
                self.name, request.query, BACKEND_ERROR, f"qmd has no mode {mode!r}; use one of {sorted(MODES)}"
            )
        try:
            transport = self.answering()
        except QmdNotFound as exc:
            return BackendResponse.failure(
                self.name, request.query, BACKEND_UNAVAILABLE, str(exc), duration_ms=watch.ms
            )
        if isinstance(transport, EngineTransport) and (missing_index := await transport.follow_index()):
            return BackendResponse.failure(
                self.name, request.query, BACKEND_UNAVAILABLE, f"qmd {mode}: {missing_index}", duration_ms=watch.ms
            )
        if self._refresher and not self._refresher.watched and self._refresher.active:
            self._refresher.note_change()  # its watch stopped (a folder vanished): each query checks instead
        collections = self.collections_for(request)
        if collections is None:  # a scoped query whose agent has no collection: nothing of its here
            assert request.scope is not None
            note = (
                f"no qmd collection is configured for agent {request.scope.agent} "
                f"(backends.{self.name}.agent_collections / shared_collections): nothing searched"
            )
            return BackendResponse.from_results(self.name, request.query, [], duration_ms=watch.ms, note=note)
        if mode == "search":
            return await self._keyword_search(request, transport, watch)
        plan = self._semantic_plan(mode, request, transport)
        if isinstance(transport, (CliTransport, EngineTransport)):  # local qmd: its models must be on disk
            missing = missing_models(plan.needs, self.config_file(transport.env), transport.env)
            if missing:  # only the embedding model can be missing here: the optional ones were dropped
                return BackendResponse.failure(
                    self.name,
                    request.query,
                    BACKEND_UNAVAILABLE,
                    f"qmd {mode} needs GGUF models that are not in {models_dir(transport.env)} "
                    f"({'; '.join(missing)}); without them qmd would retry the download for ~12 minutes. "
                    "Run `qmd pull` (with network access), then `qmd embed`.",
                    duration_ms=watch.ms,
                    query_sent=plan.sent,
                )
        answer = await transport.search(
            mode,
            plan.sent,
            _fetch_limit(request),
            collections,
            timeout_s=request.timeout_s,
            expand=plan.expand,
            rerank=plan.rerank,
        )
        return self._respond(request, answer, mode, plan.sent, 1.0, watch, note=plan.note)

    def collections_for(self, request: BackendRequest) -> tuple[str, ...] | None:
        """The collections this call searches: the configured ``collections`` for an unscoped
        query (empty: all); for a query scoped to an agent, that agent's ``agent_collections``
        plus ``shared_collections``, and ``None`` when that is none at all (an empty list would
        mean every collection of the index: another agent's too)."""
        if request.scope is None:
            return self.settings.collections
        own = self.settings.agent_collections.get(request.scope.agent, ())
        chosen = tuple(dict.fromkeys((*own, *self.settings.shared_collections)))
        return chosen or None

    def optional_models(self, env: Mapping[str, str]) -> dict[str, str | None]:
        """``{"generate": why it is not used or None, "rerank": ...}``: qmd's optional models
        (query expansion, reranking) are used only when their file is on disk (a missing one would
        make qmd retry its download for ~12 minutes)."""
        config = self.config_file(env)
        out: dict[str, str | None] = {}
        for role in ("generate", "rerank"):
            missing = missing_models(role, config, env)
            out[role] = f"no {role} model in {models_dir(env)} ({missing[0].partition(': ')[2]})" if missing else None
        return out

    def _semantic_plan(self, mode: str, request: BackendRequest, transport: Transport) -> SemanticPlan:
        """What to send for vsearch/query over this transport, whether qmd may expand the query
        and rerank, and which models must be on disk for it (see :class:`SemanticPlan`)."""
        if not isinstance(transport, (CliTransport, EngineTransport)):  # a qmd server: its own models
            sent = structured_query(request.query, request.signal) if mode == "query" else request.query
            return SemanticPlan(sent, "", False, mode == "query")
        absent = self.optional_models(transport.env)
        if mode == "vsearch":
            # `qmd vsearch` (CLI) always expands; the engine only with vsearch_expansion.
            wanted = transport.expand_vsearch if isinstance(transport, EngineTransport) else True
        else:
            wanted = self.settings.query_expansion
        expand = wanted and absent["generate"] is None
        rerank = mode == "query" and absent["rerank"] is None
        notes = [f"query expansion skipped: {absent['generate']}"] if wanted and not expand else []
        if mode == "query" and not rerank:
            notes.append(f"reranking skipped: {absent['rerank']}; ranked by retrieval evidence")
        structured = mode == "query" and not expand
        sent = structured_query(request.query, request.signal) if structured else request.query
        needs = ("vsearch" if mode == "vsearch" else "query-expand") if expand else "embed"
        return SemanticPlan(sent, needs, expand, rerank, "; ".join(notes) or None)

    async def _keyword_search(self, request: BackendRequest, transport: Transport, watch: Stopwatch) -> BackendResponse:
        if isinstance(transport, EngineTransport) and transport.engine.starting:
            # The engine is still starting (the daemon's warm-up): a qmd process answers this
            # keyword query (~0.2 s) rather than making it wait for Node and qmd to load.
            transport = self.transport()
        forms = keyword_forms(request.query, request.signal, self.settings.max_search_calls)
        if not forms:
            # Nothing but stopwords ("what was the last thing"): ANDing them would match noise.
            return BackendResponse.from_results(self.name, request.query, [], duration_ms=watch.ms, query_sent="")
        answer = Answer([])
        for form in forms:
            answer = await transport.search(
                "search",
                form.text,
                _fetch_limit(request),
                self.collections_for(request) or (),
                timeout_s=request.timeout_s,
            )
            if answer.hits is None or answer.hits:
                return self._respond(request, answer, "search", form.text, form.coverage, watch)
        return self._respond(request, answer, "search", forms[-1].text, forms[-1].coverage, watch)

    def _respond(
        self,
        request: BackendRequest,
        answer: Answer,
        mode: str,
        sent: str,
        coverage: float,
        watch: Stopwatch,
        note: str | None = None,
    ) -> BackendResponse:
        if answer.hits is None:
            return BackendResponse.failure(
                self.name,
                request.query,
                answer.error_code or BACKEND_ERROR,
                answer.error_message or "qmd failed",
                duration_ms=watch.ms,
                query_sent=sent,
                note=note,
            )
        if mode != "search" and (m := _NEEDS_EMBEDDINGS.search(answer.stderr)) and m.group(2) != "100":
            # Some documents have no vectors yet: this answer never saw them. Say so, not silently.
            # (A "100%" beside hits is qmd's CLI counting for its default model, not the index's.)
            missing = f"{m.group(1)} documents ({m.group(2)}%) of the index have no embeddings yet, so qmd {mode} did "
            missing += "not search them: run `qmd embed`"
            note = f"{note}; {missing}" if note else missing
        reranked = mode == "query" and really_reranked(answer.hits, answer.stderr)
        results = to_results(
            answer.hits, mode, self.name, coverage=coverage, reranked=reranked, rank_only=answer.rank_only
        )
        # "find the function X": hits defining X first (files read from the collections' folders).
        files = CollectionFiles(self.config_file(self.env()) if self.index_name() else None)
        results = definitions_first(request.query, answer.hits, results, files)
        if request.window is not None:
            # qmd knows no dates: a hit is dated by the note date in its file name (memory/YYYY-MM-DD.md).
            from memory_router.core.window import in_window

            kept, outside, undated = in_window(request.window, tuple(results))
            results = list(kept[: request.limit])
            said = f"time window: {outside} hit(s) dated outside it and {undated} undated "
            said += "(no date in the file name) left out"
            note = f"{note}; {said}" if note else said
        return BackendResponse.from_results(
            self.name, request.query, results, duration_ms=watch.ms, query_sent=sent, note=note
        )

    def calibration_key(self, mode: str | None) -> str:
        """The calibration map of a mode (memory_router.core.calibration). Vector scores depend on the
        embedding model, and ``query``'s on whether a reranker is on disk, so those modes name
        them: ``qmd:search``, ``qmd:vsearch:<embed model>``, ``qmd:query:<embed model>[:rerank]``
        (the model's file name without ``.gguf``). A configuration that was not measured has no
        map, and its relevance stays qmd's own."""
        mode = mode or DEFAULT_MODE
        if mode == "search":
            return "qmd:search"
        env = self.env()
        config = self.config_file(env)
        embed = configured_models(config, env)["embed"].rsplit("/", 1)[-1].removesuffix(".gguf")
        key = f"qmd:{mode}:{embed}"
        if mode == "query" and not missing_models("rerank", config, env):
            key += ":rerank"
        return key

    def probe(self) -> Probe:
        try:
            transport = self.transport()
        except QmdNotFound as exc:
            return Probe(False, str(exc))
        env = transport.env
        command = transport.command
        missing = missing_models("embed", self.config_file(env), env)
        absent = self.optional_models(env)
        expansion = f"skipped: {absent['generate']}" if absent["generate"] else "on"
        skipped = {
            "query_expansion": expansion if self.settings.query_expansion else "off (query_expansion: false)",
            "rerank": f"skipped: {absent['rerank']}" if absent["rerank"] else "on",
        }
        index_file = self.index_file(env)
        facts = {
            "qmd": str(command.qmd),
            "qmd_version": qmd_version(command),
            "node": str(command.node) if command.node else None,
            "node_version": command.node_version,
            "working_dir": str(transport.cwd),
            "index_path": str(index_file) if index_file else None,
            "index_exists": index_file.is_file() if index_file else None,
            "config_file": str(self.config_file(env)),
            "collections": list(self.settings.collections),
            "models_dir": str(models_dir(env)),
            "models_missing": missing + [f"{role}: {why}" for role, why in absent.items() if why],
            "modes_ready": ["search"] + ([] if missing else ["vsearch", "query"]),
            **skipped,
        }
        if missing:
            detail = (
                f"qmd {facts['qmd_version']} on Node {command.node_version}: search ready; "
                f"vsearch/query need the embedding model (`qmd pull`; {missing[0]})"
            )
        else:
            detail = f"qmd {facts['qmd_version']} on Node {command.node_version}: search, vsearch, query ready"
            gaps = []
            if self.settings.query_expansion and absent["generate"]:
                gaps.append("query expansion (no generate model)")
            if absent["rerank"]:
                gaps.append("reranking (no rerank model)")
            if gaps:
                detail += f"; skipped on their own: {', '.join(gaps)}"
        if index_file is not None and not index_file.is_file():
            detail += (
                f"; no index at {index_file} yet (`qmd collection add <dir> --name <name>`), searches will be empty"
            )
        return Probe(True, detail, facts)


# --------------------------------------------------------------------------- demo

DEMO_COLLECTION = "demo"
DEMO_MASK = "**/*.{md,ts}"
# The small embedding model .ci/setup.d/30-qmd-models.sh builds into a checkout's .tools/models/.
LOCAL_MINILM = "all-MiniLM-L6-v2-f16.gguf"
# qmd cuts a chunk to ~508 tokens of its own count, but source code re-tokenises past MiniLM's 512
# positions and llama.cpp aborts (GGML_ASSERT(i01 < ne01), issue 29); a 384-token context keeps
# every chunk inside them. Measured: a corpus of Python files embeds without aborting at 384.
MINILM_CONTEXT_SIZE = "384"


def embedding_env(env: Mapping[str, str], model: str | None = None) -> dict[str, str]:
    """The environment for ``qmd embed`` (and an index's first embedding run): ``model`` as
    ``QMD_EMBED_MODEL`` when given, a context size MiniLM survives on code and long notes, and one
    embedding context per core up to two (one 2-thread context embeds ~1 chunk/s on two cores,
    two contexts ~4.5). A value the caller's environment sets wins."""
    out = dict(env)
    if model is not None:
        out["QMD_EMBED_MODEL"] = model
    embed_model = out.get("QMD_EMBED_MODEL", "")
    if "minilm" in embed_model.lower():
        out.setdefault("QMD_EMBED_CONTEXT_SIZE", MINILM_CONTEXT_SIZE)
    out.setdefault("QMD_EMBED_PARALLELISM", str(max(1, min(2, os.cpu_count() or 1))))
    return out


def local_embedding_model(environ: Mapping[str, str]) -> str | None:
    """The embedding model a demo or a first index can use without a download: the caller's
    ``QMD_EMBED_MODEL``, else the MiniLM GGUF a checkout's setup built; None when neither."""
    chosen = environ.get("QMD_EMBED_MODEL")
    if chosen:
        return chosen
    built = TOOLS / "models" / LOCAL_MINILM if TOOLS else None
    return str(built) if built is not None and built.is_file() else None


def embed_collection(transport: CliTransport, model: str, lock_path: Path, *, timeout_s: float = 600.0) -> None:
    """``qmd embed`` over the index with ``model`` (recorded in the index's config by qmd, so later
    searches use it), under the index-writer lock. Raises RuntimeError or TimeoutExpired."""
    env = embedding_env(transport.env, model)
    env.pop("CI", None)  # qmd refuses model work under CI; this model is a local file, nothing is fetched
    with index_lock(lock_path):
        done = subprocess.run(
            transport.argv("embed", []),
            cwd=transport.cwd,
            env=env,
            capture_output=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            check=False,
        )
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", "replace")
        raise RuntimeError(f"qmd embed exited with code {done.returncode}: {_tail(stderr)}")


@contextmanager
def index_lock(path: Path) -> Iterator[None]:
    """An exclusive lock held by whoever writes a qmd index (concurrent `qmd update` crashes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_collection(
    transport: CliTransport, source: Path, name: str, mask: str, lock_path: Path, *, timeout_s: float = 120.0
) -> None:
    """(Re)index ``source`` as collection ``name`` under the index-writer lock.

    Raises RuntimeError (qmd failed) or subprocess.TimeoutExpired."""

    def call(subcommand: str, options: list[str], arg: str | None = None) -> subprocess.CompletedProcess[bytes]:
        argv = transport.argv(subcommand, options, arg)
        return subprocess.run(
            argv,
            cwd=transport.cwd,
            env=transport.env,
            capture_output=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            check=False,
        )

    transport.cwd.mkdir(parents=True, exist_ok=True)
    with index_lock(lock_path):
        listed = call("collection", ["list"])
        if re.search(rf"^{re.escape(name)} \(qmd://", listed.stdout.decode("utf-8", "replace"), re.MULTILINE):
            done = call("update", [])
        else:
            done = call("collection", ["add", "--name", name, "--mask", mask], str(source))
        if done.returncode != 0:
            raise RuntimeError(
                f"qmd exited with code {done.returncode}: {_tail(done.stderr.decode('utf-8', 'replace'))}"
            )


def demo_setup(workspace: Path, state_dir: Path) -> dict[str, Any]:
    """Index the demo workspace (markdown and TypeScript) into a demo qmd collection under
    ``state_dir/qmd``; return the settings that point the demo's router at it."""
    home = state_dir / "qmd"
    settings = {
        "index_path": str(home / "index.sqlite"),
        "config_dir": str(home / "config"),
        "collections": [DEMO_COLLECTION],
    }
    backend = QmdBackend("qmd", settings_from_json(Settings, settings), BackendContext(state_dir=state_dir))
    try:
        transport = backend.transport()
    except QmdNotFound as exc:
        raise DemoUnavailable(str(exc)) from None
    # Semantic too when a local embedding model is there (a checkout's setup builds MiniLM): rules 4
    # and 7 are then answered by qmd vsearch/query, as the spec says, not by Total Recall. The model
    # is named before the collection is added: qmd writes the models block of index.yml then, and
    # a block naming its default (a download) would make the embedding wait on the network.
    model = local_embedding_model(transport.env)
    if model is not None:
        transport.env.update(embedding_env(transport.env, model))
    try:
        build_collection(transport, workspace.resolve(), DEMO_COLLECTION, DEMO_MASK, home / "index.lock")
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        raise DemoUnavailable(f"indexing the demo workspace with qmd failed: {exc}") from None
    if model is None:
        print(
            "demo: qmd vsearch/query need an embedding model: none here (bash .ci/setup.d/30-qmd-models.sh "
            "builds MiniLM, or set QMD_EMBED_MODEL); qmd answers with search only",
            file=sys.stderr,
        )
        return settings
    try:
        embed_collection(transport, model, home / "index.lock", timeout_s=180.0)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"demo: embedding the demo index failed ({exc}); qmd answers with search only", file=sys.stderr)
    return settings


# With a time window, qmd is asked for a wider list (it cannot filter by date: 5x the limit, at
# least 50, at most 100 hits), so the hits dated inside the window are the best of many, not the
# window's share of the top few.
WINDOW_OVERFETCH = 5
WINDOW_FETCH_MIN = 50
WINDOW_FETCH_MAX = 100


def _fetch_limit(request: BackendRequest) -> int:
    if request.window is None:
        return request.limit
    return max(request.limit, min(max(request.limit * WINDOW_OVERFETCH, WINDOW_FETCH_MIN), WINDOW_FETCH_MAX))
