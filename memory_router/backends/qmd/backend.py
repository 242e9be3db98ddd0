"""The qmd backend that runs qmd: :class:`QmdBackend` (the behaviour is described in :mod:`.adapter`).

Its transports (a process per call, the warm engine, a qmd server) and the index refresh are
imported here, not by :mod:`.adapter`: a one-shot query whose qmd cannot run here is answered
without them (and without asyncio) by :class:`.adapter.QmdUnavailable`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from memory_router.backends import BackendContext
from memory_router.backends.base import (
    BACKEND_ERROR,
    BACKEND_UNAVAILABLE,
    BackendRequest,
    BackendResponse,
    Probe,
    Stopwatch,
)
from memory_router.backends.qmd.document_lines import document_best_lines
from memory_router.backends.qmd.indexing import refresher_for
from memory_router.backends.qmd.keywords import SemanticPlan, keyword_forms, semantic_plan
from memory_router.backends.qmd.layout import DEFAULT_MODE, MODES, QmdLayout
from memory_router.backends.qmd.locate import (
    QmdCommand,
    QmdNotFound,
    missing_models,
    models_dir,
    qmd_version,
    resolve_command,
)
from memory_router.backends.qmd.parse import CollectionFiles, definitions_first, really_reranked, to_results
from memory_router.backends.qmd.refresh import Refresher, freshness, index_lock_path
from memory_router.backends.qmd.settings import Settings
from memory_router.backends.qmd.transports import (
    NEEDS_EMBEDDINGS,
    Answer,
    CliTransport,
    EngineTransport,
    HttpTransport,
    QmdTransport,
    engine_transport,
    public_url,
)

WARM_TIMEOUT_S = 300.0  # a start-up model load longer than this is reported as failed


class QmdBackend(QmdLayout):
    def __init__(
        self, name: str, settings: Settings, context: BackendContext, *, command: QmdCommand | None = None
    ) -> None:
        self.name = name
        self.settings = settings
        self.context = context
        self._command = command  # resolved already (adapter.create in a one-shot router)
        self._transport: CliTransport | None = None
        self._engine: EngineTransport | None = None
        self._http: HttpTransport | None = None
        self._warmup: dict[str, Any] = {}  # what warm() did, for runtime_facts
        self._refresher: Refresher | None | Literal[False] = None  # False: this instance keeps no index fresh

    def transport(self) -> CliTransport:
        """The CLI transport; resolution (and the node version check) happens once."""
        if self._transport is None:
            env = self.env()
            command = self._command or resolve_command(self.settings.qmd, self.settings.node, env)
            self._transport = CliTransport(command, env=env, cwd=self.working_dir(), index=self.index_name())
        return self._transport

    def answering(self) -> QmdTransport:
        """The transport queries go through: ``http_url``'s server, else the warm engine in a
        long-lived router (``engine: auto``), else a ``qmd`` process per call."""
        if self.settings.http_url:
            if self._http is None:
                self._http = HttpTransport(self.settings.http_url)
            return self._http
        cli = self.transport()
        if self._engine is None and self.settings.engine == "auto" and self.context.long_lived:
            self._engine = engine_transport(
                cli,
                self.index_file(cli.env),
                self.config_file(cli.env),
                idle_s=self.settings.engine_idle_s,
                expand_vsearch=self.settings.vsearch_expansion,
            )
        return self._engine or cli

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
        return refresher_for(
            self.name,
            self.settings.refresh,
            cli,
            index_file,
            self.config_file(cli.env),
            self.watched_collections(),
            self.context.report,
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
            return {"transport": "http", "url": public_url(self.settings.http_url)}
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
        self._warmup = await transport.warm(roles, WARM_TIMEOUT_S)

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

    def _semantic_plan(self, mode: str, request: BackendRequest, transport: QmdTransport) -> SemanticPlan:
        """What to send for vsearch/query over this transport, whether qmd may expand the query
        and rerank, and which models must be on disk for it (see :class:`~.keywords.SemanticPlan`)."""
        if not isinstance(transport, (CliTransport, EngineTransport)):  # a qmd server: its own models
            return semantic_plan(mode, request.query, request.signal)
        if mode == "vsearch":
            # `qmd vsearch` (CLI) always expands; the engine only with vsearch_expansion.
            wanted = transport.expand_vsearch if isinstance(transport, EngineTransport) else True
        else:
            wanted = self.settings.query_expansion
        return semantic_plan(mode, request.query, request.signal, wanted, self.optional_models(transport.env))

    async def _keyword_search(
        self, request: BackendRequest, transport: QmdTransport, watch: Stopwatch
    ) -> BackendResponse:
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
        if mode != "search" and (m := NEEDS_EMBEDDINGS.search(answer.stderr)) and m.group(2) != "100":
            # Some documents have no vectors yet: this answer never saw them. Say so, not silently.
            # (A "100%" beside hits is qmd's CLI counting for its default model, not the index's.)
            missing = f"{m.group(1)} documents ({m.group(2)}%) of the index have no embeddings yet, so qmd {mode} did "
            missing += "not search them: run `qmd embed`"
            note = f"{note}; {missing}" if note else missing
        reranked = mode == "query" and really_reranked(answer.hits, answer.stderr)
        files = CollectionFiles(self.config_file(self.env()) if self.index_name() else None)
        hits = answer.hits
        if mode == "query" and not reranked and not answer.rank_only:
            # No reranker read the chunk qmd's row is confined to: show the document's best lines,
            # as a search row does (.document_lines); qmd's scores are kept.
            hits = document_best_lines(hits, sent, files)
        results = to_results(hits, mode, self.name, coverage=coverage, reranked=reranked, rank_only=answer.rank_only)
        # "find the function X": hits defining X first (files read from the collections' folders).
        results = definitions_first(request.query, hits, results, files)
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
