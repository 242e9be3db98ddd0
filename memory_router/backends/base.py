"""The backend seam: the one interface between the router and a memory backend.

Everything above this module (rules, plan, attempts, envelope, CLI, daemon) knows a backend only
as an object with a ``name``, an async :meth:`Backend.search` that returns the stack's nine-field
backend contract, and a cheap synchronous :meth:`Backend.probe`; optionally
:class:`BlockingBackend` (a blocking search the one-shot CLI calls without an event loop),
:class:`ClosableBackend`, :class:`WatchableBackend`, :class:`DescribedBackend` and
:class:`WarmableBackend`. An adapter module has the
:class:`AdapterModule` shape and is created with a :class:`BackendContext`. Subprocesses, SQLite,
HTTP and markdown parsing all live below this line, in one adapter module each.

**Sync/async pairs: one name each.** Wherever the project offers the same operation both ways,
the async one is ``x`` and the blocking one (no event loop: the one-shot CLI) is ``x_blocking``:
``search``/``search_blocking`` here, ``Router.route``/``route_blocking``,
``Router.plan``/``plan_blocking``, ``Router.match``/``match_blocking``, and the fallback drivers
``drive``/``drive_blocking`` and ``call_backend``/``call_backend_blocking``. A pair is written
once: an adapter implements the one its backend does natively, an async ``search`` (a process,
HTTP) or, by subclassing :class:`BlockingAdapter`, a ``search_blocking`` (files, SQLite), and
gets the other from the seam; the router's paths are written once and driven both ways.

Rules every adapter follows:

* ``search`` never raises for a backend-side problem (missing binary, bad output, HTTP 500):
  it returns ``BackendResponse.failure(...)`` with a precise ``error_code`` and message.
  It may raise only for programming errors; the router turns those into ``BACKEND_ERROR`` too.
* ``search`` must be cancellable: the router enforces ``timeout_ms`` by cancelling the task, and
  the adapter's cleanup (killing a process group, closing a connection) runs in ``finally``.
  Blocking work (SQLite, file scans) runs on the instance's own threads
  (``common.threads.WorkerPool``), never the shared default executor, and stops early once its
  call is cancelled: what :class:`BlockingAdapter` does for an adapter that implements
  ``search_blocking``. Only a search that needs no wait and little time may answer at once on
  the event loop (:meth:`BlockingAdapter.search_now`).
* Relevance is 0..1 and means the same everywhere: >= 0.4 is a usable match, below is weak.
  Each adapter documents how it maps its native score onto that scale.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from memory_router import contract
from memory_router.core.frozen import Frozen

if TYPE_CHECKING:
    from memory_router.backends.common.threads import WorkerPool
    from memory_router.core.scope import Scope
    from memory_router.core.window import Window

ContractStatus = Literal["success", "empty", "error"]

# Error codes shared by the adapters and the router (their rows: memory_router.contract.ERROR_CODES).
BACKEND_ERROR = contract.BACKEND_ERROR
BACKEND_UNAVAILABLE = contract.BACKEND_UNAVAILABLE
QUERY_TIMEOUT = contract.QUERY_TIMEOUT


_STATUSES = frozenset({"success", "empty", "error"})

# The most an in-process search answered at once (BlockingAdapter.search_now) may hold the daemon's
# event loop, as a rule match may (memory_router.routing.router.ON_LOOP_MATCH_S).
ON_LOOP_S = 0.005


class InvalidResult(ValueError):
    """A :class:`Result` or :class:`BackendResponse` built with a value the contract forbids."""


def check_relevance(where: str, value: object) -> float:
    """``value`` as a float in 0..1, or :class:`InvalidResult` quoting it (NaN is refused too)."""
    if type(value) is float:
        number = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    else:
        raise InvalidResult(f"{where} must be a number in 0..1, got {value!r}")
    if not 0.0 <= number <= 1.0:
        raise InvalidResult(f"{where} must be in 0..1, got {value!r}")
    return number


class Result(Frozen):
    """One hit: ``content``, ``relevance`` (0..1), ``source``, ``timestamp``, plus the extra keys
    an adapter adds (``path``, ``line``, ``summary_id``...), kept in :attr:`extra` in the order
    given (readable as attributes too: ``hit.path``) and serialised after the four contract
    fields. Extra values must be JSON values. Immutable (change one with :meth:`replace`, which
    takes extra keys too); checked when built. Equal when the fields and the extra keys are;
    hashed by the four contract fields (extra values may be unhashable lists).

    A slotted :class:`~memory_router.core.frozen.Frozen` class, not a pydantic model: every CLI query builds these,
    and importing pydantic would cost more than the rest of a cold query (docs/benchmarks.md, *Cold start*)."""

    __slots__ = ("extra",)  # a slot, not a field: the extra keys are keywords of the value
    content: str
    relevance: float
    source: str
    timestamp: str | None
    extra: Mapping[str, Any]

    def __init__(self, content: str, relevance: float, source: str, timestamp: str | None = None, **extra: Any) -> None:
        if not isinstance(content, str):
            raise InvalidResult(f"result content must be a string, got {type(content).__name__}")
        if not isinstance(source, str):
            raise InvalidResult(f"result source must be a string, got {source!r}")
        if timestamp is not None and not isinstance(timestamp, str):
            raise InvalidResult(f"result timestamp must be a string or null, got {timestamp!r}")
        # Slots set directly, not through Frozen._init: every hit of every query builds one.
        setter = object.__setattr__
        setter(self, "content", content)
        setter(self, "relevance", check_relevance("result relevance", relevance))
        setter(self, "source", source)
        setter(self, "timestamp", timestamp)
        setter(self, "extra", MappingProxyType(extra))

    def derived(self, relevance: float, extra: Mapping[str, Any]) -> Result:
        """This hit with another ``relevance`` and extra keys: what ``Result(self.content,
        relevance, self.source, self.timestamp, **extra)`` builds, without checking again the
        three fields this one was checked for when built (the router rates and merges every hit
        of every answer). ``relevance`` is checked; ``extra`` is copied."""
        new = object.__new__(Result)
        setter = object.__setattr__
        setter(new, "content", self.content)
        setter(new, "relevance", check_relevance("result relevance", relevance))
        setter(new, "source", self.source)
        setter(new, "timestamp", self.timestamp)
        setter(new, "extra", MappingProxyType(dict(extra)))
        return new

    def __getattr__(self, name: str) -> Any:
        """Extra keys read as attributes too (``hit.path``); called only when no slot matches."""
        if name != "extra":  # unset until __init__ sets it (Result.__new__ alone): no recursion
            try:
                return self.extra[name]
            except KeyError:
                pass
        raise AttributeError(f"Result has no field or extra key {name!r}")

    def _field_dict(self) -> dict[str, Any]:
        # The extra keys are part of the value: they rebuild, compare and show as keywords.
        return self.as_dict()

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of this hit: the four contract fields, then the extra keys."""
        return {
            "content": self.content,
            "relevance": self.relevance,
            "source": self.source,
            "timestamp": self.timestamp,
            **self.extra,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Result:
        """A hit read back from JSON; :class:`InvalidResult` names what is missing or wrong."""
        if not isinstance(data, Mapping):
            raise InvalidResult(f"a result must be an object, got {type(data).__name__}")
        missing = [k for k in ("content", "relevance", "source") if k not in data]
        if missing:
            raise InvalidResult(f"a result needs {', '.join(missing)}")
        return cls(**data)


class BackendResponse(Frozen):
    """The stack's backend contract: exactly what one backend call returns.

    The first nine fields are the wire format of the OpenClaw stack's ``wrapper.sh --adapter``
    skills. ``query_sent`` is a router-side extension: the query text the adapter actually sent
    when it rewrote the user's query (qmd keyword extraction, FTS sanitising); it is reported in
    the envelope's ``attempts`` and is not part of the wire contract. ``note``, another router-side
    extension, says how the call departed from the configured one (qmd: "query expansion
    skipped: no generate model ..."); the attempt and :meth:`as_dict` show it only when set. Build one with
    :meth:`from_results` or :meth:`failure` (or the keyword-only constructor); change one with
    :meth:`replace` (field names only). Immutable; checked when built (a known status,
    :class:`Result` objects, ``normalized_relevance`` in 0..1); equal and hashed by its fields.

    A :class:`~memory_router.core.frozen.Frozen` value (the one idiom for values: see there), with its own
    keyword-only constructor."""

    # The contract's fields in its order: as_dict, repr, eq, hash and pickling follow it.
    query_echo: str
    results: tuple[Result, ...]
    result_count: int
    status: ContractStatus
    error_message: str | None
    error_code: str | None
    backend_duration_ms: int
    normalized_relevance: float
    backend: str
    query_sent: str | None
    note: str | None

    def __init__(
        self,
        *,
        query_echo: str,
        results: tuple[Result, ...] = (),
        result_count: int = 0,
        status: ContractStatus,
        error_message: str | None = None,
        error_code: str | None = None,
        backend_duration_ms: int = 0,
        normalized_relevance: float = 0.0,
        backend: str,
        query_sent: str | None = None,
        note: str | None = None,
    ) -> None:
        if status not in _STATUSES:
            raise InvalidResult(f"status must be one of success, empty, error; got {status!r}")
        if not isinstance(results, tuple):
            results = tuple(results)
        if not all(isinstance(r, Result) for r in results):
            raise InvalidResult("results must be Result objects")
        # Slots set directly, not through Frozen._init: every backend call builds one.
        setter = object.__setattr__
        setter(self, "query_echo", query_echo)
        setter(self, "results", results)
        setter(self, "result_count", result_count)
        setter(self, "status", status)
        setter(self, "error_message", error_message)
        setter(self, "error_code", error_code)
        setter(self, "backend_duration_ms", backend_duration_ms)
        setter(self, "normalized_relevance", check_relevance("normalized_relevance", normalized_relevance))
        setter(self, "backend", backend)
        setter(self, "query_sent", query_sent)
        setter(self, "note", note)

    def as_dict(self) -> dict[str, Any]:
        """The response as JSON-ready data: the nine contract fields in the stack's order (each
        result as its :meth:`Result.as_dict`), then ``query_sent``, then ``note`` if set."""
        data = self._field_dict() | {"results": [r.as_dict() for r in self.results]}
        if data["note"] is None:
            del data["note"]
        return data

    @classmethod
    def from_results(
        cls,
        backend: str,
        query: str,
        results: list[Result] | tuple[Result, ...],
        *,
        duration_ms: int = 0,
        query_sent: str | None = None,
        note: str | None = None,
    ) -> BackendResponse:
        """A ``success`` response, or ``empty`` when there are no results.

        ``normalized_relevance`` is the best result's relevance, as in the stack.
        """
        ordered = tuple(sorted(results, key=lambda r: r.relevance, reverse=True))
        return cls(
            query_echo=query,
            status="success" if ordered else "empty",
            backend=backend,
            results=ordered,
            result_count=len(ordered),
            backend_duration_ms=duration_ms,
            normalized_relevance=ordered[0].relevance if ordered else 0.0,
            query_sent=query_sent,
            note=note,
        )

    @classmethod
    def failure(
        cls,
        backend: str,
        query: str,
        code: str,
        message: str,
        *,
        duration_ms: int = 0,
        query_sent: str | None = None,
        note: str | None = None,
    ) -> BackendResponse:
        """An ``error`` response with a code such as ``BACKEND_UNAVAILABLE`` and a message that
        says what went wrong and what to do about it."""
        return cls(
            query_echo=query,
            status="error",
            backend=backend,
            error_message=message,
            error_code=code,
            backend_duration_ms=duration_ms,
            query_sent=query_sent,
            note=note,
        )


class BackendRequest(Frozen):
    """What the router asks of a backend.

    ``mode`` is the rule's mode for this step (``search``/``vsearch``/``query`` for qmd, ``None``
    for backends with a single mode). ``timeout_s`` is the budget the router will enforce by
    cancellation; adapters may pass it down (an HTTP client timeout) but need not.
    ``signal`` lets an adapter strip the rule's trigger words from a keyword query.

    ``scope`` is whose memory this call may read: the asking OpenClaw agent (and its session), a
    checked :class:`~memory_router.core.scope.Scope`, or ``None`` for an unscoped query (which reads
    what the backend's settings name, as always). It reaches a backend only here, in the one call's
    arguments: an adapter instance is shared by every agent's queries (the daemon keeps it warm),
    so it must never remember a scope between calls. Each adapter that honours it says how in its
    module docstring (docs/openclaw.md, *Agents*): Lossless reads only the agent's conversations
    (``conversations.session_key`` = ``agent:<id>:...``), Total Recall the agent's workspace
    (openclaw.json's ``agents.list[]``), qmd only the collections configured for the agent, Cognee
    only its datasets. A backend that cannot tell one agent's memory from another's must answer a
    scoped call with nothing of anybody's (``empty`` with a ``note``), never with all of it.
    """

    query: str
    mode: str | None
    limit: int
    timeout_s: float
    signal: str | None
    """The regex source of the rule signal that routed the query (None for the default rule).
    Keyword adapters (qmd search) drop its literal words: they say how to search, not what for."""
    scope: Scope | None
    window: Window | None
    """When the memory this call may read was written (:mod:`memory_router.core.window`), or ``None``.
    A backend that knows its memories' dates filters before it ranks (so a window does not just
    cut a list ranked over everything); the driver then drops what is dated outside it or undated."""

    def __init__(
        self,
        query: str,
        mode: str | None = None,
        limit: int = 10,
        timeout_s: float = 5.0,
        signal: str | None = None,
        scope: Scope | None = None,
        window: Window | None = None,
    ) -> None:
        # Slots set directly, not through the generic constructor: every backend call builds one,
        # by keyword, which the generic one binds ~3x slower than a written-out signature.
        setter = object.__setattr__
        setter(self, "query", query)
        setter(self, "mode", mode)
        setter(self, "limit", limit)
        setter(self, "timeout_s", timeout_s)
        setter(self, "signal", signal)
        setter(self, "scope", scope)
        setter(self, "window", window)


class Probe(Frozen):
    """Whether an adapter can run on this machine, for ``memory-router backends``: ``facts`` are
    JSON values shown beside ``detail`` (paths, counts, versions)."""

    ok: bool
    detail: str
    facts: Mapping[str, Any] = MappingProxyType({})


@runtime_checkable
class Backend(Protocol):
    """A memory backend as the router sees it."""

    name: str

    async def search(self, request: BackendRequest) -> BackendResponse:
        """Answer one query. Never raises for backend-side failures; see the module docstring."""
        ...

    def probe(self) -> Probe:
        """Cheap, synchronous check that the backend can run here (no query is sent)."""
        ...


@runtime_checkable
class BlockingBackend(Protocol):
    """Optional: a backend whose search is blocking work in this process (files, SQLite) that it
    can stop early. The one-shot CLI calls :meth:`search_blocking` in a thread of its own and
    waits with the router's timeout, so a cold query needs no event loop (importing asyncio is a
    sixth of a cold query); the daemon still awaits :meth:`Backend.search`. Both must answer
    alike, so an adapter implements this one and subclasses :class:`BlockingAdapter` for the
    other. ``stop`` is set when the router gives up on the call: return soon after (the answer is
    discarded). The same rules as :meth:`Backend.search`: never raise for a backend-side problem."""

    name: str

    def search_blocking(self, request: BackendRequest, stop: threading.Event) -> BackendResponse: ...


class BlockingAdapter:
    """The base of an adapter whose search is blocking work in this process (files, SQLite), in
    the style of httpx's transports: it implements :meth:`search_blocking` (and, if it holds more
    than its threads, :meth:`close_blocking`) only, and this class gives it the async
    :meth:`search` and :meth:`aclose`, so the two cannot drift apart.

    :meth:`search` runs :meth:`search_blocking` on the instance's own worker threads (a
    :class:`~memory_router.backends.common.threads.WorkerPool`: a stuck backend starves only
    itself) and, when the router cancels the call at its timeout, sets ``stop``: the same event
    the one-shot CLI's driver sets, so both drivers stop an abandoned search the same way. The
    instance is a :class:`BlockingBackend` and a :class:`ClosableBackend`."""

    name: str
    _pool: WorkerPool | None = None  # made on the first async search: the one-shot CLI never needs one

    def search_blocking(self, request: BackendRequest, stop: threading.Event) -> BackendResponse:
        """:meth:`BlockingBackend.search_blocking`: what a subclass implements."""
        raise NotImplementedError(f"{type(self).__name__} must implement search_blocking")

    def search_now(self, request: BackendRequest) -> BackendResponse | None:
        """The answer at once, in the caller's thread (the daemon's event loop), where it needs no
        wait: nothing to read but what the instance holds or SQLite's pages, no lock to wait for,
        and at most :data:`ON_LOOP_S` of work (by the instance's last searches, or stopped there);
        else ``None`` (the default), and :meth:`search` runs :meth:`search_blocking` on the worker
        threads. The answer must be the one :meth:`search_blocking` gives in the same state.

        Why: a warm search of a small memory takes less time than handing it to an idle worker
        thread and its answer back to the event loop, two threads woken (docs/benchmarks.md, *the
        warm half, fifth round*); a search that may take longer, or wait, keeps its thread."""
        return None

    async def search(self, request: BackendRequest) -> BackendResponse:
        """:meth:`Backend.search`: :meth:`search_now` where it answers, else :meth:`search_blocking`
        in a worker thread; cancelling that call sets its ``stop``, and the thread ends at the
        adapter's next check."""
        answered = self.search_now(request)
        if answered is not None:
            return answered
        import asyncio  # here, not at the top: the one-shot CLI's blocking path never awaits

        if self._pool is None:
            from memory_router.backends.common.threads import WorkerPool

            self._pool = WorkerPool(self.name)
        stop = threading.Event()
        try:
            return await self._pool.run(self.search_blocking, request, stop)
        except asyncio.CancelledError:
            stop.set()  # the router's timeout: the worker stops at its next check
            raise

    def close_blocking(self) -> None:
        """What :meth:`aclose` frees besides the worker threads (Lossless: the connections it keeps
        between a daemon's searches); nothing by default."""

    async def aclose(self) -> None:
        """:class:`ClosableBackend`: a reload replaced this instance, or the daemon stops."""
        if self._pool is not None:
            self._pool.close()
        self.close_blocking()


@runtime_checkable
class CalibratedBackend(Protocol):
    """Optional: a backend whose native relevance the router knows how to put on the one shared
    scale (:mod:`memory_router.core.calibration`, fitted on labelled data). :meth:`calibration_key`
    names the map for a mode: ``"qmd:query"``, ``"lossless"``. A backend without it (a command
    program, a test double) is taken at its word: its relevance is used as it is."""

    def calibration_key(self, mode: str | None) -> str: ...


def calibration_key(backend: object, mode: str | None) -> str | None:
    """The calibration map ``backend`` names for ``mode`` (a :class:`CalibratedBackend`), or
    ``None``: a backend without one is taken at its word."""
    return backend.calibration_key(mode) if isinstance(backend, CalibratedBackend) else None


@runtime_checkable
class ClosableBackend(Protocol):
    """Optional: a backend holding resources (a warm process, a connection). The daemon awaits
    :meth:`aclose` when the instance is replaced by a reload."""

    async def aclose(self) -> None: ...


@runtime_checkable
class DescribedBackend(Protocol):
    """Optional: a backend with live state worth showing (qmd's warm engine: pid, RSS, models).
    ``daemon status`` and ``memory-router backends`` print what :meth:`runtime_facts` returns."""

    async def runtime_facts(self) -> dict[str, Any]: ...


@runtime_checkable
class WarmableBackend(Protocol):
    """Optional: a backend that can get ready for its first query ahead of it (qmd: start the warm
    engine and load the models its semantic modes use, so the first semantic query does not pay
    the load). A long-lived router (``serve``, ``serve --socket``, ``mcp``) awaits :meth:`warm`
    once, in a background task, at start-up, for each backend backends.json lets it use.

    It must never delay another query (a keyword query is answered while models load), never
    raise for a backend-side problem (what went wrong is kept and shown by
    :meth:`DescribedBackend.runtime_facts`), and do nothing where there is nothing to warm."""

    async def warm(self) -> None: ...


@runtime_checkable
class WatchableBackend(Protocol):
    """Optional: a backend whose cache a file watcher can keep fresh (the daemon uses it).

    The daemon watches each ``(folder, recursive)`` of :meth:`watch_paths`, calls
    :meth:`invalidate` on every change there, and :meth:`set_watched` when its watch starts or
    stops; an unwatched backend re-checks its files itself."""

    def watch_paths(self) -> list[tuple[Path, bool]]: ...

    def set_watched(self, watched: bool) -> None: ...

    def invalidate(self) -> None: ...


class BackendContext(Frozen):
    """What an adapter may know about its surroundings when it is created.

    ``environ`` and ``cwd`` are passed in (not read from ``os``) so tests and the daemon control
    them; adapters resolve their paths from settings first, then these, then defaults. Left out,
    ``environ`` is a copy of ``os.environ`` and ``cwd`` is ``Path.cwd()``, both taken when the
    context is built. Immutable (change one with :meth:`replace`); equal by its fields, and
    hashable only if ``environ`` is (a ``dict`` is not), as the frozen dataclass it replaces.
    """

    state_dir: Path
    environ: Mapping[str, str]
    cwd: Path
    long_lived: bool
    """True in ``serve``/``mcp``: adapters may keep warm helper processes (qmd's engine)."""
    report: Callable[[str, str], None] | None
    """Where an adapter reports what happens outside any query (``kind``, ``message``: a failed
    index refresh): the daemon's writes it to stderr and router.log; ``None``: stderr only."""

    def __init__(
        self,
        state_dir: Path,
        environ: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        long_lived: bool = False,
        report: Callable[[str, str], None] | None = None,
    ) -> None:
        environ = dict(os.environ) if environ is None else environ
        cwd = Path.cwd() if cwd is None else cwd
        self._init(state_dir, environ, cwd, long_lived, report)


class DemoUnavailable(Exception):
    """Raised by an adapter's ``demo_setup`` when its backend cannot run on this machine."""


@runtime_checkable
class AdapterModule(Protocol):
    """The shape of an adapter module (``backends/<type>.py``), registered by type name with
    :func:`memory_router.backends.register_adapter`.

    * ``Settings``: its keys in ``router-config.json`` (``backends.<name>``, minus ``type``) as a
      subclass of :class:`~memory_router.backends.common.settings.AdapterSettings`: an immutable
      ``Frozen`` value (equal and hashed by its fields, mappings held read-only) that pydantic
      validates through ``Limits``/``Check`` markers in strict mode, unknown keys refused
      (``__pydantic_config__ = {"extra": "forbid", "strict": True}``), so typos and wrong JSON
      types are caught at load; defining or building it imports neither pydantic nor ``typing``;
    * ``create(name, settings, context)``: a :class:`Backend`;
    * ``MODES``: the modes a chain step may name, or ``None`` for a single-mode backend;
    * ``ENV_VARS``: the environment variables it reads (the daemon answers a client only if the
      client's values of these match its own); optionally ``config_env_vars(settings)``, the
      further names a backend's settings make it read (see
      :func:`memory_router.backends.adapter_env_vars`);
    * ``demo_setup(workspace, state_dir)``: prepare the demo's data and return the settings that
      point at it (raise :class:`DemoUnavailable` when it cannot run here), or ``None``.
    """

    @property
    def Settings(self) -> type[Any]: ...

    @property
    def MODES(self) -> frozenset[str] | None: ...

    @property
    def ENV_VARS(self) -> frozenset[str]: ...

    @property
    def demo_setup(self) -> Callable[[Path, Path], dict[str, Any]] | None: ...

    def create(self, name: str, settings: Any, context: BackendContext) -> Backend: ...


class Stopwatch:
    """Milliseconds since construction, for adapters filling ``backend_duration_ms``."""

    __slots__ = ("_start",)

    def __init__(self) -> None:
        self._start = time.perf_counter()

    @property
    def ms(self) -> int:
        return int((time.perf_counter() - self._start) * 1000)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._start
