"""``memory-router query``'s options, the one table (:data:`QUERY_OPTIONS`): click's options
(:mod:`memory_router.cli.main`), the console script's argument parser
(:mod:`memory_router.client.invocation`), ``query --help`` and the docs are built from it, and
:data:`COMMON_OPTIONS` are the ones every command that reads the configuration takes.

A module of its own, re-exported by :mod:`memory_router.contract` with the rest of the public
contract, so that the thin client, which parses a query's arguments on every warm query, reads
this table without the contract's error-code table (docs/benchmarks.md, *the warm half, third
round*). Standard library only, nothing imported.
"""


class Option:
    """One option of ``memory-router query``: its flag, the parameter it sets, and the values it
    takes. ``kind``: ``flag`` (no value; ``True`` when given), ``int`` (``low``..``high``
    inclusive), ``float`` (a plain decimal, ``low``..``high`` inclusive), ``choice`` (one of
    ``choices``) or ``text``. ``common``: every command that
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

    def value(self, text: str | None) -> int | float | str | None:
        """``text`` as this option's value, or ``None`` when it is missing or not one of the plain
        spellings this option takes (the CLI then lets click parse it and report the error)."""
        if text is None:
            return None
        if self.kind == "int":
            # ASCII digits only: click's int() also takes " 2", "+2" and "1_0"; those go to click.
            if not text.isascii() or not text.isdigit() or not self.low <= int(text) <= self.high:
                return None
            return int(text)
        if self.kind == "float":
            # Plain decimals only ("0.3", ".3", "1"); "1e-1", "nan" and " 0.3" go to click.
            digits = text.replace(".", "", 1)
            if not text.isascii() or not digits.isdigit() or not self.low <= float(text) <= self.high:
                return None
            return float(text)
        if self.kind == "choice" and text not in self.choices:
            return None
        return text


DAEMON_MODES = ("auto", "off", "require")
MAX_CHARS_LIMIT = 10_000_000  # query --max-chars / a request's max_chars: at most this

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
        "--min-relevance",
        "min_relevance",
        "float",
        "Abstain below this relevance (0..1): an answer whose best hit is under it has no results and "
        "`abstained` says why; one that reaches it is returned whole (docs/abstention.md).",
        metavar="X",
        low=0,
        high=1,
    ),
    Option(
        "--max-chars",
        "max_chars",
        "int",
        "Budget of the hits' total text, in characters: hits are kept whole, in rank order, while they fit "
        "(a first hit alone larger is cut to it); `budget` says what was cut (docs/abstention.md).",
        metavar="N",
        low=1,
        high=MAX_CHARS_LIMIT,
    ),
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
        "--since",
        "since",
        "text",
        "Only memory written from then on: an ISO date or date-time, today, yesterday, last week, last month, "
        "N days ago (docs/cli.md, Time windows).",
        metavar="WHEN",
    ),
    Option(
        "--until",
        "until",
        "text",
        "Only memory written up to then (a date: to its end); same forms as --since.",
        metavar="WHEN",
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
