"""QMD: the real ``qmd`` CLI (``@tobilu/qmd`` 2.8.x on Node >= 22) as a memory backend.

**Modes.** ``search`` -> ``qmd search`` (BM25), ``vsearch`` -> ``qmd vsearch`` (vectors),
``query`` -> ``qmd query --explain`` (hybrid + rerank). Every call is an argument list, options
first, then ``--``, then the query (a query starting with ``-`` is never read as a flag)::

    node .../dist/cli/qmd.js search --json -n 10 -c notes -- parseAuthToken

run through :mod:`.common.process` in its own session, so the router's timeout (task cancellation)
kills the whole process group: no qmd or node process outlives a query.

**Isolation.** qmd runs from a controlled directory with ``--index NAME``: see :mod:`.settings`.

**Keyword queries.** ``search`` sends a keyword form of the query and relaxes it when the strict
form finds nothing (see :mod:`.keywords`); the form that answered is ``query_sent``.

**Relevance.** Per mode, documented in :mod:`.parse`: search ``coverage * (0.6 + 0.4 *
score/best)``, vsearch ``(cosine - 0.3) / 0.5``, query the reranker's score (else the best
vector/BM25 evidence). 0.4 means "usable" as for every backend.

**Failing fast.** vsearch/query load GGUF models; when one is missing qmd retries the download
for ~12 minutes. The adapter checks the model cache first. The generate (query expansion) and
rerank models are optional: when one is absent the call skips it (a typed ``lex:``/``vec:``
document, ``--no-rerank``) and the attempt's ``note`` says so. A missing embedding model answers
``BACKEND_UNAVAILABLE`` with the fix (``qmd pull``) at once. With ``CI`` set qmd refuses model work ("LLM operations are
disabled in CI"); that, a missing qmd/Node, and an index without embeddings are
``BACKEND_UNAVAILABLE`` too; other failures are ``BACKEND_ERROR`` with qmd's stderr tail.

**Transports.** The backend talks to a :class:`~.transports.QmdTransport`: a process per call, the
warm engine of a long-lived router or a running ``qmd mcp --http`` (:mod:`.transports`). Query
rewriting and scoring are the same over all three.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_router.backends import BackendContext, DemoUnavailable
from memory_router.backends.base import (
    BACKEND_ERROR,
    BACKEND_UNAVAILABLE,
    BackendRequest,
    BackendResponse,
    BlockingAdapter,
    Probe,
)
from memory_router.backends.common.settings import settings_from_json
from memory_router.backends.qmd.layout import DEFAULT_MODE as DEFAULT_MODE
from memory_router.backends.qmd.layout import MODES as MODES
from memory_router.backends.qmd.layout import QmdLayout
from memory_router.backends.qmd.locate import QmdNotFound as QmdNotFound
from memory_router.backends.qmd.locate import resolve_command as resolve_command
from memory_router.backends.qmd.settings import Settings as Settings
from memory_router.config.envvars import QMD

if TYPE_CHECKING:
    from memory_router.backends.qmd.backend import QmdBackend

ENV_VARS: frozenset[str] = QMD  # the environment variables it reads: memory_router.config.envvars


def create(name: str, settings: Settings, context: BackendContext) -> QmdBackend | QmdUnavailable:
    """The backend. A one-shot router (``context.long_lived`` false: the CLI) without a qmd server
    (``http_url``) looks for qmd now: where it cannot run (no qmd, no Node >= 22) every search of
    this process would answer ``BACKEND_UNAVAILABLE`` with what is missing, and
    :class:`QmdUnavailable` says so without importing qmd's transports or asyncio (a fifth of a
    cold query). A long-lived router looks at every search (qmd may be installed meanwhile)."""
    if not context.long_lived and not settings.http_url:
        unavailable = QmdUnavailable(name, settings, context)
        try:
            command = resolve_command(settings.qmd, settings.node, unavailable.env())
        except QmdNotFound as exc:
            unavailable.reason = str(exc)
            return unavailable
        from memory_router.backends.qmd.backend import QmdBackend

        return QmdBackend(name, settings, context, command=command)
    from memory_router.backends.qmd.backend import QmdBackend

    return QmdBackend(name, settings, context)


class QmdUnavailable(QmdLayout, BlockingAdapter):
    """A one-shot router's qmd backend where qmd cannot run: it answers each search as
    :meth:`.backend.QmdBackend.search` does then (``BACKEND_ERROR`` for a mode qmd does not have,
    else ``BACKEND_UNAVAILABLE`` naming what is missing and how to install it), at once and
    blocking, so the one-shot driver needs no event loop for it; :meth:`probe` says the same."""

    reason = ""

    def __init__(self, name: str, settings: Settings, context: BackendContext) -> None:
        self.name, self.settings, self.context = name, settings, context

    def search_blocking(self, request: BackendRequest, stop: threading.Event) -> BackendResponse:
        mode = request.mode or DEFAULT_MODE
        if mode not in MODES:
            return BackendResponse.failure(
                self.name, request.query, BACKEND_ERROR, f"qmd has no mode {mode!r}; use one of {sorted(MODES)}"
            )
        return BackendResponse.failure(self.name, request.query, BACKEND_UNAVAILABLE, self.reason, duration_ms=0)

    def probe(self) -> Probe:
        return Probe(False, self.reason)

    def freshness_facts(self) -> dict[str, Any] | None:
        return None  # as QmdBackend's without a qmd


# --------------------------------------------------------------------------- demo

DEMO_COLLECTION = "demo"
DEMO_MASK = "**/*.{md,ts}"


def demo_setup(workspace: Path, state_dir: Path) -> dict[str, Any]:
    """Index the demo workspace (markdown and TypeScript) into a demo qmd collection under
    ``state_dir/qmd``; return the settings that point the demo's router at it."""
    import subprocess

    from memory_router.backends.qmd.backend import QmdBackend
    from memory_router.backends.qmd.indexing import (
        build_collection,
        embed_collection,
        embedding_env,
        local_embedding_model,
    )

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


# What the module offered before the backend moved to .backend: imported when first asked for.
_MOVED = {
    "QmdBackend": "backend",
    "WARM_TIMEOUT_S": "backend",
    "build_collection": "indexing",
    "embed_collection": "indexing",
    "embedding_env": "indexing",
    "local_embedding_model": "indexing",
    "CliTransport": "transports",
    "EngineTransport": "transports",
    "HttpTransport": "transports",
}


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"memory_router.backends.qmd.{module}"), name)
