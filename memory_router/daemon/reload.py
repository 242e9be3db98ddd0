"""Hot reload of router-config.json and backends.json for a :class:`~.service.Service`.

A :class:`Reloader` re-reads whichever of the two files changed on disk since it was last read,
and returns a new :class:`Snapshot` (the router, backends.json) that the service swaps in in one
assignment: a request holds the snapshot it started with, so it never sees a router from one
reload and a backends.json from another. A file that fails validation is reported (stderr,
router.log) and the last good version keeps serving; a config reload keeps the instances of
backends whose settings did not change (and so their warm caches) and closes the others.

The Reloader knows nothing of the service: it is given the two paths, how to build a router, the
cooldown and where to report, so this module does not import :mod:`.service`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from memory_router.backends.base import Backend, ClosableBackend
from memory_router.config.installed import Installed, load_installed
from memory_router.config.router_config import RouterConfig, load_config
from memory_router.core.cooldown import Cooldown
from memory_router.core.errors import RouterError
from memory_router.core.frozen import Frozen
from memory_router.daemon.watch import Watched, signature
from memory_router.routing.router import Router

RELOADED = "reloaded"
FAILED = "failed"


class Snapshot(Frozen):
    """What a service answers with, replaced whole by a reload and never edited.

    ``installed`` is None while backends.json has never been valid; ``installed_error`` then says
    why (queries answer its error code until the file is fixed)."""

    router: Router
    installed: Installed | None
    installed_error: RouterError | None

    @property
    def config(self) -> RouterConfig:
        return self.router.config


class Reloader:
    """Re-reads router-config.json and backends.json when they change, into a new :class:`Snapshot`.

    ``make_router(config, keep)`` builds a router reusing the ``keep`` instances; ``overrides``
    names the backends whose instances the caller supplied (never closed nor replaced here);
    ``report(kind, message)`` receives ``RELOAD``/``RELOAD_FAILED`` lines."""

    def __init__(
        self,
        config_path: Path,
        backends_path: Path,
        *,
        make_router: Callable[[RouterConfig, Mapping[str, Backend]], Router],
        cooldown: Cooldown,
        overrides: Collection[str],
        report: Callable[[str, str], None],
    ) -> None:
        self.config_path = config_path
        self.backends_path = backends_path
        self._make_router = make_router
        self._cooldown = cooldown
        self._overrides = overrides
        self._report = report
        # Noted now: changes from here on reload.
        self._config_file = Watched(config_path, signature(config_path))
        self._backends_file = Watched(backends_path, signature(backends_path))

    def reload(self, current: Snapshot, *, force: bool = False) -> tuple[Snapshot, dict[str, str]]:
        """The snapshot to serve next (``current`` itself if nothing changed or nothing could be
        read), and ``{"router-config.json"|"backends.json": "reloaded"|"failed"}`` for the files
        that changed (see :meth:`.service.Service.reload`).

        ``force`` (SIGHUP: the user asks for it): router-config.json is read again even when it
        did not change, and a new router is built on it, so what the config only names is read
        again too (the calibration file it points at, refitted in place); unchanged backends keep
        their instances (and their warm caches)."""
        outcome: dict[str, str] = {}
        snapshot = current
        sig = signature(self.config_path)
        if sig != self._config_file.signature or force:
            self._config_file = Watched(self.config_path, sig)
            snapshot, outcome[self.config_path.name] = self._reload_config(snapshot)
        sig = signature(self.backends_path)
        if sig != self._backends_file.signature:
            self._backends_file = Watched(self.backends_path, sig)
            snapshot, outcome[self.backends_path.name] = self._reload_installed(snapshot)
        return snapshot, outcome

    def _reload_config(self, current: Snapshot) -> tuple[Snapshot, str]:
        try:
            config = load_config(self.config_path)
        except RouterError as exc:
            return current, self._reload_failed(exc, kept=True)
        old = current.router
        keep: dict[str, Backend] = {}
        for name, instance in old.instances().items():
            if name in self._overrides:
                continue
            if config.backends.get(name) == old.config.backends.get(name):
                keep[name] = instance  # same type and settings: keep its warm caches
            else:
                self._cooldown.forget(name)
                close_quietly(instance)
        router = self._make_router(config, keep)
        message = f"{self.config_path} reloaded: {len(config.rules.rules)} rules, backends {', '.join(config.backends)}"
        return current.replace(router=router), self._reloaded(message)

    def _reload_installed(self, current: Snapshot) -> tuple[Snapshot, str]:
        try:
            installed = load_installed(self.backends_path)
        except RouterError as exc:
            kept = current.installed is not None
            if not kept:  # nothing good to keep: report the current problem
                current = current.replace(installed_error=exc)
            return current, self._reload_failed(exc, kept=kept)
        usable = ", ".join(installed.usable) or "none"
        message = f"{self.backends_path} reloaded: usable backends: {usable}"
        return current.replace(installed=installed, installed_error=None), self._reloaded(message)

    def _reloaded(self, message: str) -> str:
        self._report("RELOAD", message)
        return RELOADED

    def _reload_failed(self, exc: RouterError, *, kept: bool) -> str:
        message = f"reload failed: {exc}" + (" The last good version keeps serving." if kept else "")
        self._report("RELOAD_FAILED", message)
        return FAILED


async def aclose_quietly(instance: object) -> None:
    """Await a :class:`ClosableBackend`'s ``aclose()`` (5 s at most); errors are not ours to report."""
    if isinstance(instance, ClosableBackend):
        try:
            await asyncio.wait_for(instance.aclose(), 5.0)
        except Exception:
            pass


def close_quietly(instance: object) -> None:
    """A replaced backend that holds resources (:class:`ClosableBackend`) is closed in the background."""
    if isinstance(instance, ClosableBackend):
        asyncio.ensure_future(aclose_quietly(instance))
