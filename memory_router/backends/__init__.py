"""Backend adapters, one package per backend type, behind the seam in :mod:`.base`.

Installed as ``memory_router.backends``. Each adapter (``qmd/adapter.py``, ...) has the
:class:`~.base.AdapterModule` shape (``Settings``, ``create``, ``MODES``, ``ENV_VARS``,
``demo_setup``) and is registered here by its type name in ``router-config.json``.
Modules are imported lazily by type name, so the CLI pays only for the adapters it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from memory_router.backends.base import AdapterModule, BackendContext, DemoUnavailable

__all__ = [
    "ADAPTER_MODULES",
    "AdapterModule",
    "BackendContext",
    "DemoUnavailable",
    "adapter_module",
    "adapter_env_vars",
    "register_adapter",
]

# type name in router-config.json -> module implementing it (add more with register_adapter)
ADAPTER_MODULES: dict[str, str] = {
    "totalrecall": "memory_router.backends.totalrecall.adapter",
    "qmd": "memory_router.backends.qmd.adapter",
    "lossless": "memory_router.backends.lossless.adapter",
    "cognee": "memory_router.backends.cognee.adapter",
    "command": "memory_router.backends.command.adapter",
}
_BUILT_IN = frozenset(ADAPTER_MODULES)
# Re-exported from .base on first use (PEP 562): importing this package for the registry alone
# (the compiled config cache keys on ADAPTER_MODULES) does not import pydantic.
_FROM_BASE = frozenset({"AdapterModule", "BackendContext", "DemoUnavailable"})


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        from memory_router.backends import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_adapter(type_name: str, module: str) -> None:
    """Make ``"type": type_name`` in router-config.json use the adapter module named ``module``
    (imported when first used). For plug-ins, tests and benchmarks; a built-in type cannot be
    replaced, and registering the same name twice must name the same module."""
    if not type_name or not isinstance(type_name, str):
        raise ValueError(f"an adapter type name is a non-empty string, not {type_name!r}")
    current = ADAPTER_MODULES.get(type_name)
    if type_name in _BUILT_IN or (current is not None and current != module):
        raise ValueError(f"adapter type {type_name!r} is already registered (module {current})")
    ADAPTER_MODULES[type_name] = module


# The AdapterModule members every adapter module must define (checked once per type on import).
REQUIRED_MEMBERS = ("Settings", "create", "MODES", "ENV_VARS", "demo_setup")
_checked: set[str] = set()


def adapter_module(type_name: str) -> AdapterModule:
    """The module for an adapter type. Raises ``KeyError`` for an unknown type, ``TypeError`` for
    a module without the :class:`~.base.AdapterModule` shape."""
    module = importlib.import_module(ADAPTER_MODULES[type_name])
    if type_name not in _checked:
        missing = [name for name in REQUIRED_MEMBERS if not hasattr(module, name)]
        if missing:
            raise TypeError(
                f"adapter module {module.__name__} (type {type_name!r}) does not define {', '.join(missing)}: "
                "see AdapterModule in memory_router/backends/base.py (None where it has no modes or demo, "
                "frozenset() where it reads no environment variable)"
            )
        from memory_router.backends.common.settings import AdapterSettings

        settings = module.Settings
        if not (isinstance(settings, type) and issubclass(settings, AdapterSettings)):
            raise TypeError(
                f"adapter module {module.__name__} (type {type_name!r}): Settings must subclass "
                "AdapterSettings (memory_router/backends/common/settings.py), got "
                f"{getattr(settings, '__qualname__', settings)!r}"
            )
        _checked.add(type_name)
    return cast("AdapterModule", module)


def adapter_env_vars(type_name: str, settings: Any) -> frozenset[str]:
    """The environment variables a backend of ``type_name`` configured with ``settings`` reads:
    the module's ``ENV_VARS`` plus what its optional ``config_env_vars(settings)`` adds (names a
    setting refers to, like ``$NAME`` in Lossless's ``db_path``)."""
    module = adapter_module(type_name)
    extra = getattr(module, "config_env_vars", None)  # the one optional AdapterModule member
    return module.ENV_VARS | (extra(settings) if extra is not None else frozenset())
