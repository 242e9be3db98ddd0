"""Where the router's files live. Precedence everywhere: command-line flag, environment, default."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

DEFAULT_STATE_DIR = Path("~/.openclaw/state")


def state_dir(flag: str | os.PathLike[str] | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    """``--state-dir``, else ``$OPENCLAW_STATE_DIR``, else ``~/.openclaw/state``."""
    chosen = flag or environ.get("OPENCLAW_STATE_DIR") or DEFAULT_STATE_DIR
    return Path(os.path.expanduser(str(chosen)))


def backends_json(state: Path, flag: str | os.PathLike[str] | None = None) -> Path:
    """``--backends-json``, else ``<state dir>/backends.json``."""
    return Path(os.path.expanduser(str(flag))) if flag else state / "backends.json"


def router_log(state: Path) -> Path:
    return state / "router.log"


def config_file(flag: str | os.PathLike[str] | None = None, environ: Mapping[str, str] = os.environ) -> Path | None:
    """``--config``, else ``$MEMORY_ROUTER_CONFIG``; ``None`` means the packaged default."""
    chosen = flag or environ.get("MEMORY_ROUTER_CONFIG")
    return Path(os.path.expanduser(str(chosen))) if chosen else None


def packaged_config() -> Path:
    """The default router-config.json shipped inside the package (same file as the repo's)."""
    return Path(__file__).with_name("router-config.json")
