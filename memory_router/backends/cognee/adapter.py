"""Cognee: relationship queries against a Cognee server's REST API (``POST /api/v1/search``).

**Where.** ``base_url`` from router-config.json (``backends.<name>.base_url``), else
``$COGNEE_BASE_URL``, else ``http://127.0.0.1:8000``.

**Auth**, as Cognee does it (access control, and so authentication, is on by default):

* an API key (``api_key`` or ``$COGNEE_API_KEY``) sent as ``X-Api-Key``; else
* a login (``username``/``password`` or ``$COGNEE_USERNAME``/``$COGNEE_PASSWORD``):
  ``POST /api/v1/auth/login`` once, then ``Authorization: Bearer <jwt>``, logging in again once
  if the token is refused (it expires); else
* nothing, for a server started with ``ENABLE_BACKEND_ACCESS_CONTROL=false``.

Secrets are :class:`~memory_router.backends.common.settings.Secret` (masked in any repr) and every
message that leaves the adapter
has them redacted, in any encoding a server may echo them in, before it is shortened; the
userinfo of a ``base_url`` (``http://user:secret@host``) is a secret too, and is stripped from
every URL shown. They never reach router.log, an envelope or ``backends --json``. A 401 is a
``BACKEND_ERROR`` that says how to configure auth.

**Modes** (the rule's ``mode``; ``null`` means ``default_mode``, which is ``graph``):

=============  ==================================================  ===========================
mode           Cognee search                                       results
=============  ==================================================  ===========================
graph          ``graph_search_type`` (GRAPH_COMPLETION) with        one per ``A --[rel]--> B``
               ``onlyContext``: the graph context, no LLM needed    line of the context
completion     the same type without ``onlyContext``: a full LLM    one per answer
               answer (Cognee may retry its LLM for minutes; the
               router's timeout cancels the request)
chunks         CHUNKS (vector search over text chunks)              one per chunk
lexical        CHUNKS_LEXICAL (BM25 over text chunks)               one per chunk
cypher         CYPHER, a query the adapter builds from the query's  one per row
               entity terms (server needs ``ALLOW_CYPHER_QUERY``)
=============  ==================================================  ===========================

``datasets`` (names; empty = all the user's datasets) and ``top_k`` come from the settings.
Relevance rules are in :mod:`.cognee.results` (graph answers are scored against the question
as :mod:`.cognee.question` reads it). A relationship question may need follow-up searches (an
entity the first answer lacks, a path between two entities): :mod:`.cognee.explore` runs them
within ``explore_share`` of the router's timeout, by Cypher when the server allows it.

**Errors.** Connection refused / DNS failure -> ``BACKEND_UNAVAILABLE``; HTTP 404 with
``[NoDataError]`` -> ``empty`` (nothing indexed yet); 401 -> ``BACKEND_ERROR`` with the auth hint;
any other 4xx/5xx -> ``BACKEND_ERROR`` with Cognee's ``detail``. The HTTP client's own timeout is
set just past the router's, so the router's cancellation is what ends a stalled request (and
closes its connection).

The HTTP client is ``httpx`` (imported on first search, so CLI start-up does not pay for it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from memory_router.backends import BackendContext
from memory_router.backends.base import (
    BACKEND_ERROR,
    BACKEND_UNAVAILABLE,
    BackendRequest,
    BackendResponse,
    Probe,
    Stopwatch,
)
from memory_router.backends.common.redact import Redactor, strip_userinfo, userinfo_secrets
from memory_router.backends.common.settings import EMPTY_MAPPING, AdapterSettings, Check, Limits, Secret
from memory_router.config.envvars import COGNEE

if TYPE_CHECKING:
    from memory_router.backends.cognee.paths import Path, Relationship

ENV_VARS: frozenset[str] = COGNEE  # the environment variables it reads: memory_router.config.envvars

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
MODES = frozenset({"graph", "completion", "chunks", "lexical", "cypher"})
# A path question's first search and its expansion's searches ask for top_k * WIDE_FACTOR
# triplets: whole neighbourhoods, not just the triplets nearest to a name (issue 22, item 9).
WIDE_FACTOR = 4
GRAPH_SEARCH_TYPES = (
    "GRAPH_COMPLETION",
    "GRAPH_COMPLETION_COT",
    "GRAPH_COMPLETION_CONTEXT_EXTENSION",
    "GRAPH_COMPLETION_DECOMPOSITION",
    "GRAPH_SUMMARY_COMPLETION",
    "HYBRID_COMPLETION",
)
AUTH_HINT = (
    "Set COGNEE_API_KEY (or backends.{name}.api_key in router-config.json) to a key from "
    "POST /api/v1/auth/api-keys, or COGNEE_USERNAME and COGNEE_PASSWORD (backends.{name}.username/"
    "password) for a login; a single-user local server can instead run with "
    "ENABLE_BACKEND_ACCESS_CONTROL=false."
)
MAX_DETAIL_CHARS = 400
# Parsing (.results), urllib and httpx are imported where used: config loading imports
# every adapter module for its Settings, so this module's import must stay cheap.


def _http_url(value: str | None) -> str | None:
    if value is not None and not _is_http_url(value):
        raise ValueError("must be an http:// or https:// URL such as http://127.0.0.1:8000")
    return value


class Settings(AdapterSettings):
    """``backends.<name>`` keys for ``"type": "cognee"`` in router-config.json (all optional)."""

    base_url: Annotated[str | None, Check(_http_url)] = None
    """Cognee server, e.g. ``http://127.0.0.1:8000`` (default: ``$COGNEE_BASE_URL``, else that)."""
    api_key: Secret | None = None
    """Sent as ``X-Api-Key`` (default: ``$COGNEE_API_KEY``). Prefer the environment variable."""
    username: str | None = None
    """Login user for a bearer token (default: ``$COGNEE_USERNAME``)."""
    password: Secret | None = None
    """Login password (default: ``$COGNEE_PASSWORD``). Prefer the environment variable."""
    datasets: tuple[str, ...] = ()
    """Dataset names to search (empty: every dataset the user can read). Unscoped queries only."""
    agent_datasets: Mapping[str, tuple[str, ...]] = EMPTY_MAPPING
    """A query scoped to an OpenClaw agent searches only that agent's datasets (by agent id), plus
    ``shared_datasets``; with none of either it answers ``empty`` (never every dataset)."""
    shared_datasets: tuple[str, ...] = ()
    """Datasets every agent's scoped queries also search: memory shared on purpose."""
    top_k: Annotated[int, Limits(ge=1, le=1000)] = 10
    default_mode: Literal["graph", "completion", "chunks", "lexical", "cypher"] = "graph"
    graph_search_type: Literal[GRAPH_SEARCH_TYPES] = "GRAPH_COMPLETION"  # type: ignore[valid-type]
    probe_timeout_s: Annotated[float, Limits(gt=0, le=30)] = 1.0
    paths: Literal["auto", "cypher", "expand"] = "auto"
    """How a path question ("trace from A to B") is answered: ``auto`` = one Cypher query, or
    expansion from both ends when the server refuses Cypher; ``cypher`` only; ``expand`` only."""
    explore_share: Annotated[float, Limits(gt=0, le=0.9)] = 0.6
    """Share of the router's timeout that follow-up searches (unknown entities, paths) may use."""


def _is_http_url(value: str) -> bool:
    head, sep, rest = value.partition("://")
    return bool(sep) and head.lower() in ("http", "https") and bool(rest.strip("/"))


def create(name: str, settings: Settings, context: BackendContext) -> CogneeBackend:
    return CogneeBackend(name, settings, context.environ)


def _secret(value: Secret | None, env: Mapping[str, str], key: str) -> str | None:
    if value is not None and value.get_secret_value():
        return value.get_secret_value()
    return env.get(key) or None


class CogneeBackend:
    def __init__(self, name: str, settings: Settings, environ: Mapping[str, str]) -> None:
        self.name = name
        self.settings = settings
        self.base_url = (settings.base_url or environ.get("COGNEE_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = _secret(settings.api_key, environ, "COGNEE_API_KEY")
        self._username = settings.username or environ.get("COGNEE_USERNAME") or None
        self._password = _secret(settings.password, environ, "COGNEE_PASSWORD")
        self._token: str | None = None  # bearer token from a login, reused until refused
        self._redactor: tuple[str | None, Redactor] | None = None  # (for which token, redactor)
        self._cypher_refused = False  # the server refused a Cypher path query: expand instead from then on

    def __repr__(self) -> str:  # never show secrets
        return f"CogneeBackend(name={self.name!r}, base_url={strip_userinfo(self.base_url)!r}, auth={self.auth_kind!r})"

    @property
    def auth_kind(self) -> str:
        if self._api_key:
            return "api key"
        if self._username and self._password:
            return "login"
        return "none"

    # ------------------------------------------------------------------ helpers

    def redact(self, text: str) -> str:
        """``text`` without the secrets in any encoding, nor the userinfo of any URL (see ._redact)."""
        if self._redactor is None or self._redactor[0] != self._token:  # built again after a login
            secrets = [self._api_key, self._password, self._token, *userinfo_secrets(self.base_url)]
            self._redactor = (self._token, Redactor(secrets))
        return self._redactor[1].redact(text)

    def _fail(
        self, request: BackendRequest, code: str, message: str, sw: Stopwatch, query_sent: str | None = None
    ) -> BackendResponse:
        return BackendResponse.failure(
            self.name, request.query, code, self.redact(message), duration_ms=sw.ms, query_sent=query_sent
        )

    def _nothing_for_agent(self, request: BackendRequest, sw: Stopwatch) -> BackendResponse:
        """``empty`` with the reason: this agent has no dataset (not an error: a cooldown would
        count it against the backend for every other agent)."""
        agent = request.scope.agent if request.scope is not None else "?"
        note = (
            f"no Cognee dataset is configured for agent {agent} "
            f"(backends.{self.name}.agent_datasets / shared_datasets): nothing searched"
        )
        return BackendResponse.from_results(self.name, request.query, [], duration_ms=sw.ms, note=note)

    def datasets_for(self, request: BackendRequest) -> tuple[str, ...] | None:
        """The datasets this call searches: ``datasets`` for an unscoped query (empty: all the
        user's); for a query scoped to an agent, its ``agent_datasets`` plus ``shared_datasets``,
        and ``None`` when that is none (an empty list would mean every dataset: other agents' too)."""
        if request.scope is None:
            return self.settings.datasets
        own = self.settings.agent_datasets.get(request.scope.agent, ())
        return tuple(dict.fromkeys((*own, *self.settings.shared_datasets))) or None

    def _body(
        self, mode: str, query: str, top_k: int | None = None, datasets: tuple[str, ...] | None = None
    ) -> tuple[dict[str, Any], str | None]:
        """The search request for a mode, and the query actually sent when it differs;
        ``datasets``: the call's (:meth:`datasets_for`), default the configured ones."""
        s = self.settings
        top_k = top_k or s.top_k
        body: dict[str, Any] = {"query": query, "topK": top_k}
        datasets = s.datasets if datasets is None else datasets
        if datasets:
            body["datasets"] = list(datasets)
        sent = None
        if mode == "graph":
            body.update(searchType=s.graph_search_type, onlyContext=True)
        elif mode == "completion":
            body.update(searchType=s.graph_search_type)
        elif mode == "chunks":
            body["searchType"] = "CHUNKS"
        elif mode == "lexical":
            body["searchType"] = "CHUNKS_LEXICAL"
        else:  # cypher
            from memory_router.backends.cognee.question import cypher_for

            sent = cypher_for(query, top_k)
            body.update(searchType="CYPHER", query=sent)
            body.pop("topK")
        return body, sent

    def _first_top_k(self, mode: str, query: str) -> int | None:
        """A path question's first graph search is wide (``top_k * WIDE_FACTOR`` triplets): a path
        needs the neighbourhoods of both ends, not the few triplets nearest to the question, and
        one wide search costs Cognee about what a narrow one does, while each follow-up round
        costs a round trip of the budget (issue 22, item 9). ``None``: the setting's ``top_k``."""
        if mode != "graph":
            return None
        from memory_router.backends.cognee.question import parse_question

        question = parse_question(query)
        return self.settings.top_k * WIDE_FACTOR if question.path and question.ends else None

    async def _auth_headers(self, client: Any, *, fresh: bool = False) -> dict[str, str] | str:
        """Headers for the configured auth, or an error message (str) when a login fails."""
        if self._api_key:
            return {"X-Api-Key": self._api_key}
        if not (self._username and self._password):
            return {}
        if self._token is None or fresh:
            self._token = None
            response = await client.post(
                "/api/v1/auth/login", data={"username": self._username, "password": self._password}
            )
            if response.status_code != 200:
                return (
                    f"login to Cognee at {self.base_url} as {self._username} failed "
                    f"(HTTP {response.status_code}: {_detail(response, self.redact)}). "
                    + AUTH_HINT.format(name=self.name)
                )
            try:
                self._token = response.json()["access_token"]
            except (ValueError, KeyError, TypeError):
                return f"login to Cognee at {self.base_url} returned no access_token"
        return {"Authorization": f"Bearer {self._token}"}

    # ------------------------------------------------------------------ the seam

    async def search(self, request: BackendRequest) -> BackendResponse:  # noqa: C901 - one HTTP call, each failure its code
        import httpx  # lazy: only a Cognee query pays for it

        sw = Stopwatch()
        if not _is_http_url(self.base_url):  # only $COGNEE_BASE_URL can get here (Settings check theirs)
            return self._fail(
                request,
                BACKEND_ERROR,
                f"COGNEE_BASE_URL={self.base_url!r} is not an http:// or "
                "https:// URL; set it like http://127.0.0.1:8000",
                sw,
            )
        mode = request.mode or self.settings.default_mode
        if mode not in MODES:
            return self._fail(request, BACKEND_ERROR, f"unknown cognee mode {mode!r}; use one of {sorted(MODES)}", sw)
        datasets = self.datasets_for(request)
        if datasets is None:  # a scoped query whose agent has no dataset: nothing of its here
            return self._nothing_for_agent(request, sw)
        body, sent = self._body(mode, request.query, self._first_top_k(mode, request.query), datasets)
        if sent == "":
            return BackendResponse.from_results(self.name, request.query, [], duration_ms=sw.ms)
        # Just past the router's budget: the router's cancellation ends a stalled call first.
        timeout = httpx.Timeout(request.timeout_s + 1.0, connect=min(request.timeout_s + 1.0, 3.0))
        try:
            # One client per call: cancellation then closes exactly this call's connection.
            # For plain http, skip building a TLS context (35-70 ms per client, no TLS used).
            async with httpx.AsyncClient(
                base_url=self.base_url, timeout=timeout, trust_env=False, verify=self.base_url.startswith("https:")
            ) as client:
                headers = await self._auth_headers(client)
                if isinstance(headers, str):
                    return self._fail(request, BACKEND_ERROR, headers, sw, sent)
                response = await client.post("/api/v1/search", json=body, headers=headers)
                if response.status_code == 401 and self._token is not None:
                    headers = await self._auth_headers(client, fresh=True)  # the token expired
                    if isinstance(headers, str):
                        return self._fail(request, BACKEND_ERROR, headers, sw, sent)
                    response = await client.post("/api/v1/search", json=body, headers=headers)
                explored = await self._explore(client, headers, request, mode, response, sw)
        except httpx.ConnectError as exc:
            return self._fail(
                request,
                BACKEND_UNAVAILABLE,
                f"cannot connect to Cognee at {self.base_url} ({_reason(exc)}). Start the Cognee "
                f"server (python -m cognee.api.client) or set COGNEE_BASE_URL / "
                f"backends.{self.name}.base_url.",
                sw,
                sent,
            )
        except httpx.TimeoutException:
            return self._fail(
                request,
                BACKEND_ERROR,
                f"Cognee at {self.base_url} did not answer within {request.timeout_s + 1:.1f} s",
                sw,
                sent,
            )
        except httpx.HTTPError as exc:
            return self._fail(
                request, BACKEND_ERROR, f"HTTP error talking to Cognee at {self.base_url}: {_reason(exc)}", sw, sent
            )
        return self._response(request, mode, response, sw, sent, explored)

    async def _explore(
        self, client: Any, headers: dict[str, str], request: BackendRequest, mode: str, response: Any, sw: Stopwatch
    ) -> Any:
        """Follow-up searches for a relationship question (:mod:`.cognee.explore`), or None."""
        from memory_router.backends.cognee.explore import explore
        from memory_router.backends.cognee.question import parse_question
        from memory_router.backends.cognee.results import RELATION_MODES, cypher_paths, graph_answer

        if mode not in RELATION_MODES or response.status_code != 200:
            return None
        question = parse_question(request.query)
        if not question.mentions:
            return None
        try:
            first, _, _ = graph_answer(response.json(), mode)
        except ValueError:
            return None

        datasets = self.datasets_for(request)

        async def search(text: str, wide: bool = False) -> list[Relationship]:
            body, sent = self._body(mode, text, self.settings.top_k * WIDE_FACTOR if wide else None, datasets)
            payload = None if sent == "" else await self._post_json(client, headers, body)
            return [] if payload is None else graph_answer(payload, mode)[0]

        async def cypher(statement: str) -> list[Path] | None:
            body: dict[str, Any] = {"query": statement, "searchType": "CYPHER"}
            if datasets:
                body["datasets"] = list(datasets)
            payload = await self._post_json(client, headers, body)
            return None if payload is None else cypher_paths(payload)

        return await explore(
            question,
            first,
            search,
            None if self._cypher_refused else cypher,
            budget_s=request.timeout_s * self.settings.explore_share - sw.ms / 1000,
            paths=self.settings.paths,
            limit=self.settings.top_k,
        )

    async def _post_json(self, client: Any, headers: dict[str, str], body: dict[str, Any]) -> Any:
        """A follow-up search's JSON answer, or None on any failure (follow-ups are best effort).
        A refused Cypher query (``ALLOW_CYPHER_QUERY`` off, or a graph store without Cypher)
        is not tried again by this backend."""
        import httpx

        try:
            r = await client.post("/api/v1/search", json=body, headers=headers)
        except httpx.HTTPError:
            return None
        if r.status_code != 200:
            if body.get("searchType") == "CYPHER" and r.status_code in (400, 403, 422):
                self._cypher_refused = True
            return None
        try:
            return r.json()
        except ValueError:
            return None

    def _response(
        self,
        request: BackendRequest,
        mode: str,
        response: Any,
        sw: Stopwatch,
        sent: str | None,
        explored: Any = None,
    ) -> BackendResponse:
        status = response.status_code
        if status == 401:
            how = {"api key": "the API key", "login": "the login token"}.get(
                self.auth_kind, "a request without credentials"
            )
            return self._fail(
                request,
                BACKEND_ERROR,
                f"Cognee at {self.base_url} refused {how} (HTTP 401). " + AUTH_HINT.format(name=self.name),
                sw,
                sent,
            )
        detail = _detail(response, self.redact)
        if status == 404 and "NoDataError" in detail:
            # Nothing searchable yet (nothing added/cognified): an answer, not a failure.
            return BackendResponse.from_results(self.name, request.query, [], duration_ms=sw.ms, query_sent=sent)
        if status != 200:
            hint = f" Check backends.{self.name}.datasets." if "DatasetNotFound" in detail else ""
            return self._fail(request, BACKEND_ERROR, f"Cognee search failed (HTTP {status}): {detail}{hint}", sw, sent)
        try:
            payload = response.json()
        except ValueError:
            return self._fail(
                request,
                BACKEND_ERROR,
                f"Cognee answered HTTP 200 with a body that is not JSON: {self.redact(response.text)[:120]!r}",
                sw,
                sent,
            )
        from memory_router.backends.cognee.results import to_results

        results, errors = to_results(payload, mode, request.query, self.name, explored)
        if errors and not results:
            return self._fail(
                request,
                BACKEND_ERROR,
                "Cognee search failed: " + self.redact("; ".join(errors))[:MAX_DETAIL_CHARS],
                sw,
                sent,
            )
        return BackendResponse.from_results(
            self.name, request.query, results[: request.limit], duration_ms=sw.ms, query_sent=sent
        )

    def calibration_key(self, mode: str | None) -> str:
        """The calibration map (memory_router.core.calibration): ``cognee``. LoCoMo's tier has no graph
        to measure it on, so none is shipped and Cognee's relevance stays its own."""
        return "cognee"

    def probe(self) -> Probe:
        """``GET /health`` with a short timeout (no query, no auth needed)."""
        shown = strip_userinfo(self.base_url)
        facts: dict[str, Any] = {"base_url": shown, "auth": self.auth_kind}
        if not _is_http_url(self.base_url):
            return Probe(False, self.redact(f"COGNEE_BASE_URL={shown!r} is not an http:// or https:// URL"), facts)
        health = fetch_health(shown, self.settings.probe_timeout_s)  # /health needs no credentials
        if isinstance(health, str):
            return Probe(False, self.redact(f"cannot reach Cognee at {shown}: {health}"), facts)
        facts.update({k: health[k] for k in ("status", "health", "version") if k in health})
        ok = health.get("health", "healthy") in ("healthy", "degraded") and health.get("status", "ready") != "not ready"
        version = health.get("version", "?")
        state = health.get("health", health.get("status", "up"))
        return Probe(
            ok,
            self.redact(f"Cognee {version} at {shown}: {state} (auth: {self.auth_kind})"),
            facts,
        )


def fetch_health(base_url: str, timeout_s: float) -> dict[str, Any] | str:
    """The ``/health`` JSON, or a short reason why there is none."""
    import urllib.error
    import urllib.request  # lazy: ~15 ms, and every CLI run imports this module for its Settings

    try:
        with urllib.request.urlopen(base_url + "/health", timeout=timeout_s) as resp:  # noqa: S310 - configured URL
            data = json.loads(resp.read(65536) or b"{}")
    except urllib.error.HTTPError as exc:
        return f"GET /health answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return str(getattr(reason, "strerror", None) or reason)
    except ValueError:
        return "GET /health did not answer JSON"
    return data if isinstance(data, dict) else "GET /health did not answer a JSON object"


def _detail(response: Any, redact: Callable[[str], str] = str) -> str:
    """Cognee's error ``detail`` (a string, or FastAPI's list of validation errors), redacted,
    then shortened (in that order: a secret cut in two would no longer be recognised)."""
    try:
        data = response.json()
    except ValueError:
        return redact((response.text or "").strip())[:MAX_DETAIL_CHARS] or f"HTTP {response.status_code}"
    detail = data.get("detail", data.get("error", data)) if isinstance(data, dict) else data
    if isinstance(detail, list):
        detail = "; ".join(
            f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg')}" if isinstance(d, dict) else str(d) for d in detail
        )
    text = detail if isinstance(detail, str) else json.dumps(detail)
    return redact(text)[:MAX_DETAIL_CHARS]


def _reason(exc: BaseException) -> str:
    """The innermost cause of a transport error ("Connection refused", "Name or service not known")."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and (cause.errno or cause.strerror):
            # asyncio's "Connect call failed (...)" hides ECONNREFUSED; getaddrinfo errors are negative
            return os.strerror(cause.errno) if cause.errno and cause.errno > 0 else str(cause.strerror)
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__


def demo_setup(workspace: Any, state_dir: Any) -> dict[str, Any]:
    """The demo uses Cognee only when a server is configured and healthy (it cannot start one)."""
    from memory_router.backends import DemoUnavailable

    base_url = (os.environ.get("COGNEE_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    health = fetch_health(base_url, 0.5)
    if isinstance(health, str) or "health" not in health:
        why = health if isinstance(health, str) else "it does not answer like Cognee"
        raise DemoUnavailable(f"no Cognee server at {base_url} ({why}); set COGNEE_BASE_URL to a running one")
    return {}
