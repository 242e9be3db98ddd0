"""Where the router's files live: the one home of path resolution (docs/configuration.md).

Precedence everywhere: command-line flag, then ``MEMORY_ROUTER_*``, then ``OPENCLAW_*`` read as
OpenClaw reads it, then the default:

* state dir: ``--state-dir``, ``$MEMORY_ROUTER_STATE_DIR``, ``$OPENCLAW_STATE_DIR/state``,
  ``~/.openclaw/state``. ``$OPENCLAW_STATE_DIR`` is OpenClaw's *root* (``~/.openclaw``: its
  ``--profile`` and ``--dev`` set it for child processes, lossless-claw keeps lcm.db there); the
  memory stack's own state lives in its ``state/`` folder. Before 0.2 memory-router took the
  variable as the state dir itself: when ``$OPENCLAW_STATE_DIR/backends.json`` exists and
  ``$OPENCLAW_STATE_DIR/state/backends.json`` does not, that older layout is used, with one
  warning per process on stderr (it moves nothing: the installer owns those files).
* backends.json: ``--backends-json``, else ``<state dir>/backends.json``.
* router-config.json: ``--config``, ``$MEMORY_ROUTER_CONFIG``, ``<state dir>/router-config.json``
  when it exists (so a state dir such as the demo's is self-contained), else the packaged one.
* OpenClaw's agent workspace (:func:`openclaw_workspace`): Total Recall's memory root when the
  working directory is in no git repository.

A command resolves its files once, with :func:`resolve`: the value it returns (:class:`Resolved`)
is what a ``query`` hands to the daemon attempt and, when no daemon answers, to the in-process
router; the state dir's trust check (:func:`memory_router.config.statedir.problem`) is made there,
once, too.

Standard library and ``os.path`` only, with strings: the thin client resolves these on every
query and must not import ``pathlib``; the ``Path`` helpers import it when called.
"""

import os

from memory_router.config import statedir

TYPE_CHECKING = False  # not typing's: importing typing would cost the thin client ~3 ms
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Protocol

    class FileOptions(Protocol):
        """What :func:`resolve` reads: the values of ``contract.COMMON_OPTIONS`` (``None``: not given)."""

        @property
        def state_dir(self) -> str | None: ...
        @property
        def backends_json(self) -> str | None: ...
        @property
        def config(self) -> str | None: ...


OPENCLAW_ROOT = "~/.openclaw"
STATE_SUBDIR = "state"
DEFAULT_STATE_DIR = f"{OPENCLAW_ROOT}/{STATE_SUBDIR}"
BACKENDS_JSON = "backends.json"
CONFIG_NAME = "router-config.json"
OPENCLAW_CONFIG = "openclaw.json"

_warned: set[str] = set()  # legacy state dirs already reported by this process


def _env(environ: "Mapping[str, str]", name: str) -> str | None:
    """A variable's value, ``None`` when unset or blank (OpenClaw trims them the same way)."""
    value = environ.get(name, "").strip()
    return value or None


def _expand(path: str | os.PathLike[str], environ: "Mapping[str, str]") -> str:
    """``~`` expanded against ``environ``'s HOME (the process's own when it is ``os.environ``)."""
    text = os.fspath(path)
    if text.startswith("~") and environ is not os.environ and (home := environ.get("HOME")):
        if text == "~" or text.startswith("~/"):
            return home + text[1:]
    return os.path.expanduser(text)


def openclaw_root(environ: "Mapping[str, str]" = os.environ) -> str:
    """OpenClaw's root: ``$OPENCLAW_STATE_DIR``, else ``~/.openclaw``."""
    return _expand(_env(environ, "OPENCLAW_STATE_DIR") or OPENCLAW_ROOT, environ)


def resolve_state_dir(flag: str | os.PathLike[str] | None = None, environ: "Mapping[str, str]" = os.environ) -> str:
    """The state dir (see the module's docstring for the order and the older layout)."""
    if flag:
        return _expand(flag, environ)
    if own := _env(environ, "MEMORY_ROUTER_STATE_DIR"):
        return _expand(own, environ)
    if _env(environ, "OPENCLAW_STATE_DIR"):
        root = openclaw_root(environ)
        state = os.path.join(root, STATE_SUBDIR)
        if os.path.isfile(os.path.join(root, BACKENDS_JSON)) and not os.path.exists(os.path.join(state, BACKENDS_JSON)):
            _warn_legacy(root, state)
            return root
        return state
    return _expand(DEFAULT_STATE_DIR, environ)


def _warn_legacy(root: str, state: str) -> None:
    if root in _warned:
        return
    _warned.add(root)
    from memory_router.contract import say

    say(
        f"warning: using {root} as the state dir because it holds {BACKENDS_JSON} "
        f"(the layout before 0.2); $OPENCLAW_STATE_DIR is OpenClaw's root, and memory-router's state "
        f"belongs in {state}. Fix: move {BACKENDS_JSON} (and router.log) to {state}, or set "
        f"MEMORY_ROUTER_STATE_DIR={root}"
    )


def resolve_backends_json(state_dir: str, flag: str | os.PathLike[str] | None = None) -> str:
    """``--backends-json``, else ``<state dir>/backends.json``."""
    return os.path.expanduser(os.fspath(flag)) if flag else os.path.join(state_dir, BACKENDS_JSON)


def resolve_config(
    flag: str | os.PathLike[str] | None, state_dir: str, environ: "Mapping[str, str]" = os.environ
) -> str:
    """``--config``, ``$MEMORY_ROUTER_CONFIG``, ``<state dir>/router-config.json`` if it exists,
    else the packaged router-config.json."""
    chosen = flag or _env(environ, "MEMORY_ROUTER_CONFIG")
    if chosen:
        return _expand(chosen, environ)
    in_state = os.path.join(state_dir, CONFIG_NAME) if state_dir else ""
    if in_state and os.path.isfile(in_state):
        return in_state
    return packaged_config_str()


def packaged_config_str() -> str:
    """The default router-config.json shipped inside the package (same file as the repo's)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), CONFIG_NAME)


# ---------------------------------------------------------------------- one command's files


class Resolved:
    """One command's files, resolved once (:func:`resolve`), as strings. ``config`` is the packaged
    router-config.json when none is chosen; ``state_dir_problem`` is why the state dir cannot be
    trusted (:func:`memory_router.config.statedir.problem`), ``None`` when it can.

    Immutable, slotted, equal only to a ``Resolved`` with equal fields, as a ``Frozen`` value is,
    but written out: the thin client builds one on every query and imports no ``core.frozen``
    (:class:`memory_router.client.invocation.QueryArgs` says why)."""

    _FIELDS = ("state_dir", "backends_json", "config", "state_dir_problem")
    __slots__ = _FIELDS

    state_dir: str
    backends_json: str
    config: str
    state_dir_problem: str | None

    def __init__(self, *, state_dir: str, backends_json: str, config: str, state_dir_problem: str | None) -> None:
        set_ = object.__setattr__
        set_(self, "state_dir", state_dir)
        set_(self, "backends_json", backends_json)
        set_(self, "config", config)
        set_(self, "state_dir_problem", state_dir_problem)

    def _values(self) -> tuple[str, str, str, str | None]:
        return (self.state_dir, self.backends_json, self.config, self.state_dir_problem)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Resolved is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Resolved is immutable: cannot delete {name}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not Resolved:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return "Resolved(" + ", ".join(f"{n}={v!r}" for n, v in zip(self._FIELDS, self._values(), strict=True)) + ")"


def resolve(opts: "FileOptions", environ: "Mapping[str, str]" = os.environ) -> Resolved:
    """The state dir, backends.json and router-config.json that ``opts`` (a command's
    ``--state-dir``, ``--backends-json`` and ``--config``; a ``query``'s :class:`QueryArgs`) and the
    environment name, in the order of the module's docstring, and the state dir's trust check."""
    state = resolve_state_dir(opts.state_dir, environ)
    return Resolved(
        state_dir=state,
        backends_json=resolve_backends_json(state, opts.backends_json),
        config=resolve_config(opts.config, state, environ),
        state_dir_problem=statedir.problem(state),
    )


# ---------------------------------------------------------------------- OpenClaw's workspace


def openclaw_config_file(environ: "Mapping[str, str]" = os.environ) -> str:
    """OpenClaw's config: ``$OPENCLAW_CONFIG_PATH``, else ``<OpenClaw root>/openclaw.json``."""
    override = _env(environ, "OPENCLAW_CONFIG_PATH")
    return _expand(override, environ) if override else os.path.join(openclaw_root(environ), OPENCLAW_CONFIG)


def openclaw_workspace(environ: "Mapping[str, str]" = os.environ) -> tuple[str, str]:
    """The default agent's workspace as OpenClaw 2026.9 resolves it, and where that came from:
    ``agents.defaults.workspace`` in openclaw.json (JSON5), else ``$OPENCLAW_WORKSPACE_DIR``, else
    ``$OPENCLAW_STATE_DIR/workspace``, else ``~/.openclaw-<profile>/workspace`` under
    ``$OPENCLAW_PROFILE``, else ``~/.openclaw/workspace``. An unreadable openclaw.json counts as
    absent (OpenClaw itself reports it); only the one key is read. One that is not a regular file
    (a FIFO) or is beyond the JSON5 reader's limits raises :class:`~.openclaw_file.OpenClawConfigInvalid`."""
    config = openclaw_config_file(environ)
    configured = _configured_workspace(config)
    if configured:
        return _expand(configured, environ), f"agents.defaults.workspace in {config}"
    if own := _env(environ, "OPENCLAW_WORKSPACE_DIR"):
        return os.path.abspath(_expand(own, environ)), "$OPENCLAW_WORKSPACE_DIR"
    if _env(environ, "OPENCLAW_STATE_DIR"):
        return os.path.join(openclaw_root(environ), "workspace"), "$OPENCLAW_STATE_DIR/workspace"
    profile = _env(environ, "OPENCLAW_PROFILE")
    if profile and profile.lower() != "default":
        return _expand(f"~/.openclaw-{profile}/workspace", environ), "$OPENCLAW_PROFILE"
    return _expand(f"{OPENCLAW_ROOT}/workspace", environ), "OpenClaw's default"


def _configured_workspace(config: str) -> str | None:
    """``agents.defaults.workspace`` of openclaw.json, read as :mod:`.openclaw_file` reads it (never a
    blocking ``open()``: a FIFO there is refused; a file beyond the JSON5 reader's limits raises
    :class:`~.openclaw_file.OpenClawConfigInvalid`, naming it)."""
    from memory_router.config.openclaw_file import default_workspace_setting, read

    return default_workspace_setting(read(config))


# ---------------------------------------------------------------------- as Path objects


def state_dir(flag: str | os.PathLike[str] | None = None, environ: "Mapping[str, str]" = os.environ) -> "Path":
    from pathlib import Path

    return Path(resolve_state_dir(flag, environ))


def backends_json(state: "Path", flag: str | os.PathLike[str] | None = None) -> "Path":
    from pathlib import Path

    return Path(resolve_backends_json(str(state), flag))


def router_log(state: "Path") -> "Path":
    return state / "router.log"


def config_file(
    flag: str | os.PathLike[str] | None = None,
    state: "Path | None" = None,
    environ: "Mapping[str, str]" = os.environ,
) -> "Path | None":
    """:func:`resolve_config` as a ``Path``; ``None`` means the packaged default."""
    from pathlib import Path

    chosen = resolve_config(flag, str(state) if state is not None else "", environ)
    return None if chosen == packaged_config_str() and not flag else Path(chosen)


def packaged_config() -> "Path":
    from pathlib import Path

    return Path(packaged_config_str())
