"""The public contract's facts, each in one place: ``query``'s options, the exit codes and which
error codes are usage errors, and the envelope's fields with the error envelope.

Everything that speaks to a caller is built from these tables: click's options
(:mod:`memory_router.cli.main`), the thin client's argument parser and the error envelope it
prints when it must answer itself (:mod:`memory_router.client.thin`), the one-shot path
(:mod:`memory_router.cli.oneshot`), the exceptions' exit codes (:mod:`memory_router.core.errors`)
and the :class:`~memory_router.core.envelope.Envelope` class. Path resolution has its own home,
:mod:`memory_router.config.paths`; one diagnostic line on stderr is :func:`say`.

Standard library only, and nothing beyond ``sys``: the thin client imports this module on every
cold query (no ``typing``, no ``dataclasses``: each would cost it milliseconds).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: importing typing would cost the thin client ~3 ms
if TYPE_CHECKING:
    from typing import Any

# ---------------------------------------------------------------------- exit codes

EXIT_OK = 0  # answered: status success, partial or empty
EXIT_ERROR = 1  # status error: every backend failed, or none is usable
EXIT_USAGE = 2  # usage or configuration error

# ---------------------------------------------------------------------- error codes

ROUTER_ERROR = "ROUTER_ERROR"
CONFIG_INVALID = "CONFIG_INVALID"
BACKENDS_JSON_MISSING = "BACKENDS_JSON_MISSING"
BACKENDS_JSON_INVALID = "BACKENDS_JSON_INVALID"
STATE_DIR_UNSAFE = "STATE_DIR_UNSAFE"
EMPTY_QUERY = "EMPTY_QUERY"
QUERY_TOO_LONG = "QUERY_TOO_LONG"
INVALID_UTF8 = "INVALID_UTF8"
DAEMON_UNAVAILABLE = "DAEMON_UNAVAILABLE"  # MEMORY_ROUTER_DAEMON=require and no daemon answered
INVALID_SCOPE = "INVALID_SCOPE"  # --agent/--session-key (or a request's scope) is not a valid scope
INVALID_TIME_RANGE = "INVALID_TIME_RANGE"  # --since/--until (or a request's since/until) cannot be read

# The error codes that exit 2: the caller's input or configuration is wrong, and retrying the same
# call cannot help. Every other error code (the backends failed) exits 1.
USAGE_CODES = frozenset(
    {
        ROUTER_ERROR,
        CONFIG_INVALID,
        BACKENDS_JSON_MISSING,
        BACKENDS_JSON_INVALID,
        STATE_DIR_UNSAFE,
        EMPTY_QUERY,
        QUERY_TOO_LONG,
        INVALID_UTF8,
        DAEMON_UNAVAILABLE,
        INVALID_SCOPE,
        INVALID_TIME_RANGE,
    }
)


def exit_code(error_code: object) -> int:
    """The exit code of an error (an envelope with status ``error``) that has ``error_code``."""
    return EXIT_USAGE if error_code in USAGE_CODES else EXIT_ERROR


# ---------------------------------------------------------------------- query's options


class Option:
    """One option of ``memory-router query``: its flag, the parameter it sets, and the values it
    takes. ``kind``: ``flag`` (no value; ``True`` when given), ``int`` (``low``..``high``
    inclusive), ``choice`` (one of ``choices``) or ``text``. ``common``: every command that
    reads the configuration takes it too (``route``, ``backends``, ``config check``, ``init``)."""

    __slots__ = ("flag", "dest", "kind", "help", "metavar", "low", "high", "choices", "common")

    def __init__(
        self,
        flag: str,
        dest: str,
        kind: str,
        help: str,
        *,
        metavar: str | None = None,
        low: int = 0,
        high: int = 0,
        choices: tuple[str, ...] = (),
        common: bool = False,
    ) -> None:
        self.flag, self.dest, self.kind, self.help, self.metavar = flag, dest, kind, help, metavar
        self.low, self.high, self.choices, self.common = low, high, choices, common

    def __repr__(self) -> str:
        return f"Option({self.flag!r}, {self.dest!r}, {self.kind!r})"

    def value(self, text: str | None) -> int | str | None:
        """``text`` as this option's value, or ``None`` when it is missing or not one of the plain
        spellings this option takes (the CLI then lets click parse it and report the error)."""
        if text is None:
            return None
        if self.kind == "int":
            # ASCII digits only: click's int() also takes " 2", "+2" and "1_0"; those go to click.
            if not text.isascii() or not text.isdigit() or not self.low <= int(text) <= self.high:
                return None
            return int(text)
        if self.kind == "choice" and text not in self.choices:
            return None
        return text


DAEMON_MODES = ("auto", "off", "require")

# In the order `query --help` lists them.
QUERY_OPTIONS: tuple[Option, ...] = (
    Option("--pretty", "pretty", "flag", "Indent the JSON."),
    Option(
        "--timeout-ms",
        "timeout_ms",
        "int",
        "Per-backend timeout (default from router-config.json).",
        low=1,
        high=600_000,
    ),
    Option("--limit", "limit", "int", "Results per backend (default from router-config.json).", low=1, high=1000),
    Option(
        "--daemon",
        "mode",
        "choice",
        "Use a warm daemon (`serve --socket`): auto (default, else in-process), off, require. "
        "Default: $MEMORY_ROUTER_DAEMON, else auto.",
        choices=DAEMON_MODES,
    ),
    Option(
        "--spawn",
        "spawn",
        "flag",
        "If no daemon runs, start one in the background for the next queries (also $MEMORY_ROUTER_SPAWN=1).",
    ),
    Option(
        "--agent",
        "agent",
        "text",
        "Answer as this OpenClaw agent: only its memory is read (docs/openclaw.md, Agents).",
        metavar="ID",
    ),
    Option(
        "--session-key",
        "session_key",
        "text",
        "The asking OpenClaw session (agent:<id>:...); names the agent when --agent is not given.",
        metavar="KEY",
    ),
    Option(
        "--state-dir",
        "state_dir",
        "text",
        "State directory (default: $MEMORY_ROUTER_STATE_DIR, else $OPENCLAW_STATE_DIR/state, "
        "else ~/.openclaw/state; docs/configuration.md).",
        metavar="DIR",
        common=True,
    ),
    Option(
        "--backends-json",
        "backends_json",
        "text",
        "backends.json to read (default: <state dir>/backends.json).",
        metavar="PATH",
        common=True,
    ),
    Option(
        "--config",
        "config",
        "text",
        "router-config.json to use (default: $MEMORY_ROUTER_CONFIG, else <state dir>/router-config.json "
        "if it exists, else the packaged one).",
        metavar="PATH",
        common=True,
    ),
)
COMMON_OPTIONS: tuple[Option, ...] = tuple(o for o in QUERY_OPTIONS if o.common)
_BY_FLAG = {o.flag: o for o in QUERY_OPTIONS}


def parse_query_args(args: list[str]) -> dict[str, Any] | None:
    """``query``'s arguments as the click command reads them (keys: the options' ``dest``, and
    ``query``), or ``None`` for anything this parser does not handle exactly (help, bad values,
    unknown flags): click then parses them and reports the error."""
    opts: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    only_args = False
    while i < len(args):
        arg = args[i]
        i += 1
        if only_args or arg == "-" or not arg.startswith("-"):
            positional.append(arg)
            continue
        if arg == "--":
            only_args = True
            continue
        name, eq, given_text = arg.partition("=")
        given: str | None = given_text
        option = _BY_FLAG.get(name)
        if option is None or (eq and option.kind == "flag"):
            return None
        if option.kind == "flag":
            opts[option.dest] = True
            continue
        if not eq:  # "--limit 5": the value is the next argument (missing: None, click reports it)
            given, i = (args[i] if i < len(args) else None), i + 1
        value = option.value(given)
        if value is None:
            return None
        opts[option.dest] = value
    if len(positional) != 1:
        return None
    opts["query"] = positional[0]
    return opts


# ---------------------------------------------------------------------- the envelope

# The envelope's fields in the spec's order, each with whether a reader requires it (the others
# have defaults): Envelope's slots and reader, and the error envelope below, are built from it.
ENVELOPE_FIELDS: tuple[tuple[str, bool], ...] = (
    ("query_echo", True),
    ("routed_to", True),
    ("routed_mode", True),
    ("fallback_chain", True),
    ("fallbacks_used", True),
    ("results", True),
    ("result_count", True),
    ("normalized_relevance", True),
    ("status", True),
    ("error_code", False),
    ("error_message", False),
    ("router_duration_ms", False),
    ("backend_duration_ms", False),
    ("rule", False),
    ("attempts", False),
    ("window", False),  # only when the query had a time window (core/window.py)
)


def error_fields(
    query: str,
    code: str,
    message: str,
    *,
    fallback_chain: list[str] | None = None,
    rule: dict[str, Any] | None = None,
    router_ms: int = 0,
) -> dict[str, Any]:
    """The fields, in order, of the envelope for a query the router could not dispatch at all
    (bad input, no usable backend, no daemon under ``require``)."""
    return {
        "query_echo": query,
        "routed_to": None,
        "routed_mode": None,
        "fallback_chain": [] if fallback_chain is None else fallback_chain,
        "fallbacks_used": 0,
        "results": [],
        "result_count": 0,
        "normalized_relevance": 0.0,
        "status": "error",
        "error_code": code,
        "error_message": message,
        "router_duration_ms": router_ms,
        "backend_duration_ms": 0,
        "rule": rule,
        "attempts": [],
    }


# ---------------------------------------------------------------------- stderr


def say(message: str, who: str = "memory-router") -> None:
    """One diagnostic line on stderr, ``who: message``, flushed at once (a caller may be reading
    it while this process still works). A name that is not UTF-8 (a lone surrogate) is written
    escaped, as in the JSON; ANSI escapes are stripped unless stderr is a terminal (as click's
    ``echo`` does), so a message quoting a hostile file name cannot drive the caller's terminal."""
    if not message.isascii():
        from memory_router.output.jsonout import printable

        message = printable(message)
    line = f"{who}: {message}"
    if "\033" in line and not _isatty(sys.stderr):
        import re

        line = re.sub(r"\033\[[;?0-9]*[a-zA-Z]", "", line)
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (OSError, ValueError, AttributeError):
        return False
