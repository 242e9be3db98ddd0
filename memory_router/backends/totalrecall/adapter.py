"""Total Recall: markdown memory tiers in the project, searched in-process.

Layout under the memory root: Total Recall's own tiers, then OpenClaw's memory files (what
memory-core indexes by default; docs/backends-openclaw-layout.md)::

    CLAUDE.local.md            working memory            tier working    weight 1.00
    memory/registers/*.md      decisions, people, ...    tier registers  weight 0.95
    MEMORY.md, memory.md       OpenClaw long-term memory tier longterm   weight 0.95
    memory/daily/YYYY-MM-DD.md timestamped daily log     tier daily      weight 0.90
    memory/YYYY-MM-DD[-x].md   OpenClaw daily notes      tier daily      weight 0.90
    memory/**/*.md (others)    OpenClaw topic notes      tier notes      weight 0.85
    memory/archive/**/*.md     history                   tier archive    weight 0.75

A daily note is dated by its file name (and ``[HH:MM]`` lines by their time); other files by
their frontmatter (``event_time``/``record_time``), a claim by its ``last_verified``, else by
the file's mtime. One file reached by two paths (``memory/daily/X.md`` a symlink to
``memory/X.md``) is read once, under the path that is not a symlink. A root holding no memory
file at all answers ``BACKEND_UNAVAILABLE`` ("no memory files under <root>: ..."), not ``empty``.

The root is ``settings.root``, else ``$OPENCLAW_REPO_ROOT``, else the git top level of the
working directory (found by walking up to ``.git``, no subprocess), else OpenClaw's agent
workspace when that folder exists (``agents.defaults.workspace`` in openclaw.json, default
``~/.openclaw/workspace``: :func:`memory_router.config.paths.openclaw_workspace`), which is where an
OpenClaw agent's exec tool runs and is not a git repository.

The package follows a search's path: :mod:`.scan` finds the memory files and their tiers,
:mod:`.parse` splits each into dated entries and their terms, :mod:`.index` keeps every file's
entries and the inverted index up to date, :mod:`.score` ranks entries for a query (the relevance
formula is its docstring), and this module is the adapter: settings, the root, the per-root state
and the search.

**Bounded work.** A memory file larger than ``max_file_bytes`` (default 4 MiB) is skipped, and so
is one that cannot be read (EACCES...) or is not a regular file: the rest of the tree is still
searched, and ``memory-router backends`` lists what was skipped and why. The search is blocking
work (:class:`~.base.BlockingAdapter`: in the daemon it runs on the instance's own threads) and
stops between files (and every few thousand
lines of a file) once the router has given up on the call, so a slow tree never holds threads
that other backends need.

Parsed entries are cached per file by (mtime, size), so a long-lived process re-reads only
files that changed. In the daemon the memory tree is also *watched* (:meth:`watch_paths`,
:meth:`set_watched`, :meth:`invalidate`): a warm query then skips even the walk that stats every
file, until a change under the root (or :data:`WATCHED_RESCAN_S` without one, as a safety net
for missed events) marks the index stale.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path

from memory_router.backends import BackendContext
from memory_router.backends.base import (
    BACKEND_ERROR,
    BACKEND_UNAVAILABLE,
    ON_LOOP_S,
    QUERY_TIMEOUT,
    BackendRequest,
    BackendResponse,
    BlockingAdapter,
    Probe,
    Result,
    Stopwatch,
)
from memory_router.backends.common.definitions import Definition
from memory_router.backends.common.settings import AdapterSettings, Limits
from memory_router.backends.totalrecall.index import DEFAULT_MAX_FILE_BYTES, MemoryIndex
from memory_router.backends.totalrecall.parse import Cancelled, Entry, query_terms
from memory_router.backends.totalrecall.scan import LAYOUT_OF_TIER, no_memory_files, scan_tree, too_big, unreadable
from memory_router.backends.totalrecall.score import rank
from memory_router.config.envvars import TOTALRECALL
from memory_router.config.openclaw import OpenClawConfigInvalid, agent_workspace
from memory_router.config.paths import openclaw_workspace
from memory_router.core.timefmt import iso_z

TYPE_CHECKING = False  # not typing's: a cold query builds these settings without importing typing
if TYPE_CHECKING:
    from typing import Annotated

    # A ranking: its hits, why the root holds no memory (None: it does), the note on what it left
    # out, and the weight (idf) of each of the query's terms where a hit is longer than it shows.
    _Found = tuple[list[tuple[float, Entry, Definition | None]], str | None, str | None, dict[str, float]]

ENV_VARS: frozenset[str] = TOTALRECALL  # the environment variables it reads: memory_router.config.envvars

WATCHED_RESCAN_S = 5.0  # even when watched, walk the tree at least this often
MODES = None  # a single mode: chain steps name none


class Settings(AdapterSettings):
    """``backends.<name>`` keys for ``"type": "totalrecall"`` in router-config.json (all optional)."""

    root: str | None = None
    """Memory root: the project or OpenClaw workspace holding CLAUDE.local.md, MEMORY.md, memory/."""
    max_file_bytes: Annotated[int, Limits(ge=1, le=1 << 40)] = DEFAULT_MAX_FILE_BYTES
    """A memory file larger than this is skipped (and listed by ``memory-router backends``)."""


def create(name: str, settings: Settings, context: BackendContext) -> TotalRecallBackend:
    fixed = _fixed_root(settings, context)
    shared = Path(os.path.expanduser(settings.root)) if settings.root else None
    if fixed is not None:
        return TotalRecallBackend(
            name,
            fixed,
            settings.max_file_bytes,
            shared_root=shared,
            environ=context.environ,
            long_lived=context.long_lived,
        )
    environ = context.environ
    # The root is OpenClaw's workspace: read now (an openclaw.json that cannot be used is a
    # configuration error, exit 2), then again per query (cached by the file's stat), so a moved
    # workspace (agents.defaults.workspace changed) is followed by a long-lived daemon.
    return TotalRecallBackend(
        name,
        _workspace_root(environ),
        settings.max_file_bytes,
        resolve=lambda: _workspace_root(environ),
        environ=environ,
        long_lived=context.long_lived,
    )


def resolve_root(settings: Settings, context: BackendContext) -> Path | None:
    """The memory root of an unscoped query (see the module docstring for the order)."""
    fixed = _fixed_root(settings, context)
    return fixed if fixed is not None else _workspace_root(context.environ)


def _fixed_root(settings: Settings, context: BackendContext) -> Path | None:
    """The root given by the settings, ``$OPENCLAW_REPO_ROOT`` or the working directory's git
    repository: fixed for the instance's life (``None``: none of them; OpenClaw's workspace)."""
    if settings.root:
        return Path(os.path.expanduser(settings.root))
    if env_root := context.environ.get("OPENCLAW_REPO_ROOT"):
        return Path(env_root)
    for directory in (context.cwd, *context.cwd.parents):
        if (directory / ".git").exists():
            return directory
    return None


def _workspace_root(environ: Mapping[str, str]) -> Path | None:
    workspace, _ = openclaw_workspace(environ)
    return Path(workspace) if os.path.isdir(workspace) else None


# What to do when no root is found (the probe's and an unavailable search's message).
NO_ROOT_FIX = (
    "set backends.{name}.root in router-config.json or OPENCLAW_REPO_ROOT, run it inside a git "
    "repository, or give OpenClaw an agent workspace (agents.defaults.workspace, ~/.openclaw/workspace)"
)


def _iso(ts: datetime | None) -> str | None:
    return iso_z(ts) if ts else None


class _RootState:
    """One memory root's index and what is known about its freshness (a plain class: state)."""

    __slots__ = ("index", "lock", "rank_s", "stale", "walked_at", "watched")

    def __init__(self) -> None:
        self.index = MemoryIndex()
        self.lock = threading.Lock()
        self.stale = True
        self.walked_at = 0.0
        self.watched = False  # a watcher reports the changes under this root
        self.rank_s = float("inf")  # how long the last ranking of this index took (none yet: unknown)

    def current(self, now: float) -> bool:
        """Whether the index needs no walk before a query: a watcher reports every change under the
        root, none came since the last walk, and that walk is under :data:`WATCHED_RESCAN_S` old."""
        return self.watched and not self.stale and now - self.walked_at <= WATCHED_RESCAN_S


MAX_ROOTS = 64  # roots (agents' workspaces) whose index one instance keeps; the oldest is dropped


class TotalRecallBackend(BlockingAdapter):
    """Total Recall over one memory root per query: the instance's (``root``: fixed, or OpenClaw's
    workspace resolved again per query when ``resolve`` is given) for an unscoped query, and for a
    query scoped to an agent (``request.scope``) that agent's workspace from openclaw.json's
    roster (:func:`memory_router.config.openclaw.agent_workspace`), unless
    ``backends.<name>.root`` is set: a configured root is shared by every agent, on purpose.
    The process environment and working directory (``$OPENCLAW_REPO_ROOT``, a git repository)
    belong to the Gateway, not to an agent, so a scoped query never reads them. Each root has its
    own index (at most :data:`MAX_ROOTS`)."""

    def __init__(
        self,
        name: str,
        root: Path | None,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        *,
        resolve: Callable[[], Path | None] | None = None,
        shared_root: Path | None = None,
        environ: Mapping[str, str] | None = None,
        long_lived: bool = False,
    ) -> None:
        self.name = name
        self.long_lived = long_lived  # the daemon: a big file's background parse outlives the query
        self._root = root
        self._resolve = resolve
        self.shared_root = shared_root
        self.environ = os.environ if environ is None else environ
        self.max_file_bytes = max_file_bytes
        self._states: dict[Path | None, _RootState] = {}
        self._states_lock = threading.Lock()
        self._watched = False  # a watcher calls invalidate() on changes under watch_paths()
        self._watch_root: Path | None = root

    @property
    def root(self) -> Path | None:
        """The root of an unscoped query now (OpenClaw's workspace is looked up again: cheap, the
        parsed openclaw.json is cached by its stat)."""
        if self._resolve is not None:
            try:
                self._root = self._resolve()
            except OpenClawConfigInvalid:
                pass  # the last good root; the search reports the file
        return self._root

    def _state(self, root: Path | None) -> _RootState:
        with self._states_lock:
            state = self._states.get(root)
            if state is None:
                if len(self._states) >= MAX_ROOTS:
                    oldest = next(r for r in self._states if r != self._watch_root)
                    del self._states[oldest]
                state = self._states[root] = _RootState()
                state.watched = self._watched and root == self._watch_root
            return state

    @property
    def _index(self) -> MemoryIndex:
        """The index of the unscoped query's root (for tools and tests)."""
        return self._state(self.root).index

    @property
    def _lock(self) -> threading.Lock:
        """The lock of the unscoped query's root (held while a search reads its tree)."""
        return self._state(self.root).lock

    def watch_paths(self) -> list[tuple[Path, bool]]:
        """``(folder, recursive)`` whose changes can alter the index: the root itself (for
        CLAUDE.local.md and MEMORY.md) and ``memory/``. Empty when they do not all exist (nothing
        to rely on). Only the unscoped query's root is watched; agents' roots walk their tree."""
        root = self.root
        if root is None or not (root / "memory").is_dir():
            return []
        self._watch_root = root
        return [(root, False), (root / "memory", True)]

    def set_watched(self, watched: bool) -> None:
        """A watcher is (or is no longer) reporting changes under :meth:`watch_paths`."""
        self._watched = watched
        with self._states_lock:
            for root, state in self._states.items():
                state.watched = watched and root == self._watch_root
                state.stale = True

    def invalidate(self) -> None:
        """Something under the root changed: the next query walks the tree again."""
        with self._states_lock:
            for state in self._states.values():
                state.stale = True

    def calibration_key(self, mode: str | None) -> str:
        """The calibration map (memory_router.core.calibration): one mode, one map."""
        return "totalrecall"

    def probe(self) -> Probe:
        try:
            root = self._resolve() if self._resolve is not None else self._root
        except OpenClawConfigInvalid as exc:
            return Probe(False, str(exc))
        if root is None:
            return Probe(False, "no memory root: " + NO_ROOT_FIX.format(name=self.name))
        if not root.is_dir():
            return Probe(False, f"memory root {root} does not exist")
        found = scan_tree(root)
        skipped = []
        for _, rel, st in found:
            why = too_big(st.st_size, self.max_file_bytes)
            if why is None:
                why = unreadable(root.joinpath(*rel.split("/")))
            if why is not None:
                skipped.append({"path": rel, "reason": why})
        count = len(found) - len(skipped)
        facts: dict[str, object] = {"root": str(root), "files": count, "max_file_bytes": self.max_file_bytes}
        if found:
            layouts = sorted({LAYOUT_OF_TIER[tier] for tier, _, _ in found})
            facts["tiers"] = dict(sorted(Counter(tier for tier, _, _ in found).items()))
            detail = f"{count} memory files under {root} ({' + '.join(layouts)} layout)"
        else:
            detail = no_memory_files(root, {}, self.name)
        if skipped:
            facts["skipped"] = skipped
            first = skipped[0]
            more = f" and {len(skipped) - 1} more (facts.skipped)" if len(skipped) > 1 else ""
            detail += f"; {len(skipped)} skipped: {first['path']}: {first['reason']}{more}"
        return Probe(count > 0, detail, facts)

    def skipped(self) -> dict[str, str]:
        """Files the index left out, as of the last search: relative path -> why."""
        return {rel: why for rel, (_, why) in self._index.skipped.items()}

    def _root_for(self, request: BackendRequest) -> tuple[Path | None, str | None, bool]:
        """``(root, problem, scoped)`` for this call: the root to read, or why there is none
        (``root`` None and ``problem`` None too: a scoped query whose agent has no memory root,
        answered ``empty`` with the reason as its note, never a failure counted against the
        backend for every other agent)."""
        scope = request.scope
        if scope is None:
            if self._resolve is not None:
                try:
                    self._root = self._resolve()
                except OpenClawConfigInvalid as exc:
                    return None, str(exc), False
            root = self._root
            if root is None or not root.is_dir():
                where = "no memory root found" if root is None else f"memory root {root} does not exist"
                return None, f"{where}; " + NO_ROOT_FIX.format(name=self.name), False
            return root, None, False
        if self.shared_root is not None:
            return self.shared_root, None, True  # backends.<name>.root: every agent's, on purpose
        try:
            workspace, where = agent_workspace(scope.agent, self.environ)
        except OpenClawConfigInvalid as exc:
            return None, str(exc), True
        root = Path(workspace)
        if not root.is_dir():
            return None, None, True
        return root, None, True

    def search_blocking(self, request: BackendRequest, stop: threading.Event) -> BackendResponse:
        """:class:`~.base.BlockingBackend` (the async ``search`` is :class:`~.base.BlockingAdapter`'s):
        the search in the caller's thread; ``stop`` ends a tree read at its next check (between
        files, every 1024 lines of one)."""
        watch = Stopwatch()
        root, problem, scoped = self._root_for(request)
        if root is None:
            if problem is None:  # this agent has no workspace: nothing of its memory here
                absent = f"nothing of this agent's memory here: {_workspace_missing(request, self.environ)}"
                return BackendResponse.from_results(self.name, request.query, [], duration_ms=watch.ms, note=absent)
            return BackendResponse.failure(
                self.name, request.query, BACKEND_UNAVAILABLE, problem or "no memory root", duration_ms=watch.ms
            )
        state = self._state(root)
        # Another call may be reading the tree (or was abandoned mid-read and is stopping): wait
        # no longer than this call's own budget for it.
        if not state.lock.acquire(timeout=max(0.001, request.timeout_s)):
            return BackendResponse.failure(
                self.name,
                request.query,
                QUERY_TIMEOUT,
                f"another search was still reading the memory under {root}",
                duration_ms=watch.ms,
            )
        index = state.index
        try:
            now = time.monotonic()
            if not state.current(now):
                state.stale = False  # before the walk: a change during it marks it stale again
                state.walked_at = now
                # Big files are parsed in the background; wait for them at most half the budget.
                index.refresh(root, self.max_file_bytes, stop, wait_until=now + request.timeout_s / 2)
                if index.pending():
                    state.stale = True  # the next query merges what the background parse finished
            found = self._ranked(state, root, request)
        except Cancelled:
            state.stale = True  # the walk did not finish
            return BackendResponse.failure(
                self.name, request.query, QUERY_TIMEOUT, "cancelled by the router", duration_ms=watch.ms
            )
        except OSError as exc:
            state.stale = True  # the walk did not finish: never trust a partial index
            return BackendResponse.failure(
                self.name,
                request.query,
                BACKEND_ERROR,
                f"reading Total Recall memory under {root}: {exc}",
                duration_ms=watch.ms,
            )
        finally:
            state.lock.release()
        return self._answer(request, found, scoped, watch)

    def search_now(self, request: BackendRequest) -> BackendResponse | None:
        """:meth:`~.base.BlockingAdapter.search_now`: an unscoped query ranked at once against the
        daemon's watched index of its root, when that index needs no walk (:meth:`_RootState.current`),
        no other search holds it and its last ranking took under half of :data:`~.base.ON_LOOP_S`;
        else ``None``. The ranking, the note and the answer are :meth:`search_blocking`'s."""
        if request.scope is not None:
            return None  # an agent's root: its workspace is looked up in openclaw.json, its tree walked
        watch = Stopwatch()
        root = self.root  # OpenClaw's workspace: a stat of openclaw.json (its parse is cached by it)
        with self._states_lock:
            state = self._states.get(root)
        if state is None or not state.current(time.monotonic()) or state.rank_s > ON_LOOP_S / 2:
            return None
        if root is None or not root.is_dir():  # gone before its watcher said so: the threads say what is wrong
            return None
        if not state.lock.acquire(blocking=False):
            return None
        try:
            found = self._ranked(state, root, request)
        finally:
            state.lock.release()
        return self._answer(request, found, False, watch)

    def _ranked(self, state: _RootState, root: Path, request: BackendRequest) -> _Found:
        """The query ranked against ``state``'s index as it stands (its lock held), the time it
        took kept for :meth:`search_now`."""
        index = state.index
        started = time.perf_counter()
        hits = rank(index, request.query, request.limit, datetime.now(timezone.utc), _in_window(request))
        state.rank_s = time.perf_counter() - started
        skipped = {rel: why for rel, (_, why) in index.skipped.items()}
        nothing = None if index.files or index.indexing else no_memory_files(root, skipped, self.name)
        long = any(entry.body is not None for _, entry, _ in hits)
        weights = {t: index.idf_of(t) for t in query_terms(request.query)} if long else {}
        return hits, nothing, index.indexing_note(self.long_lived), weights

    def _answer(self, request: BackendRequest, found: _Found, scoped: bool, watch: Stopwatch) -> BackendResponse:
        hits, nothing, note, weights = found
        if nothing is not None:
            # Not "empty": that would tell the agent "nothing remembered" about a root that holds
            # no memory at all (a wrong root, or none written yet).
            if scoped:
                return BackendResponse.from_results(self.name, request.query, [], duration_ms=watch.ms, note=nothing)
            return BackendResponse.failure(self.name, request.query, BACKEND_UNAVAILABLE, nothing, duration_ms=watch.ms)
        results = [_result(self.name, rel, entry, where, weights) for rel, entry, where in hits]
        return BackendResponse.from_results(
            self.name,
            request.query,
            results,
            duration_ms=watch.ms,
            query_sent=" ".join(query_terms(request.query)) or None,
            note=note,
        )


def _in_window(request: BackendRequest) -> Callable[[Entry], bool] | None:
    """The entries a time window keeps: those whose time is written down (a daily line, a dated
    note, frontmatter; never a file's mtime, which a checkout or a copy resets) inside it."""
    window = request.window
    if window is None:
        return None
    return lambda e: e.dated and e.timestamp is not None and window.meets(e.timestamp, e.timestamp + _INSTANT)


_INSTANT = timedelta(microseconds=1)


def _workspace_missing(request: BackendRequest, environ: Mapping[str, str]) -> str:
    assert request.scope is not None
    workspace, where = agent_workspace(request.scope.agent, environ)
    return f"agent {request.scope.agent}'s workspace {workspace} ({where}) does not exist"


def _result(
    source: str,
    relevance: float,
    entry: Entry,
    definition: Definition | None = None,
    weights: Mapping[str, float] | None = None,
) -> Result:
    extra = {}
    if definition is not None:
        extra = {"definition_line": entry.file_line(definition.line), "definition_kind": definition.kind}
    content = entry.text
    if weights and entry.body is not None:
        # Only an entry longer than a result shows loads .shown: a cold query's module count is
        # budgeted (tests/unit/test_cold_start.py), and most memories hold no such entry.
        from memory_router.backends.totalrecall.shown import shown_part

        shown = shown_part(entry, weights)
        content = shown.text
        if shown.last_line is not None:  # lines left out: the content's line count no longer says where it ends
            extra["end_line"] = shown.last_line
    return Result(
        content=content,
        relevance=relevance,
        source=source,
        timestamp=_iso(entry.timestamp),
        path=entry.path,
        line=entry.line,
        tier=entry.tier,
        heading=entry.heading or None,
        superseded=entry.superseded,
        **extra,
    )


def iter_entries(root: Path) -> Iterable[Entry]:
    """All entries under a root (for tools and tests)."""
    index = MemoryIndex()
    index.refresh(root)
    return list(index.entries)


def demo_setup(workspace: Path, state_dir: Path) -> dict[str, str]:
    """The demo workspace *is* a Total Recall project: point the adapter at it."""
    return {"root": str(workspace)}
