"""The daemon's request handling, independent of any transport.

A :class:`Service` holds one warm :class:`~memory_router.routing.router.Router` (its backend instances,
and so their caches, live as long as the service), the current backends.json, the dead-backend
:class:`~memory_router.core.cooldown.Cooldown` and the :class:`~.stats.Stats`. Transports (stdin/stdout
in :mod:`.stdio`, a Unix socket) only move lines::

    service = Service.from_options(state_dir=None, backends_json=None, config=None)
    await service.start()                      # hot reload of router-config.json / backends.json
    response: bytes = await service.handle_line(b'{"id": 1, "query": "auth"}')
    await service.aclose()

:meth:`Service.handle_line` and :meth:`Service.handle` never raise (only ``CancelledError``
passes through, so a transport can cancel them): every request gets exactly one response object,
``{"id": <echoed>, ...}`` followed by the query's envelope, the dry-run plan (``explain``), the
counters (``op: stats``) or an error envelope (``status: "error"`` with an ``error_code``).

Hot reload (:mod:`.reload`): both files are re-read when they change on disk (watchfiles watches
their directories, so editors that write a temporary file and rename it are seen). A file that
fails validation is reported on stderr and in router.log and the last good version keeps serving.
A config reload keeps the instances of backends whose settings did not change.

Adapter caches (:mod:`.watch`): a backend instance that offers ``watch_paths() -> [(folder,
recursive)]``, ``set_watched(bool)`` and ``invalidate()`` (Total Recall does) gets its folders
watched too, and is told about every change, so a warm query need not walk its data to find out
what changed. qmd does too: a change to its collections' files starts a debounced ``qmd update``
(:mod:`memory_router.backends.qmd.refresh`), so its index follows the memory files.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from memory_router import contract
from memory_router.backends import BackendContext
from memory_router.backends.base import Backend, DescribedBackend, WarmableBackend
from memory_router.config import paths
from memory_router.config.installed import Installed, load_installed
from memory_router.config.router_config import RouterConfig, load_config
from memory_router.config.statedir import check_state_dir
from memory_router.contract import say
from memory_router.core import trim
from memory_router.core.cooldown import Cooldown
from memory_router.core.envelope import Envelope, error_envelope
from memory_router.core.errors import InvalidQuery, RouterError
from memory_router.daemon.describe import describe_warmup
from memory_router.daemon.protocol import BadRequest, Request, parse_line, parse_request
from memory_router.daemon.reload import RELOADED, Reloader, Snapshot, aclose_quietly
from memory_router.daemon.stats import Stats
from memory_router.daemon.watch import Watcher
from memory_router.output import jsonout
from memory_router.routing.router import Router
from memory_router.routing.routerlog import RouterLog

# Requests routed at once. The work is mostly waiting (backend processes, HTTP, a thread doing
# Total Recall's scoring); 4 per core keeps two cores busy without queueing behind one slow
# backend, and bounds the processes a burst can start.
DEFAULT_CONCURRENCY = 4 * (os.cpu_count() or 2)
# Longer than any legal query (max_query_chars * 4 UTF-8 bytes) plus the JSON around it.
DEFAULT_MAX_LINE_BYTES = 1 << 20
INTERNAL_ERROR = contract.INTERNAL_ERROR
SHUTTING_DOWN = contract.SHUTTING_DOWN


class Service:
    def __init__(
        self,
        *,
        state_dir: Path,
        backends_path: Path,
        config_path: Path | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        context: BackendContext | None = None,
        backends: Mapping[str, Backend] | None = None,
        diagnostics: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Load router-config.json (raises :class:`~memory_router.core.errors.RouterError` if it is
        invalid: a daemon must not start on a broken config, nor on a state dir another user
        controls, ``STATE_DIR_UNSAFE``) and backends.json (a missing or
        invalid one is reported and answered per query until it is fixed).

        ``backends`` replaces adapters by name (tests); ``diagnostics`` receives the stderr
        lines (default: print to stderr); ``clock`` is the dead-backend cooldown's (tests).
        """
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        check_state_dir(state_dir)
        self.state_dir = state_dir
        self.backends_path = backends_path
        self.config_path = config_path or paths.packaged_config()
        self.concurrency = concurrency
        self.max_line_bytes = max_line_bytes
        # Adapters report what happens outside a query (qmd's index refresh) as the daemon does.
        self.context = context or BackendContext(state_dir=state_dir, long_lived=True, report=self._report)
        self.log = RouterLog(paths.router_log(state_dir))
        self.stats = Stats()
        self.say = diagnostics or _stderr
        # Shared with the Reloader and Watcher (reload.py, watch.py), hence public: backend
        # instances given by the caller (tests), the file watcher, the match pool, the cooldown.
        self.overrides = dict(backends or {})
        self._in_flight = 0
        self._warming: set[asyncio.Task[None]] = set()
        self._slots: asyncio.Semaphore | None = None
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        self.watcher = Watcher((self.config_path, backends_path), lambda: self.reload(), lambda m: self.say(m))
        # Rule matching runs here, off the event loop: a slow signal regex then holds its own
        # query only (up to the match budget), never the other requests.
        self.match_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memory-router-match")

        config = load_config(self.config_path)
        self.cooldown = Cooldown(on_event=self._report, clock=clock)
        # Notes both files' signatures: changes from now on reload.
        self._reloader = Reloader(
            self.config_path,
            backends_path,
            make_router=self._make_router,
            cooldown=self.cooldown,
            overrides=self.overrides.keys(),
            report=self._report,
        )
        router = self._make_router(config, keep={})
        try:
            installed: Installed | None = load_installed(backends_path)
            installed_error: RouterError | None = None
        except RouterError as exc:
            installed, installed_error = None, exc
            self.say(f"warning: {exc} (queries answer {exc.error_code} until it is fixed; it is watched)")
        # Everything a request reads that a reload changes, swapped whole (see reload.py).
        self._snapshot = Snapshot(router, installed, installed_error)

    @property
    def snapshot(self) -> Snapshot:
        """The router and backends.json being served; a reload replaces it, never edits it."""
        return self._snapshot

    @property
    def router(self) -> Router:
        return self._snapshot.router

    @property
    def installed(self) -> Installed | None:
        return self._snapshot.installed

    @property
    def installed_error(self) -> RouterError | None:
        return self._snapshot.installed_error

    def _make_router(self, config: RouterConfig, keep: Mapping[str, Backend]) -> Router:
        """A router for ``config`` that reuses the ``keep`` instances (and the caller's overrides)."""
        if config.cooldown is not None:
            self.cooldown.configure(config.cooldown.failures, config.cooldown.seconds)
        return Router(
            config,
            context=self.context,
            log=self.log,
            backends={**keep, **self.overrides},
            cooldown=self.cooldown if config.cooldown is not None else None,
            match_executor=self.match_pool,
        )

    @classmethod
    def from_options(
        cls,
        state_dir: str | os.PathLike[str] | None = None,
        backends_json: str | os.PathLike[str] | None = None,
        config: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> Service:
        """The same resolution as the CLI's ``--state-dir``/``--backends-json``/``--config``
        (flag, then environment, then default)."""
        state = paths.state_dir(state_dir)
        return cls(
            state_dir=state,
            backends_path=paths.backends_json(state, backends_json),
            config_path=paths.config_file(config, state),
            **kwargs,
        )

    # ------------------------------------------------------------------ requests

    async def handle_line(self, line: bytes) -> bytes:
        """One request line (its newline optional) -> one JSON response, no newline."""
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        try:
            request: Request | BadRequest = parse_line(line, self.max_line_bytes)
        except BadRequest as exc:
            request = exc
        return self.dumps(await self._serve(request))

    async def handle(self, request: object) -> dict[str, Any]:
        """One parsed JSON request (an object or a bare string) -> its response object."""
        try:
            parsed: Request | BadRequest = request if isinstance(request, Request) else parse_request(request)
        except BadRequest as exc:
            parsed = exc
        return await self._serve(parsed)

    def oversized_line(self, prefix: bytes, length: int) -> bytes:
        """The response to a line a transport refused to buffer whole (``length`` bytes, of which
        it kept ``prefix``): ``REQUEST_TOO_LARGE``, with the id if it was the first key."""
        from memory_router.daemon.protocol import REQUEST_TOO_LARGE, sniff_id

        bad = BadRequest(
            REQUEST_TOO_LARGE,
            f"the request line is {length} bytes or more; the limit is {self.max_line_bytes} (serve --max-line-bytes)",
            sniff_id(prefix),
        )
        self.stats.request("invalid", bad.code)
        return self.dumps(self.error_response(bad.id, bad.code, bad.message))

    def dumps(self, response: Mapping[str, Any]) -> bytes:
        """A response object as one JSON line (without the newline); never raises."""
        try:
            return jsonout.dumps(response)  # a name that is not UTF-8 is written escaped
        except TypeError as exc:  # orjson.JSONEncodeError: a value that is not JSON (a bug)
            message = f"the response could not be encoded as JSON: {exc}"
            try:  # the id came from the request's JSON: it can be written back
                return jsonout.dumps(self.error_response(response.get("id"), INTERNAL_ERROR, message))
            except TypeError:
                return jsonout.dumps(self.error_response(None, INTERNAL_ERROR, message))

    def error_response(self, id: Any, code: str, message: str, query: str = "") -> dict[str, Any]:
        """An error envelope with the request's id; the shape every response shares."""
        return {"id": id, **error_envelope(query, code, message).as_dict()}

    async def _serve(self, request: Request | BadRequest) -> dict[str, Any]:
        if isinstance(request, BadRequest):
            self.stats.request("invalid", request.code)
            return self.error_response(request.id, request.code, request.message)
        try:
            if request.op == "stats":
                self.stats.request("stats")
                snapshot = {**self.stats_snapshot(), "runtime": await self.runtime_facts()}
                return {"id": request.id, "status": "ok", "error_code": None, "error_message": None, "stats": snapshot}
            if request.explain:
                return await self._explain(request)
            return await self._query(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must cost one response, never the daemon
            self.say(f"internal error on request id={request.id!r}: {exc!r}\n{traceback.format_exc()}")
            self.stats.request("error", INTERNAL_ERROR)
            return self.error_response(
                request.id, INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}", request.query or ""
            )

    async def _explain(self, request: Request) -> dict[str, Any]:
        assert request.query is not None
        snapshot = self._snapshot
        router, installed = snapshot.router, snapshot.installed
        if installed is None:
            return self._installed_error(request, snapshot)
        try:
            plan = await router.plan(request.query, installed, deadline_ms=request.deadline_ms)
        except InvalidQuery as exc:
            self.stats.request("error", exc.error_code)
            return self.error_response(request.id, exc.error_code, str(exc), request.query)
        self.stats.request("plan")
        cooling = self.cooldown.snapshot() if router.cooldown is not None else {}
        return {
            "id": request.id,
            "query_echo": request.query,
            "status": "plan",
            "error_code": None,
            "error_message": None,
            **plan.as_dict(),
            "cooldown": {key: cooling[key] for key in (s.health_key for s in plan.steps) if key in cooling},
        }

    def _installed_error(self, request: Request, snapshot: Snapshot) -> dict[str, Any]:
        exc = snapshot.installed_error
        assert exc is not None
        self.stats.request("error", exc.error_code)
        return self.error_response(request.id, exc.error_code, str(exc), request.query or "")

    async def _query(self, request: Request) -> dict[str, Any]:
        assert request.query is not None
        started = time.perf_counter()
        # A reload during the query swaps the snapshot for the next request, not this one.
        snapshot = self._snapshot
        router, installed = snapshot.router, snapshot.installed
        if installed is None:
            return self._installed_error(request, snapshot)
        slots = self._semaphore()
        self._in_flight += 1
        try:
            async with slots:
                try:
                    envelope = await self._route(router, installed, request)
                except RouterError as exc:  # a backend that cannot be created (openclaw.json): this query's error
                    self.stats.request("error", exc.error_code)
                    return self.error_response(request.id, exc.error_code, str(exc), request.query)
        finally:
            self._in_flight -= 1
        if self.watcher.behind(router.instances()):
            self.watcher.stale = False
            await self.watcher.watch_backends(self.router.instances())  # a backend was created: watch its data
        response = {"id": request.id, **envelope.as_dict()}
        self.stats.query(response, (time.perf_counter() - started) * 1000)
        return response

    @staticmethod
    async def _route(router: Router, installed: Installed, request: Request) -> Envelope:
        assert request.query is not None
        envelope = await router.route(
            request.query,
            installed,
            timeout_ms=request.timeout_ms,
            limit=request.limit,
            deadline_ms=request.deadline_ms,
            scope=request.scope,
            window=request.window,
        )
        if request.min_relevance is None and request.max_chars is None:
            return envelope
        return trim.apply(envelope, trim.Trim(min_relevance=request.min_relevance, max_chars=request.max_chars))

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots_loop is not loop:
            self._slots, self._slots_loop = asyncio.Semaphore(self.concurrency), loop
        return self._slots

    def stats_snapshot(self) -> dict[str, Any]:
        snapshot = self._snapshot
        return {
            **self.stats.snapshot(),
            "in_flight": self._in_flight,
            "concurrency": self.concurrency,
            "pid": os.getpid(),
            "config": str(self.config_path),
            "backends_json": str(self.backends_path),
            "backends_json_error": str(snapshot.installed_error)
            if snapshot.installed is None and snapshot.installed_error
            else None,
            "cooldown": self.cooldown.snapshot() if snapshot.router.cooldown is not None else None,
            "deadline_ms": snapshot.config.deadline_ms,
        }

    async def runtime_facts(self) -> dict[str, Any]:
        """What the live backend instances hold (qmd's warm engine: pid, RSS, loaded models)."""
        facts: dict[str, Any] = {}
        for name, instance in self.router.instances().items():
            if isinstance(instance, DescribedBackend):
                try:
                    facts[name] = await asyncio.wait_for(instance.runtime_facts(), 3.0)
                except Exception as exc:  # a status line must not fail the stats request
                    facts[name] = {"error": f"{type(exc).__name__}: {exc}"}
        return facts

    # ------------------------------------------------------------------ reload and watching

    def reload(self, *, force: bool = False) -> dict[str, str]:
        """Re-read whichever of the two files changed on disk since last read; with ``force``
        (SIGHUP), router-config.json and what it names (the calibration file) in any case.

        Returns ``{"router-config.json"|"backends.json": "reloaded"|"failed"}`` for the files
        that changed. Called by the watcher; transports may call it too (SIGHUP).
        """
        before = self._snapshot
        self._snapshot, outcome = self._reloader.reload(before, force=force)
        if self._snapshot.router is not before.router:
            self.watcher.stale = True  # the new router may create backends whose data to watch
        for result in outcome.values():
            self.stats.reloads["ok" if result == RELOADED else "failed"] += 1
        return outcome

    def _report(self, kind: str, message: str) -> None:
        """A cooldown or reload event: on stderr and in router.log."""
        self.say(message)
        self.log.event(kind, message)

    async def start(self) -> None:
        """Start watching router-config.json and backends.json (idempotent)."""
        if self.watcher.running:
            return
        self.watcher.start()
        # Let the watcher register its inotify watches, then catch changes made before that.
        for _ in range(3):
            await asyncio.sleep(0)
        self.reload()
        await self.watcher.watch_backends(self.router.instances())

    def warm_up(self) -> int:
        """Start each usable backend's warm-up (:class:`~memory_router.backends.base.WarmableBackend`:
        qmd's engine and models) in the background; returns how many were started. Every
        transport calls it once its own start-up is done: nothing waits for it, and a failure is
        only reported (stderr, router.log, ``daemon status``), never fatal."""
        installed = self.installed
        if installed is None:
            return 0
        started = 0
        for name in self.router.config.backends:
            if installed.unusable_reason(name) is not None:
                continue
            try:
                instance = self.router.backend(name)  # created now rather than on its first query
            except Exception as exc:  # noqa: BLE001 - e.g. an openclaw.json that cannot be used: each query says so
                self.say(f"warning: cannot create backend {name}: {exc}")
                continue
            if isinstance(instance, WarmableBackend):
                task = asyncio.create_task(self._warm(name, instance), name=f"warm-{name}")
                self._warming.add(task)
                task.add_done_callback(self._warming.discard)
                started += 1
        if self.watcher.running:  # the instances made here watch their data now, not on a first query
            task = asyncio.create_task(self.watcher.watch_backends(self.router.instances()), name="watch-backends")
            self._warming.add(task)
            task.add_done_callback(self._warming.discard)
        return started

    async def _warm(self, name: str, instance: WarmableBackend) -> None:
        try:
            await instance.warm()
            facts = await instance.runtime_facts() if isinstance(instance, DescribedBackend) else {}
        except Exception as exc:  # noqa: BLE001 - a warm-up never takes the daemon down
            self.say(f"warning: warming up {name} failed: {type(exc).__name__}: {exc}")
            self.log.event("warm_failed", f"backend={name} {type(exc).__name__}: {exc}")
            return
        warmup = facts.get("warmup")
        if isinstance(warmup, dict) and warmup.get("state"):
            self.say(f"{name}: warm-up {describe_warmup(warmup)}")

    async def aclose(self) -> None:
        """Stop watching and stop the backends' helper processes (qmd's warm engine); in-flight
        requests are the transport's business."""
        for task in list(self._warming):
            task.cancel()
        for instance in self.router.instances().values():
            await aclose_quietly(instance)
        await self.watcher.stop()

    async def __aenter__(self) -> Service:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _stderr(message: str) -> None:
    try:
        say(message, who="memory-router serve")
    except (OSError, ValueError):
        # Nobody reads our stderr any more (EPIPE, closed). A diagnostic must never stop the
        # daemon (a signal handler says why it stops), and the buffered text must not fail the
        # interpreter's last flush: later diagnostics go nowhere.
        _drop_stderr()


def _drop_stderr() -> None:
    import os

    broken = sys.stderr
    sink = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - replaces sys.stderr for good
    sys.stderr = sink
    if sys.stdout is broken:  # serve's stdio transport points sys.stdout at stderr
        sys.stdout = sink
    # Marked closed, it drops what it still buffers instead of failing the interpreter's last
    # flush; fd 2 itself stays open (the standard streams' files have closefd=False).
    raw = getattr(getattr(broken, "buffer", None), "raw", getattr(broken, "buffer", None))
    if raw is not None and getattr(raw, "closefd", True) is False:
        try:
            raw.close()
        except (OSError, ValueError):
            pass
