"""The ``memory-router`` command line.

JSON goes to stdout, human diagnostics to stderr. Exit codes:

* 0 - the query was answered: status ``success``, ``partial`` or ``empty``
* 1 - status ``error``: every backend failed, or none in the chain is usable; or the answer
  could not be written whole to stdout (reader gone, or no data taken for 30 s; see
  :mod:`.outwrite`), with the reason on stderr
* 2 - usage or configuration error (bad flag, empty/oversized query, invalid UTF-8,
  missing or malformed backends.json / router-config.json); an error envelope is still printed
  by ``query`` and ``route --json`` so a caller parsing stdout always gets JSON
* 130 / 143 / 129 - ``query`` interrupted by SIGINT / SIGTERM / SIGHUP: the backend call is
  cancelled and its process group killed, nothing is printed on stdout (:mod:`.interrupt`)

``backends`` exits 1 when backends.json marks a backend usable that cannot run here;
``config check`` exits 2 when a rule has no backend that can run; ``init`` exits 2 rather than
replace an existing backends.json without ``--force`` (docs/configuration.md).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from memory_router import __version__, contract
from memory_router.cli.oneshot import Options, Session, read_query, write_json
from memory_router.contract import EXIT_ERROR, EXIT_OK, EXIT_USAGE, say
from memory_router.core.errors import RouterError

__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "IN_PROCESS", "Options", "Session", "main", "common_options"]

# The click context's ``obj`` when the console script has already tried the daemon for ``query``,
# or its parser declined the arguments (memory_router.cli.entry): the command then routes in-process.
IN_PROCESS = "in-process"


def click_option(option: contract.Option) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click decorator for one option of the table in :mod:`.contract`."""
    kw: dict[str, Any] = {"help": option.help}
    if option.kind == "flag":
        kw["is_flag"] = True
    elif option.kind == "int":
        kw["type"] = click.IntRange(option.low, option.high)
    elif option.kind == "float":
        kw["type"] = click.FloatRange(option.low, option.high)
    elif option.kind == "choice":
        kw["type"] = click.Choice(list(option.choices))
    if option.metavar:
        kw["metavar"] = option.metavar
    return click.option(option.flag, option.dest, **kw)


def _with_options(options: tuple[contract.Option, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):  # decorators apply bottom-up: the table's order is --help's
            func = click_option(option)(func)
        return func

    return decorate


# --state-dir, --backends-json, --config: every command that reads the configuration.
common_options = _with_options(contract.COMMON_OPTIONS)


# Subcommands that live in other modules, imported only when invoked (keeps `query` cold start
# free of the daemon, MCP and watchfiles imports): name -> ("module:attribute", its help's first
# sentence). `--help` lists them from this table instead of importing them (tests check that it
# matches each command's own help).
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "mcp": ("memory_router.daemon.mcp:mcp_command", "Serve memory_query and memory_route as an MCP server over stdio."),
    "serve": (
        "memory_router.daemon.serve:serve",
        "Answer JSON-lines queries on stdin, one response line each.",
    ),
    "daemon": (
        "memory_router.daemon.control:daemon",
        "The warm daemon behind `serve --socket`: status, stop, start.",
    ),
    "openclaw": (
        "memory_router.cli.openclaw_setup:openclaw",
        "Put memory-router in OpenClaw's memory slot, or take it out.",
    ),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY_COMMANDS:
            import importlib

            module, attr = LAZY_COMMANDS[name][0].split(":")
            command: click.Command = getattr(importlib.import_module(module), attr)  # the table names commands
            return command
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, with lazy commands described by their table entry (a stub)."""
        commands: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            cmd = (
                click.Command(name, help=LAZY_COMMANDS[name][1])
                if name in LAZY_COMMANDS
                else self.get_command(ctx, name)
            )
            if cmd is not None and not cmd.hidden:
                commands.append((name, cmd))
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in commands])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="memory-router")
def main() -> None:
    """Route memory queries to the right OpenClaw memory backend, with fallback.

    Start here: `memory-router init` records which backends run here, then
    `memory-router query "what did we decide about X"`. To try it first: `memory-router demo`.

    Exit codes: 0 answered (success/partial/empty), 1 every backend failed, 2 usage or
    configuration error.
    """


@main.command()
@click.argument("query")
@_with_options(contract.QUERY_OPTIONS)
def query(query: str, **options: Any) -> None:
    """Route QUERY and print the router envelope (JSON).

    QUERY '-' reads standard input."""
    from memory_router.cli.oneshot import main as in_process
    from memory_router.client.invocation import QueryArgs, answer
    from memory_router.client.thin import route_via_daemon

    args = QueryArgs(query, **options)  # one keyword per option of the table, as the console script's parser
    # The console script already decided for in-process when it handed the arguments to click.
    answer(args, in_process, None if click.get_current_context().obj is IN_PROCESS else route_via_daemon)


@main.command()
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@common_options
def route(query: str, as_json: bool, **kw: Any) -> None:
    """Dry run: the rule QUERY matches and the chain it would try.

    Calls no backend."""
    from memory_router.output import jsonout

    try:
        session = Session(Options(**kw))
        plan = session.router.plan_blocking(read_query(query), session.installed())
    except RouterError as exc:
        say(str(exc))
        if as_json:  # like `query`: a caller parsing stdout always gets JSON
            from memory_router.core.envelope import error_envelope

            write_json(error_envelope(query if query != "-" else "", exc.error_code, str(exc)).to_json())
        sys.exit(exc.exit_code)
    if as_json:
        write_json(jsonout.dumps(plan.as_dict()))
        return
    m = plan.match
    how = (
        f"{m.strength} signal {m.signal!r} matched {m.matched!r} at {m.span}"
        if m.signal
        else "no signal matched: default rule"
    )
    click.echo(f"rule {m.rule.number} ({m.rule.id}): {how}")
    click.echo("planned:  " + " -> ".join(_fmt_step(s) for s in m.rule.chain))
    click.echo("chain:    " + (" -> ".join(_fmt_step(s) for s in plan.steps) or "(none usable)"))
    for skipped in plan.skipped:
        click.echo(f"skipped:  {_fmt_step(skipped.step)}: {skipped.reason}")
    strategy = session.router.config.strategy_for(m.rule.id)
    if strategy != "sequential":
        click.echo(f"strategy: {strategy} (every usable step at once, merged)")
    if m.timed_out:
        click.echo(f"note: the signal regex of rule(s) {', '.join(map(str, m.timed_out))} hit the match timeout")


def _fmt_step(step: Any) -> str:
    shown = f"{step.backend}/{step.mode}" if step.mode else step.backend
    return f"{shown} (extension)" if getattr(step, "extension", False) else shown


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@common_options
def backends(as_json: bool, **kw: Any) -> None:
    """Each configured backend: listed in backends.json? runs here?

    Shows which relevance map (calibration) each mode goes through.

    Exit 1 when backends.json marks a backend usable (ready, degraded) that cannot run here: the
    router would try it and fail. Exit 2 for a broken configuration."""
    from memory_router.config.readiness import misreported, probe_all
    from memory_router.core.errors import BackendsFileMissing
    from memory_router.output import jsonout

    try:
        session = Session(Options(**kw))
    except RouterError as exc:
        say(str(exc))
        sys.exit(exc.exit_code)
    installed = None
    try:
        installed = session.installed()
    except BackendsFileMissing as exc:
        say(str(exc))
    except RouterError as exc:
        say(str(exc))
        sys.exit(exc.exit_code)
    ready = probe_all(session.router, installed)
    calibration = session.router.calibration
    rows = [
        {
            "backend": r.backend,
            "type": r.type,
            "status": r.status,
            "usable": installed is not None and r.unusable is None,
            "runs_here": r.runs_here,
            "detail": r.detail,
            **({"facts": r.facts} if r.facts else {}),
            "calibration": _calibration_maps(calibration, session.router.backend(r.backend), r.type),
        }
        for r in ready.values()
    ]
    running = _daemon_runtime(kw.get("state_dir"))
    for row in rows:
        if row["backend"] in running:
            row["daemon"] = running[row["backend"]]
        if (fresh := _freshness(session.router, str(row["backend"]), row.get("daemon"))) is not None:
            row["freshness"] = fresh
    wrong = misreported(ready) if installed is not None else []
    if as_json:
        about = {"source": calibration.source, "active": calibration.active, "problem": calibration.problem}
        write_json(jsonout.dumps({"backends_json": str(session.backends_path), "calibration": about, "backends": rows}))
    else:
        _print_backends(session.backends_path, installed is not None, calibration, rows)
    if wrong:
        names = ", ".join(f"{r.backend} ({r.status})" for r in wrong)
        say(
            f"{session.backends_path} marks {names} usable, but it cannot run here; re-run "
            "`memory-router init --force` to record what runs, or fix the backend"
        )
        sys.exit(EXIT_ERROR)


def _print_backends(path: Path, listed: bool, calibration: Any, rows: list[dict[str, Any]]) -> None:
    from memory_router.daemon.describe import describe_refresh, describe_runtime

    click.echo(f"backends.json: {path}" + ("" if listed else " (missing)"))
    click.echo(f"calibration:   {calibration.problem or calibration.source}")
    for row in rows:
        flag = "ok " if row["usable"] and row["runs_here"] else "-- "
        click.echo(
            f"{flag}{row['backend']:<12} status={row['status'] or 'not listed':<12} "
            f"runs_here={'yes' if row['runs_here'] else 'no ':<4} {row['detail']}"
        )
        if row["calibration"]:
            maps = ", ".join(f"{mode}: {key}" for mode, key in row["calibration"].items())
            click.echo(f"   {'':<12} relevance map: {maps}")
        if "daemon" in row:
            click.echo(f"   {'':<12} in the daemon: {describe_runtime(row['daemon'])}")
        elif "freshness" in row:
            click.echo(f"   {'':<12} index: {describe_refresh(row['freshness'])}")


def _calibration_maps(calibration: Any, backend: Any, type_name: str) -> dict[str, str]:
    """Per mode of a backend, the calibration map its relevance goes through (``native``: none)."""
    from memory_router.backends.base import CalibratedBackend

    if not isinstance(backend, CalibratedBackend):
        return {}
    from memory_router.backends import adapter_module

    modes = adapter_module(type_name).MODES
    chosen = sorted(modes) if modes else [None]
    return {mode or "-": calibration.model_for(backend.calibration_key(mode))[0] for mode in chosen}


def _freshness(router: Any, name: str, daemon: Any) -> dict[str, Any] | None:
    """A qmd backend's index freshness (pending files, last update, last refresh's outcome): the
    daemon's own view when one serves, else read from the index's refresh record and the folders."""
    if isinstance(daemon, dict) and isinstance(refresh := daemon.get("refresh"), dict):
        return dict(refresh)
    try:
        facts = getattr(router.backend(name), "freshness_facts", None)
        return facts() if facts is not None else None
    except Exception:  # noqa: BLE001 - a status line must not fail the command
        return None


def _daemon_runtime(state_dir: str | None) -> dict[str, Any]:
    """The socket daemon's live backend facts (qmd's warm engine), if a daemon answers."""
    from memory_router.client import thin as client
    from memory_router.config import paths

    try:
        with client.Connection(client.socket_path(paths.resolve_state_dir(state_dir)), timeout=2.0) as conn:
            conn.hello()
            stats = conn.request({"op": "stats"}, timeout=5.0).get("stats")
    except (client.DaemonError, OSError, ValueError):
        return {}
    runtime = stats.get("runtime") if isinstance(stats, dict) else None
    return runtime if isinstance(runtime, dict) else {}


@main.group()
def config() -> None:
    """Configuration commands."""


@config.command("check")
@common_options
def config_check(**kw: Any) -> None:
    """Validate both config files and that each rule can be answered.

    Checks router-config.json and backends.json, then that every rule has a backend backends.json
    allows and that can run here; exit 2 with the problems, naming each rule and backend."""
    from memory_router.config.readiness import probe_all, rules_without_an_answer

    try:
        session = Session(Options(**kw), cached=False)
        click.echo(
            f"ok: {session.config.path}: {len(session.config.rules.rules)} rules, "
            f"backends {', '.join(session.config.backends)}"
        )
        installed = session.installed()
    except RouterError as exc:
        say(str(exc))
        sys.exit(exc.exit_code)
    usable = ", ".join(installed.usable) or "none"
    click.echo(f"ok: {installed.path}: tier {installed.tier or 'unspecified'}, usable backends: {usable}")
    for name in installed.statuses:
        if name not in session.config.backends:
            click.echo(
                f"note: {installed.path.name} lists {name!r}, which router-config.json does not configure", err=True
            )
    dead = rules_without_an_answer(list(session.config.rules.rules), probe_all(session.router, installed))
    for rule, reasons in dead:
        say(f"rule {rule.number} ({rule.id}): no backend of its chain can run here:")
        for reason in reasons:
            click.echo(f"  {reason}", err=True)
    if dead:
        say(
            f"{len(dead)} of {len(session.config.rules.rules)} rules would always fail; install a backend of "
            "their chains and re-run `memory-router init --force`, or change router-config.json"
        )
        sys.exit(EXIT_USAGE)
    click.echo("ok: every rule has a backend that can run here")


@main.command()
@click.option("--force", is_flag=True, help="Replace an existing backends.json.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@common_options
def init(force: bool, as_json: bool, **kw: Any) -> None:
    """Write backends.json: which backends can run here, and why.

    An explicit installer step (the router never probes by itself; it reads backends.json).
    Never replaces an existing file without --force (exit 2)."""
    from memory_router.cli import initialize
    from memory_router.config.readiness import probe_all
    from memory_router.output import jsonout

    try:
        session = Session(Options(**kw))
    except RouterError as exc:
        say(str(exc))
        sys.exit(exc.exit_code)
    content = initialize.document(probe_all(session.router, None))
    path = session.backends_path
    try:
        initialize.write(path, content, force=force)
    except initialize.AlreadyThere:
        message = f"{path} exists; not replacing it (pass --force to replace it, or `memory-router backends` to see it)"
        say(message)
        if as_json:
            write_json(
                jsonout.dumps(
                    {
                        "backends_json": str(path),
                        "written": False,
                        "error_code": initialize.EXISTS,
                        "error_message": message,
                    }
                )
            )
        sys.exit(EXIT_USAGE)
    except OSError as exc:
        say(f"cannot write {path}: {exc}")
        sys.exit(EXIT_USAGE)
    skill = initialize.skill_folder()
    if as_json:
        write_json(jsonout.dumps({"backends_json": str(path), "written": True, **content, "skill": str(skill)}))
        return
    click.echo(f"wrote {path}:")
    for name, entry in content["backends"].items():
        click.echo(f"  {entry['status']:<12} {name:<12} {entry['reason']}")
    ready = [name for name, entry in content["backends"].items() if entry["status"] == "ready"]
    if not ready:
        say("no configured backend can run here: every query will fail until one is installed")
    click.echo("the router reads only this file: re-run `memory-router init --force` after installing a backend")
    click.echo(f"OpenClaw skill: openclaw skills install {skill}")


@main.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to create the demo workspace (default: a new temporary directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one envelope per line instead of the table.")
def demo(directory: Path | None, as_json: bool) -> None:
    """Try it: a demo workspace and the spec's 15 example queries.

    Builds the workspace (with its own state dir) and routes each query through it."""
    from memory_router.demo import run_demo

    sys.exit(run_demo(directory, as_json=as_json))


if __name__ == "__main__":  # pragma: no cover
    main()
