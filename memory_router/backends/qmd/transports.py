"""How a qmd search reaches qmd: a :class:`QmdTransport`, in the style of httpx's transports.

:class:`CliTransport` runs a ``qmd`` process per call (the one-shot CLI), :class:`EngineTransport`
asks the warm engine of a long-lived router (:mod:`.engine`), :class:`HttpTransport` a running
``qmd mcp --http``. Each answers an :class:`Answer`: hits, or a failure already classified into a
contract code (``BACKEND_UNAVAILABLE`` for what the user must install or build, ``BACKEND_ERROR``
with qmd's stderr tail otherwise). Query rewriting and scoring are the backend's (:mod:`.adapter`),
the same over all three.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from memory_router.backends.base import BACKEND_ERROR, BACKEND_UNAVAILABLE
from memory_router.backends.common.process import ExecutableNotFound, OutputTooLarge, run
from memory_router.backends.qmd.engine import ENGINE_SCRIPT, EngineFailed, QmdEngine
from memory_router.backends.qmd.keywords import typed_searches, vec_text
from memory_router.backends.qmd.locate import INSTALL_HINT, QmdCommand, configured_models, missing_models
from memory_router.backends.qmd.parse import QmdOutputError, cosine_hits, parse_hits
from memory_router.core.frozen import Frozen

CI_REFUSAL = "LLM operations are disabled in CI"
NEEDS_EMBEDDINGS = re.compile(r"(\d+) documents? \((\d+)%\) need embeddings")


class Answer(Frozen):
    """One qmd call's outcome: hits, or a failure already classified into a contract code."""

    hits: list[dict[str, Any]] | None
    error_code: str | None = None
    error_message: str | None = None
    stderr: str = ""
    rank_only: bool = False
    """The scores are rank positions (qmd's HTTP ``/query``), not similarities."""


class QmdTransport(Protocol):
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
        if not hits and mode != "search" and (m := NEEDS_EMBEDDINGS.search(stderr)) and m.group(2) == "100":
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

    async def warm(self, roles: list[str], timeout_s: float) -> dict[str, Any]:
        """Load the models of ``roles`` in the engine; what came of it (``ready`` with the load time
        per model, or ``failed`` with why), as the backend's ``runtime_facts`` show it."""
        started = time.perf_counter()
        try:
            answer = await asyncio.wait_for(self.engine.request({"op": "warm", "roles": roles}), timeout_s)
        except (EngineFailed, asyncio.TimeoutError) as exc:
            why = str(exc) or f"no answer within {timeout_s:.0f} s"
            return {"state": "failed", "models": roles, "error": why[:300]}
        seconds = round(time.perf_counter() - started, 2)
        if answer.get("ok") is True:
            loaded = answer.get("loaded_ms") if isinstance(answer.get("loaded_ms"), dict) else {}
            return {"state": "ready", "models": roles, "seconds": seconds, "loaded_ms": loaded}
        error = str(answer.get("error") or "no message")[:300]
        return {"state": "failed", "models": roles, "seconds": seconds, "error": error}


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
        shown = public_url(self.url)
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


def public_url(url: str) -> str:
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


def stderr_tail(stderr: str, limit: int = 300) -> str:
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
            f"qmd {mode}: {stderr_tail(stderr)}. "
            "Check backends.qmd.collections in router-config.json (`qmd collection list`).",
        )
    if returncode < 0 or returncode in (134, 139):
        return BACKEND_UNAVAILABLE, f"qmd {mode} crashed (exit {returncode}); is Node >= 22 in use? {INSTALL_HINT}"
    return BACKEND_ERROR, f"qmd {mode} exited with code {returncode}: {stderr_tail(stderr) or 'no message'}"


def engine_transport(
    cli: CliTransport, index_file: Path | None, config: Path, *, idle_s: float, expand_vsearch: bool
) -> EngineTransport | None:
    """The warm engine beside a CLI transport, or None where it cannot run (qmd is not a qmd.js run
    by a Node we found, or a project-local ``.qmd/`` decides the index: ``index_file`` None)."""
    if cli.command.node is None or index_file is None:
        return None
    init = {
        "dbPath": str(index_file),
        "configPath": str(config),
        "models": configured_models(config, cli.env),
        "idleMs": int(idle_s * 1000),
    }
    package = cli.command.qmd.parent.parent.parent
    argv = [str(cli.command.node), str(ENGINE_SCRIPT), str(package), json.dumps(init)]
    return EngineTransport(
        QmdEngine(argv, env=cli.env, cwd=cli.cwd),
        index_file=index_file,
        cwd=cli.cwd,
        expand_vsearch=expand_vsearch,
        # The engine reranks when the reranker is on disk, else ranks by retrieval evidence.
        has_reranker=lambda: not missing_models("rerank", config, cli.env),
    )
