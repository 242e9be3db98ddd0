"""``backends.<name>`` for ``"type": "qmd"`` in router-config.json: the qmd backend's settings.

**Isolation.** A ``.qmd/index.yml`` in qmd's working directory or any parent replaces the
configured index and config (even with ``INDEX_PATH`` set; observed). So qmd runs from a
controlled directory (the state directory's ``qmd-cwd/``) *and* always gets ``--index NAME``
(``index``, qmd's default name, unless configured), which makes qmd skip that lookup. Setting
``working_dir`` without ``index`` is the way to use a project's ``.qmd/`` on purpose. ``index_path``,
``config_dir``, ``cache_dir`` (models live in ``<cache_dir>/qmd/models``) and ``index`` become
``INDEX_PATH``, ``QMD_CONFIG_DIR``, ``XDG_CACHE_HOME`` and ``--index``; unset ones keep qmd's
defaults (``~/.cache/qmd/index.sqlite``, ``~/.config/qmd/index.yml``), i.e. the user's own index.
"""

from __future__ import annotations

from collections.abc import Mapping

from memory_router.backends.common.settings import EMPTY_MAPPING, AdapterSettings, Limits

TYPE_CHECKING = False  # not typing's: building settings on a cold query needs no typing
if TYPE_CHECKING:
    from typing import Annotated, Literal


class RefreshSettings(AdapterSettings):
    """``backends.<qmd>.refresh`` in router-config.json: keeping the index fresh in the daemon."""

    enabled: bool = True
    """Watch the collections' folders and run ``qmd update`` after a change (long-lived routers only:
    a one-shot query never writes the index)."""
    debounce_ms: Annotated[int, Limits(ge=0, le=600_000)] = 1500
    """Quiet time after the last change before the update starts (a burst of writes costs one update)."""
    max_wait_ms: Annotated[int, Limits(ge=0, le=3_600_000)] = 15_000
    """A folder that never goes quiet is still updated this long after its first unindexed change."""
    embed: bool = True
    """Run ``qmd embed`` after the update when the index's embedding model is on disk."""
    timeout_s: Annotated[float, Limits(gt=0, le=7200)] = 600.0
    """Each ``qmd update`` / ``qmd embed`` is killed (its process group) after this long."""


class Settings(AdapterSettings):
    """``backends.<name>`` in router-config.json for ``"type": "qmd"`` (all optional)."""

    qmd: str | None = None
    """qmd to run: its ``dist/cli/qmd.js``, the ``@tobilu/qmd`` package folder, or an executable."""
    node: str | None = None
    """Node >= 22 to run qmd.js with."""
    collections: tuple[str, ...] = ()
    """Collections to search (``-c`` each); empty = all collections of the index. Unscoped queries only."""
    agent_collections: Mapping[str, tuple[str, ...]] = EMPTY_MAPPING
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
