"""The public contract's one table (memory_router.contract) means the same on every path.

``query``'s options reach the router three ways: click's command (cli/main.py, built from the
table), the console script's one-shot path (the table's parser, client/invocation.py, then
oneshot.run_query) and the thin client (the same parser, then route_via_daemon). Each test here
drives the real entry points with option combinations generated from the table and checks what
the router and the daemon would be asked to do.
"""

from __future__ import annotations

import gc
import io
from typing import Any

import click
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router import contract
from memory_router.cli import entry, oneshot
from memory_router.cli import main as cli
from memory_router.client import thin as client
from memory_router.client.invocation import QueryArgs, parse_query_args
from memory_router.config import paths
from memory_router.config.paths import Resolved
from memory_router.contract import QUERY_OPTIONS, Option
from memory_router.core import errors
from memory_router.core.envelope import Envelope, error_envelope

from ..support.budget import examples


def _command(name: str) -> click.Command:
    command = cli.main.get_command(click.Context(cli.main), name)
    assert command is not None, name
    return command


QUERY_COMMAND = _command("query")
_QUERY_TEXT = st.one_of(
    st.just("-"),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20).filter(
        lambda s: not s.startswith("-")
    ),
)
_PATH = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12).filter(
    lambda s: not s.startswith("-")
)


def _valid_value(option: Option) -> st.SearchStrategy[str]:
    """A value of ``option`` in a spelling the table's parser takes."""
    if option.kind == "int":
        return st.integers(option.low, option.high).map(str)
    if option.kind == "choice":
        return st.sampled_from(option.choices)
    if option.kind == "float":  # plain decimals: "0", "1", "0.35", ".5"
        return st.sampled_from(["0", "1", "0.35", ".5", "0.0", "1.0", "0.125"])
    return _PATH


def _spelled(option: Option, value: str | None) -> st.SearchStrategy[list[str]]:
    if option.kind == "flag":
        return st.just([option.flag])
    assert value is not None
    return st.sampled_from([[option.flag, value], [f"{option.flag}={value}"]])


@st.composite
def valid_invocations(draw: st.DrawFn) -> tuple[list[str], dict[str, Any]]:
    """``query``'s arguments using any subset of the table's options with valid values, in any
    order, and what each option should set."""
    chosen = draw(st.lists(st.sampled_from(QUERY_OPTIONS), unique_by=lambda o: o.flag))
    groups, expected = [], {}
    for option in chosen:
        value = None if option.kind == "flag" else draw(_valid_value(option))
        groups.append(draw(_spelled(option, value)))
        expected[option.dest] = (
            True
            if value is None
            else int(value)
            if option.kind == "int"
            else float(value)
            if option.kind == "float"
            else value
        )
    text = draw(_QUERY_TEXT)
    expected["query"] = text
    at = draw(st.integers(0, len(groups)))
    groups.insert(at, [text])
    return [arg for group in groups for arg in group], expected


def click_params(args: list[str]) -> dict[str, Any] | None:
    try:
        return QUERY_COMMAND.make_context("query", list(args)).params
    except (click.UsageError, click.exceptions.Exit):
        return None


@settings(max_examples=examples(100), deadline=None)
@given(valid_invocations())
def test_every_option_in_the_table_is_accepted_by_click_and_the_fast_parser_alike(
    invocation: tuple[list[str], dict[str, Any]],
) -> None:
    args, expected = invocation
    fast = parse_query_args(args)
    assert fast == QueryArgs(**expected), args
    slow = click_params(args)
    assert slow is not None, f"click refuses {args!r}"
    defaults = {o.dest: False if o.kind == "flag" else None for o in QUERY_OPTIONS}
    assert slow == {**defaults, **expected}


def test_query_args_has_one_field_per_option_of_the_table_with_clicks_default() -> None:
    import inspect

    assert QueryArgs._FIELDS == ("query", *(o.dest for o in QUERY_OPTIONS))
    params = inspect.signature(QueryArgs).parameters
    assert tuple(params) == QueryArgs._FIELDS  # the constructor takes the fields, in order
    for option in QUERY_OPTIONS:
        assert params[option.dest].default == (False if option.kind == "flag" else None), option.flag


def test_query_args_and_resolved_are_immutable_values() -> None:
    args = QueryArgs("q", limit=3)
    assert args == QueryArgs("q", limit=3) and hash(args) == hash(QueryArgs("q", limit=3))
    assert args != QueryArgs("q", limit=4) and args != ("q",)
    assert "limit=3" in repr(args)
    files = Resolved(state_dir="s", backends_json="b", config="c", state_dir_problem=None)
    assert files == Resolved(state_dir="s", backends_json="b", config="c", state_dir_problem=None)
    assert files != Resolved(state_dir="s", backends_json="b", config="c", state_dir_problem="no")
    assert "state_dir='s'" in repr(files)
    for value, field in ((args, "limit"), (files, "config")):
        with pytest.raises(AttributeError, match="immutable"):
            setattr(value, field, None)
        assert not hasattr(value, "__dict__")


def _invalid_values(option: Option) -> list[str]:
    if option.kind == "int":
        return [str(option.low - 1), str(option.high + 1), "x"]
    if option.kind == "choice":
        return ["bogus", option.choices[0].upper()]
    if option.kind == "float":
        return ["1.5", "-0.1", "x"]
    return []


@pytest.mark.parametrize(
    "option, bad", [(o, bad) for o in QUERY_OPTIONS for bad in _invalid_values(o)], ids=lambda x: str(x)
)
def test_a_value_outside_the_table_is_left_to_click_which_refuses_it(option: Option, bad: str) -> None:
    for args in (["q", option.flag, bad], ["q", f"{option.flag}={bad}"]):
        assert parse_query_args(args) is None
        assert click_params(args) is None


@pytest.mark.parametrize("option", [o for o in QUERY_OPTIONS if o.kind != "flag"], ids=lambda o: o.flag)
def test_an_option_without_its_value_is_left_to_click_which_refuses_it(option: Option) -> None:
    assert parse_query_args(["q", option.flag]) is None
    assert click_params(["q", option.flag]) is None


@pytest.mark.parametrize("option", [o for o in QUERY_OPTIONS if o.kind == "flag"], ids=lambda o: o.flag)
def test_a_flag_given_a_value_is_left_to_click_which_refuses_it(option: Option) -> None:
    assert parse_query_args(["q", f"{option.flag}=1"]) is None
    assert click_params(["q", f"{option.flag}=1"]) is None


# Tokens from the table (and spellings click alone reads): the two parsers agree whenever the
# fast one answers, whatever the mix.
_TOKENS = st.sampled_from(
    sorted(
        {o.flag for o in QUERY_OPTIONS}
        | {f"{o.flag}={v}" for o in QUERY_OPTIONS for v in ("", "1", "0")}
        | {v for o in QUERY_OPTIONS for v in (*o.choices, *_invalid_values(o))}
        | {"5", "2000", "--", "-", "auth", "-x", "--help", "--unknown", "07", "٣", " 2", "+3"}
    )
)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_TOKENS, max_size=7))
def test_the_fast_parser_agrees_with_click_whenever_it_answers(args: list[str]) -> None:
    fast = parse_query_args(args)
    if fast is None:
        return  # click parses it (and reports the error) itself
    slow = click_params(args)
    assert slow is not None, f"the fast path accepted {args!r}, which click refuses"
    for option in QUERY_OPTIONS:
        assert getattr(fast, option.dest) == slow[option.dest], option.flag
    assert fast.query == slow["query"]


# ------------------------------------------------------------------- the same meaning on each path


class Recorder:
    """Stands in for the daemon (thin.route_via_daemon) and the router (oneshot.run_query): what
    each path hands them, the invocation resolved once."""

    def __init__(self) -> None:
        self.asked_daemon: list[tuple[QueryArgs, Resolved, str]] = []
        self.routed: list[tuple[QueryArgs, Resolved, Any]] = []

    def route_via_daemon(self, args: QueryArgs, files: Resolved, text: str) -> None:
        self.asked_daemon.append((args, files, text))
        return None  # no daemon answers: the path routes in-process

    def run_query(self, args: QueryArgs, files: Resolved, text: Any) -> None:
        self.routed.append((args, files, text))
        raise SystemExit(0)  # as the real one: it exits once the envelope is out


@settings(max_examples=examples(60), deadline=None)
@given(valid_invocations())
def test_click_the_one_shot_path_and_the_thin_client_give_each_option_the_same_meaning(
    invocation: tuple[list[str], dict[str, Any]],
) -> None:
    args, expected = invocation
    with pytest.MonkeyPatch.context() as mp:
        rec = Recorder()
        mp.setattr(client, "route_via_daemon", rec.route_via_daemon)
        mp.setattr(oneshot, "run_query", rec.run_query)
        mp.setattr(entry, "cancel_on_signals", lambda: None)  # keep pytest's own Ctrl-C handling
        mp.delenv("MEMORY_ROUTER_DAEMON", raising=False)
        mp.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"from stdin")))
        with pytest.raises(SystemExit):
            cli.main(["query", *args], standalone_mode=False)  # click's command
        mp.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"from stdin")))
        mp.setattr("sys.argv", ["memory-router", "query", *args])
        try:
            with pytest.raises(SystemExit):
                entry.main()  # the console script: the table's parser, the thin client, the one-shot path
        finally:
            gc.enable()
    via_click, via_script = rec.routed
    assert via_click == via_script
    # The daemon is asked with exactly what is routed, unless --daemon off.
    assert rec.asked_daemon == ([] if expected.get("mode") == "off" else [via_click, via_script])
    query_args, files, text = via_click
    assert query_args == QueryArgs(**expected)
    assert text == ("from stdin" if expected["query"] == "-" else expected["query"])
    assert files == paths.resolve(query_args)


class FakeConnection:
    """Stands in for the daemon's socket (a fake): records the request line, answers an envelope."""

    path = "/fake/router.sock"

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, line: bytes) -> None:
        self.sent.append(line)

    def receive(self, timeout: float | None) -> bytes:
        return b'{"id":null,' + error_envelope("q", "BACKEND_ERROR", "x").to_json()[1:]


@settings(max_examples=examples(60), deadline=None)
@given(valid_invocations())
def test_the_thin_clients_request_carries_each_option_the_daemon_answers_by(
    invocation: tuple[list[str], dict[str, Any]],
) -> None:
    args = parse_query_args(invocation[0])
    assert args is not None
    conn = FakeConnection()
    line, envelope = client.ask(conn, args, "the text")  # type: ignore[arg-type]
    assert line == error_envelope("q", "BACKEND_ERROR", "x").to_json() and envelope["error_code"] == "BACKEND_ERROR"
    (sent,) = conn.sent
    request = orjson.loads(sent)
    scope = {k: v for k in ("agent", "session_key") if (v := getattr(args, k))}
    wanted = {
        "query": "the text",
        **{k: getattr(args, k) for k in ("timeout_ms", "limit", "min_relevance", "max_chars", "since", "until")},
        **({"scope": scope} if scope else {}),
    }
    assert request == {k: v for k, v in wanted.items() if v is not None}


# ------------------------------------------------------------------- exit codes


def _router_errors() -> list[type[errors.RouterError]]:
    found, pending = [], [errors.RouterError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        found.append(cls)
    return found


@pytest.mark.parametrize("cls", _router_errors(), ids=lambda c: c.__name__)
def test_every_error_the_user_can_fix_exits_2_on_every_path(cls: type[errors.RouterError]) -> None:
    # The in-process CLI exits exc.exit_code; the thin client exits contract.exit_code(code) for
    # the envelope a daemon sends: the same for every error that names what to fix.
    samples = {
        errors.InvalidConfig: lambda: errors.InvalidConfig("c.json", "rules[0]", "bad"),
        errors.BackendsFileMissing: lambda: errors.BackendsFileMissing("b.json"),
        errors.InvalidBackendsFile: lambda: errors.InvalidBackendsFile("b.json", "backends", "bad"),
        errors.InvalidQuery: lambda: errors.InvalidQuery(contract.EMPTY_QUERY, "empty"),
    }
    exc = samples.get(cls, lambda: cls("bad"))()
    assert exc.exit_code == contract.EXIT_USAGE
    assert contract.exit_code(exc.error_code) == contract.EXIT_USAGE


@pytest.mark.parametrize("code", ["ALL_BACKENDS_FAILED", "NO_BACKEND_AVAILABLE", "DEADLINE_EXCEEDED", None])
def test_backends_failing_exits_1(code: str | None) -> None:
    assert contract.exit_code(code) == contract.EXIT_ERROR


# ------------------------------------------------------------------- the error envelope

# Lone surrogates included: a path that is not UTF-8 reaches a message as one (PEP 383).
_text = st.text(max_size=60)


@given(_text, st.sampled_from(["DAEMON_UNAVAILABLE", "BACKEND_ERROR", "X"]), _text)
def test_the_thin_clients_error_envelope_is_the_in_process_one_byte_for_byte(q: str, code: str, message: str) -> None:
    # Two serialisers (json without orjson on the thin client; orjson in-process) of one dict.
    printed = client._error_envelope(q, code, message)
    assert printed == error_envelope(q, code, message).to_json()
    back = Envelope.from_dict(orjson.loads(printed))
    assert (back.status, back.error_code, back.results) == ("error", code, ())


# ------------------------------------------------------------------- stderr


def test_a_diagnostic_is_one_line_that_cannot_drive_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    contract.say("bad\udcffname \033[31mred\033[0m")
    contract.say("stopping", who="memory-router serve")
    assert capsys.readouterr().err == "memory-router: bad\\xffname red\nmemory-router serve: stopping\n"
