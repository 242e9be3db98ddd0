"""Hot reload of router-config.json and backends.json for a :class:`~.service.Service`.

A :class:`Reloader` builds the service's router and re-reads whichever of the two files changed
on disk since it was last read. A file that fails validation is reported (stderr, router.log) and
the last good version keeps serving; a config reload keeps the instances of backends whose
settings did not change (and so their warm caches) and closes the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from memory_router.backends.base import Backend, ClosableBackend

from ..config import RouterConfig, load_config
from ..errors import RouterError
from ..installed import load_installed
from ..router import Router
from .watch import Watched, signature

if TYPE_CHECKING:
    from .service import Service


class Reloader:
    """The part of a :class:`~.service.Service` that (re)builds its router and installed backends."""

    def __init__(self, service: Service) -> None:
        self._service = service
        self._config_file = Watched(service.config_path, signature(service.config_path))
        self._backends_file = Watched(service.backends_path, signature(service.backends_path))

    def make_router(self, config: RouterConfig, keep: Mapping[str, Backend]) -> Router:
        """A router for ``config`` that reuses the ``keep`` instances (and the service's overrides)."""
        service = self._service
        if config.cooldown is not None:
            service.cooldown.configure(config.cooldown.failures, config.cooldown.seconds)
        return Router(
            config,
            context=service.context,
            log=service.log,
            backends={**keep, **service.overrides},
            cooldown=service.cooldown if config.cooldown is not None else None,
            match_executor=service.match_pool,
        )

    def reload(self) -> dict[str, str]:
        """Re-read whichever of the two files changed on disk since last read (see
        :meth:`.service.Service.reload`)."""
        service = self._service
        outcome: dict[str, str] = {}
        sig = signature(service.config_path)
        if sig != self._config_file.signature:
            self._config_file = Watched(service.config_path, sig)
            outcome[service.config_path.name] = self._reload_config()
        sig = signature(service.backends_path)
        if sig != self._backends_file.signature:
            self._backends_file = Watched(service.backends_path, sig)
            outcome[service.backends_path.name] = self._reload_installed()
        return outcome

    def _reload_config(self) -> str:
        service = self._service
        try:
            config = load_config(service.config_path)
        except RouterError as exc:
            return self._reload_failed(exc, kept=True)
        old = service.router
        keep: dict[str, Backend] = {}
        for name, instance in old.instances().items():
            if name in service.overrides:
                continue
            if config.backends.get(name) == old.config.backends.get(name):
                keep[name] = instance  # same type and settings: keep its warm caches
            else:
                service.cooldown.forget(name)
                close_quietly(instance)
        service.router = self.make_router(config, keep)
        service.watcher.stale = True
        return self._reloaded(
            f"{service.config_path} reloaded: {len(config.rules.rules)} rules, backends {', '.join(config.backends)}"
        )

    def _reload_installed(self) -> str:
        service = self._service
        try:
            installed = load_installed(service.backends_path)
        except RouterError as exc:
            if service.installed is None:
                service.installed_error = exc  # nothing good to keep: report the current problem
            return self._reload_failed(exc, kept=service.installed is not None)
        service.installed, service.installed_error = installed, None
        usable = ", ".join(installed.usable) or "none"
        return self._reloaded(f"{service.backends_path} reloaded: usable backends: {usable}")

    def _reloaded(self, message: str) -> str:
        self._service.stats.reloads["ok"] += 1
        self._service.say(message)
        self._service.log.event("RELOAD", message)
        return "reloaded"

    def _reload_failed(self, exc: RouterError, *, kept: bool) -> str:
        self._service.stats.reloads["failed"] += 1
        message = f"reload failed: {exc}" + (" The last good version keeps serving." if kept else "")
        self._service.say(message)
        self._service.log.event("RELOAD_FAILED", message)
        return "failed"


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
