"""Where a qmd backend's files are, as qmd itself resolves them: its environment (``INDEX_PATH``,
``QMD_CONFIG_DIR``, ``XDG_CACHE_HOME`` from the settings), working directory, ``--index`` name,
``index.yml`` and SQLite index; and the calibration key those decide.

Pure functions of a backend's :class:`~.settings.Settings` and :class:`~memory_router.backends.BackendContext`,
apart from the backend that runs qmd (:mod:`.backend`): a one-shot router that cannot run qmd
answers with these alone (:class:`.adapter.QmdUnavailable`), without qmd's transports or asyncio.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from memory_router.backends import BackendContext
from memory_router.backends.qmd.locate import configured_models, missing_models
from memory_router.backends.qmd.settings import Settings

MODES = frozenset({"search", "vsearch", "query"})
DEFAULT_MODE = "query"


class QmdLayout:
    """A qmd backend's name, settings and context, and what they say about qmd's files."""

    name: str
    settings: Settings
    context: BackendContext

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
