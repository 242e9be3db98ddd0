"""The public contract's facts, each in one place: ``query``'s options (their home is
:mod:`memory_router.query_options`, re-exported here), the exit codes, the table of
error codes (:data:`ERROR_CODES`: each code's exit code, origin, whether the thin client routes
in-process on it, and its meaning), and the envelope's fields with the error envelope.

Everything that speaks to a caller is built from these tables: click's options
(:mod:`memory_router.cli.main`), the console script's argument parser
(:mod:`memory_router.client.invocation`), the error envelope the thin client prints when it must
answer itself (:mod:`memory_router.client.thin`), the one-shot path
(:mod:`memory_router.cli.oneshot`), the exceptions' exit codes (:mod:`memory_router.core.errors`)
and the :class:`~memory_router.core.envelope.Envelope` class. Path resolution has its own home,
:mod:`memory_router.config.paths`; one diagnostic line on stderr is :func:`say`.

Standard library only, and nothing beyond ``sys``: the thin client imports this module on every
cold query (no ``typing``, no ``dataclasses``: each would cost it milliseconds).
"""

from __future__ import annotations

import sys

# query's options: their one home, re-exported with the rest of the contract.
from memory_router.query_options import COMMON_OPTIONS as COMMON_OPTIONS
from memory_router.query_options import DAEMON_MODES as DAEMON_MODES
from memory_router.query_options import MAX_CHARS_LIMIT as MAX_CHARS_LIMIT
from memory_router.query_options import QUERY_OPTIONS as QUERY_OPTIONS
from memory_router.query_options import Option as Option

TYPE_CHECKING = False  # not typing's: importing typing would cost the thin client ~3 ms
if TYPE_CHECKING:
    from typing import Any

# ---------------------------------------------------------------------- exit codes

EXIT_OK = 0  # answered: status success, partial or empty
EXIT_ERROR = 1  # status error: every backend failed, or none is usable
EXIT_USAGE = 2  # usage or configuration error

# ---------------------------------------------------------------------- error codes

# Where a code comes from: the router's decision, the configuration files, a backend adapter,
# the daemon's transport or service, the thin client, or the OpenClaw plugin (its own refusals).
ROUTER, CONFIG, BACKEND, DAEMON, CLIENT, PLUGIN = "router", "config", "backend", "daemon", "client", "plugin"
ORIGINS = (ROUTER, CONFIG, BACKEND, DAEMON, CLIENT, PLUGIN)


class ErrorCode:
    """One row of the error-code table. ``exit``: the exit code of ``memory-router query`` when
    its envelope carries this code (``None``: the code never reaches ``query``, the plugin's own);
    ``retry``: the thin client does not take a daemon's answer with this code as the answer, it
    routes the query in-process instead (so does the plugin, through ``hello``)."""

    __slots__ = ("code", "exit", "origin", "retry", "meaning")

    code: str
    exit: int | None
    origin: str
    retry: bool
    meaning: str

    def __init__(self, code: str, exit: int | None, origin: str, meaning: str, *, retry: bool = False) -> None:
        for name, value in (("code", code), ("exit", exit), ("origin", origin), ("retry", retry), ("meaning", meaning)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ErrorCode is immutable: cannot set {name}")

    def __repr__(self) -> str:
        return f"ErrorCode({self.code!r}, {self.exit!r}, {self.origin!r}, retry={self.retry!r})"


ROUTER_ERROR = "ROUTER_ERROR"
CONFIG_INVALID = "CONFIG_INVALID"
BACKENDS_JSON_MISSING = "BACKENDS_JSON_MISSING"
BACKENDS_JSON_INVALID = "BACKENDS_JSON_INVALID"
BACKENDS_JSON_EXISTS = "BACKENDS_JSON_EXISTS"
STATE_DIR_UNSAFE = "STATE_DIR_UNSAFE"
EMPTY_QUERY = "EMPTY_QUERY"
QUERY_TOO_LONG = "QUERY_TOO_LONG"
INVALID_UTF8 = "INVALID_UTF8"
INVALID_SCOPE = "INVALID_SCOPE"
INVALID_TIME_RANGE = "INVALID_TIME_RANGE"
DAEMON_UNAVAILABLE = "DAEMON_UNAVAILABLE"
ALL_BACKENDS_FAILED = "ALL_BACKENDS_FAILED"
NO_BACKEND_AVAILABLE = "NO_BACKEND_AVAILABLE"
DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
COOLDOWN = "COOLDOWN"
BACKEND_ERROR = "BACKEND_ERROR"
BACKEND_UNAVAILABLE = "BACKEND_UNAVAILABLE"
QUERY_TIMEOUT = "QUERY_TIMEOUT"
INVALID_REQUEST = "INVALID_REQUEST"
INVALID_JSON = "INVALID_JSON"
REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
INTERNAL_ERROR = "INTERNAL_ERROR"
SHUTTING_DOWN = "SHUTTING_DOWN"
FORBIDDEN = "FORBIDDEN"
CONTEXT_MISMATCH = "CONTEXT_MISMATCH"
MEMORY_ROUTER_ERROR = "MEMORY_ROUTER_ERROR"
DAEMON_CONFIG_ERROR = "DAEMON_CONFIG_ERROR"
DAEMON_START_FAILED = "DAEMON_START_FAILED"
INVALID_PATH = "INVALID_PATH"
PATH_OUTSIDE_ROOT = "PATH_OUTSIDE_ROOT"
FILE_TOO_LARGE = "FILE_TOO_LARGE"
MEMORY_PATH_NOT_ALLOWED = "MEMORY_PATH_NOT_ALLOWED"
MEMORY_READ_FAILED = "MEMORY_READ_FAILED"

# Every error code the project gives, once: the exit codes, the thin client's retry set, the
# table in docs/cli.md and the codes the daemon's `hello` hands the plugin are all read from it.
# Exit 2: the caller's input or configuration is wrong, and retrying the same call cannot help;
# exit 1: the backends failed. A command backend's program may name codes of its own: those exit 1.
ERROR_CODES: tuple[ErrorCode, ...] = (
    ErrorCode(ROUTER_ERROR, EXIT_USAGE, ROUTER, "an error the user can fix, of no more specific kind"),
    ErrorCode(EMPTY_QUERY, EXIT_USAGE, ROUTER, "the query is empty or only whitespace"),
    ErrorCode(QUERY_TOO_LONG, EXIT_USAGE, ROUTER, "the query is longer than `max_query_chars`"),
    ErrorCode(INVALID_UTF8, EXIT_USAGE, ROUTER, "the query (stdin, argv or a request line) is not valid UTF-8"),
    ErrorCode(INVALID_SCOPE, EXIT_USAGE, ROUTER, "`--agent`/`--session-key` (or a request's `scope`) is not a scope"),
    ErrorCode(INVALID_TIME_RANGE, EXIT_USAGE, ROUTER, "`--since`/`--until` (or a request's) cannot be read"),
    ErrorCode(CONFIG_INVALID, EXIT_USAGE, CONFIG, "router-config.json (or openclaw.json) cannot be used"),
    ErrorCode(BACKENDS_JSON_MISSING, EXIT_USAGE, CONFIG, "backends.json does not exist (`memory-router init`)"),
    ErrorCode(BACKENDS_JSON_INVALID, EXIT_USAGE, CONFIG, "backends.json is malformed"),
    ErrorCode(BACKENDS_JSON_EXISTS, EXIT_USAGE, CONFIG, "`init` would replace an existing backends.json (`--force`)"),
    ErrorCode(STATE_DIR_UNSAFE, EXIT_USAGE, CONFIG, "the state dir is another user's or others can write it"),
    ErrorCode(DAEMON_UNAVAILABLE, EXIT_USAGE, CLIENT, "`--daemon require` and no daemon serving this context answered"),
    ErrorCode(ALL_BACKENDS_FAILED, EXIT_ERROR, ROUTER, "every backend in the fallback chain failed"),
    ErrorCode(NO_BACKEND_AVAILABLE, EXIT_ERROR, ROUTER, "no backend of the rule's chain is usable here"),
    ErrorCode(DEADLINE_EXCEEDED, EXIT_ERROR, ROUTER, "the query's overall deadline ran out (an attempt's code)"),
    ErrorCode(COOLDOWN, EXIT_ERROR, ROUTER, "a backend that just failed is skipped for a while (an attempt's code)"),
    ErrorCode(BACKEND_ERROR, EXIT_ERROR, BACKEND, "the backend ran and failed (an attempt's code)"),
    ErrorCode(BACKEND_UNAVAILABLE, EXIT_ERROR, BACKEND, "the backend cannot run here (an attempt's code)"),
    ErrorCode(QUERY_TIMEOUT, EXIT_ERROR, BACKEND, "the backend did not answer within `timeout_ms` (an attempt's code)"),
    ErrorCode(INVALID_REQUEST, EXIT_ERROR, DAEMON, "a request line is JSON of the wrong shape", retry=True),
    ErrorCode(INVALID_JSON, EXIT_ERROR, DAEMON, "a request line is not JSON"),
    ErrorCode(REQUEST_TOO_LARGE, EXIT_ERROR, DAEMON, "a request line is longer than the daemon reads", retry=True),
    ErrorCode(INTERNAL_ERROR, EXIT_ERROR, DAEMON, "the daemon failed answering (a bug; stderr says why)", retry=True),
    ErrorCode(SHUTTING_DOWN, EXIT_ERROR, DAEMON, "the daemon is stopping and answers nothing more", retry=True),
    ErrorCode(FORBIDDEN, EXIT_ERROR, DAEMON, "the daemon refused the connection (its connection cap)", retry=True),
    ErrorCode(
        CONTEXT_MISMATCH,
        EXIT_ERROR,
        DAEMON,
        "a query sent with the thin client's context reached a daemon serving another one: not routed",
        retry=True,
    ),
    ErrorCode(MEMORY_ROUTER_ERROR, None, PLUGIN, "the plugin could not get an envelope (it names why)"),
    ErrorCode(DAEMON_CONFIG_ERROR, None, PLUGIN, "the daemon the plugin started exited 2 (a configuration error)"),
    ErrorCode(DAEMON_START_FAILED, None, PLUGIN, "the daemon the plugin started exited before listening"),
    ErrorCode(INVALID_PATH, None, PLUGIN, "`memory_get` was given no path or an absolute one"),
    ErrorCode(PATH_OUTSIDE_ROOT, None, PLUGIN, "`memory_get`'s path leaves the memory root"),
    ErrorCode(FILE_TOO_LARGE, None, PLUGIN, "`memory_get`'s file is larger than it reads"),
    ErrorCode(MEMORY_PATH_NOT_ALLOWED, None, PLUGIN, "`memory_get`'s path is not a memory file (memory-core's code)"),
    ErrorCode(MEMORY_READ_FAILED, None, PLUGIN, "`memory_get` could not read the file"),
)
BY_CODE = {row.code: row for row in ERROR_CODES}

# The error codes that exit 2; every other code exits 1.
USAGE_CODES = frozenset(row.code for row in ERROR_CODES if row.exit == EXIT_USAGE)
# A daemon's answers that are not an answer to the query: the thin client routes in-process.
RETRY_IN_PROCESS = frozenset(row.code for row in ERROR_CODES if row.retry)


def exit_code(error_code: object) -> int:
    """The exit code of an error (an envelope with status ``error``) that has ``error_code``."""
    return EXIT_USAGE if error_code in USAGE_CODES else EXIT_ERROR


def hello_codes() -> dict[str, dict[str, Any]]:
    """The table as the daemon's ``hello`` carries it to clients (the plugin reads ``retry``)."""
    return {row.code: {"exit": row.exit, "origin": row.origin, "retry": row.retry} for row in ERROR_CODES}


def error_code_table() -> str:
    """The table as docs/cli.md shows it (Markdown), generated: a test holds the page equal."""
    lines = ["| error_code | exit | origin | thin client routes in-process | meaning |", "|---|---|---|---|---|"]
    for row in ERROR_CODES:
        exit_text = "-" if row.exit is None else str(row.exit)
        lines.append(f"| `{row.code}` | {exit_text} | {row.origin} | {'yes' if row.retry else 'no'} | {row.meaning} |")
    return "\n".join(lines) + "\n"


def plugin_codes_module() -> str:
    """The OpenClaw plugin's ``lib/codes.js``, generated from the table: the names the plugin gives
    its errors (a test holds the file equal, as it holds docs/cli.md's table)."""
    lines = [
        "// @ts-check",
        "// memory-router's error codes, one per row of memory_router/contract.py ERROR_CODES, the one",
        "// table. Generated, do not edit: `MR_WRITE_DOCS=1 python3 -m pytest -q tests/unit/test_error_codes.py`",
        "// rewrites it, and that test fails while it differs from the table.",
        "//",
        "// The daemon's `hello` carries the same table with its columns (`error_codes`: exit, origin,",
        "// retry): which answers are retried is read from there (router.js `retryCodes`). These names",
        "// are for the codes the plugin gives its own errors, so a typo is a type error, not a new code.",
        "",
        "export const CODES = Object.freeze({",
    ]
    for row in ERROR_CODES:
        exit_text = "never reaches `query`" if row.exit is None else f"exit {row.exit}"
        lines += [f"  /** {row.meaning} ({row.origin}, {exit_text}) */", f'  {row.code}: "{row.code}",']
    return "\n".join([*lines, "});", ""])


# ---------------------------------------------------------------------- query's options

# query's options (the table, DAEMON_MODES, MAX_CHARS_LIMIT) have their one home in
# memory_router.query_options, imported above: the thin client reads them there without this
# module's tables.

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
)
# Fields an envelope carries only when the query asked for a relevance floor or a character
# budget and it changed the answer (memory_router.core.trim: ``abstained``, the answer's best hit
# was under the floor; ``budget``, hits were cut), or for a time window (memory_router.core.window):
# written after the fields above, absent otherwise, so an envelope asked for none of them is the
# one it always was.
OPTIONAL_ENVELOPE_FIELDS: tuple[str, ...] = ("abstained", "budget", "window")


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
