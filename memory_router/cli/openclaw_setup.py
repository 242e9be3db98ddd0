"""``memory-router openclaw install`` / ``uninstall``: memory-router in OpenClaw's memory slot in one command.

Gathers what is there (openclaw.json, OpenClaw's copy of the plugin, the state dir, the agent's
qmd collection), lets :mod:`.openclaw_plan` decide the steps, and runs them: OpenClaw's own CLI
for everything in OpenClaw (``plugins install``, ``config set``, ``plugins uninstall``, argument
lists, stdin closed so nothing prompts), memory-router's own writers for its files. Then install
checks the result with ``openclaw plugins doctor --json`` and one ``openclaw memory search
--json``, which must come back from the plugin (it adds a ``routing`` block memory-core has not).

JSON on stdout, progress on stderr. Exit codes: 0 done (or nothing to do), 1 a step or a check
failed (the JSON says which, with OpenClaw's own message), 2 usage or configuration: OpenClaw
not found, an openclaw.json that cannot be read, a state dir that cannot be used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import orjson

from memory_router import __version__
from memory_router.cli import openclaw_plan as plan
from memory_router.cli.oneshot import Options, Session, write_json
from memory_router.config import paths
from memory_router.contract import CONFIG_INVALID, EXIT_ERROR, EXIT_OK, EXIT_USAGE, ROUTER_ERROR, say
from memory_router.core.errors import RouterError

STEP_TIMEOUT_S = 300.0  # one OpenClaw CLI start is 5-30 s on a loaded machine
# Routed to qmd's keyword search, then Total Recall (rule 1): answerable without embedding models.
CHECK_QUERY = "search for memory-router"
OPENCLAW_MISSING = "OPENCLAW_NOT_FOUND"


class Failed(Exception):
    """A step or a check failed; ``code`` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR, error_code: str = "OPENCLAW_STEP_FAILED") -> None:
        super().__init__(message)
        self.code = code
        self.error_code = error_code


def plugin_folder() -> Path:
    """The plugin ``openclaw plugins install`` copies: a checkout's ``openclaw-plugin/``, or the
    installed package's copy (``memory_router/openclaw_plugin``, the same files)."""
    from memory_router.config.installation import checkout_root

    root = checkout_root()
    return root / "openclaw-plugin" if root else Path(__file__).parent.parent / "openclaw_plugin"


def plugin_files(folder: Path) -> list[str]:
    """The files the plugin ships, relative to its folder, read as npm reads package.json's
    ``files``: each entry a file, or a folder standing for the files under it; package.json itself
    always. A checkout's folder holds more (the plugin's tests, tsconfig.json, package-lock.json,
    node_modules after ``npm ci``): those never reach OpenClaw."""
    manifest = orjson.loads((folder / "package.json").read_bytes())
    found = {"package.json"}
    for entry in manifest.get("files", []):
        path = folder / entry
        if path.is_dir():
            found |= {str(p.relative_to(folder)) for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")}
        elif path.is_file():
            found.add(str(path.relative_to(folder)))
    return sorted(found)


def install_plugin(argv: tuple[str, ...], source: str) -> str:
    """``openclaw plugins install`` copies the folder it is given whole: it is given a copy of the
    files the plugin ships, never a checkout's tests or node_modules."""
    with tempfile.TemporaryDirectory(prefix="memory-router-plugin-") as tmp:
        staged = Path(tmp) / "memory-router"
        for name in plugin_files(Path(source)):
            (staged / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(source) / name, staged / name)
        run(tuple(str(staged) if arg == source else arg for arg in argv))
    return "done"


def same_plugin(source: Path, copy: Path) -> bool:
    """OpenClaw's copy holds exactly the bundled plugin's bytes."""
    try:
        return all((copy / name).read_bytes() == (source / name).read_bytes() for name in plugin_files(source))
    except OSError:
        return False


def find_openclaw(flag: str | None) -> tuple[str, ...]:
    """How to run OpenClaw's CLI: ``--openclaw PATH``, else ``openclaw`` on PATH."""
    if flag:
        path = shutil.which(flag) if os.sep not in flag else flag
        if path and os.access(path, os.X_OK) and os.path.isfile(path):
            return (os.path.abspath(path),)
        raise Failed(f"--openclaw {flag}: not an executable file", EXIT_USAGE, OPENCLAW_MISSING)
    found = shutil.which("openclaw")
    if not found:
        raise Failed(
            "openclaw is not on PATH: install OpenClaw (`npm install -g openclaw`, Node >= 22) "
            "or pass --openclaw /path/to/openclaw",
            EXIT_USAGE,
            OPENCLAW_MISSING,
        )
    return (found,)


def read_openclaw_json() -> tuple[str, dict[str, Any] | None]:
    from memory_router.config.openclaw_file import OpenClawConfigInvalid, read

    where = paths.openclaw_config_file()
    try:
        return where, read(where)
    except OpenClawConfigInvalid as exc:
        raise Failed(str(exc), EXIT_USAGE, CONFIG_INVALID) from None


def run(argv: tuple[str, ...], *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """Run one step's program; its stdout, or :class:`Failed` with the end of its stderr."""
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,  # no prompt can wait for an answer nobody gives
            timeout=STEP_TIMEOUT_S,
            env=None if env is None else dict(env),
            cwd=cwd,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Failed(f"{argv[0]}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip())[-1500:]
        raise Failed(f"`{' '.join(argv[1:4])} ...` exited {done.returncode}: {tail}")
    return done.stdout


def memory_router_command() -> str:
    """This memory-router's console script, by absolute path: the Gateway may run with a PATH
    (a service's) that lacks pipx's or a venv's bin folder."""
    beside = Path(sys.executable).with_name("memory-router")
    if beside.is_file():
        return str(beside)
    found = shutil.which("memory-router")
    return os.path.abspath(found) if found else os.path.abspath(sys.argv[0])


def default_agent(config: Mapping[str, Any] | None) -> str:
    """OpenClaw's default agent: the roster entry marked ``default``, else the sole one, else ``main``."""
    from memory_router.config.openclaw import _owner

    return _owner(config) or "main"


def _qmd_state(session: Session, agent: str, workspace: str) -> tuple[plan.QmdState | None, Any, Path | None]:
    """The agent's qmd collection (``None`` when qmd is not configured or not installed)."""
    from memory_router.backends.qmd.adapter import QmdUnavailable
    from memory_router.backends.qmd.backend import QmdBackend
    from memory_router.backends.qmd.locate import QmdNotFound

    for name, spec in session.router.config.backends.items():
        if spec.type != "qmd":
            continue
        backend = session.router.backend(name)
        if isinstance(backend, QmdUnavailable):  # qmd cannot run here (what probe() says)
            return None, None, None
        if not isinstance(backend, QmdBackend):
            continue
        try:
            transport = backend.transport()
        except QmdNotFound:
            return None, None, None
        collection = f"openclaw-{agent}-memory"
        add = transport.argv("collection", ["add", "--name", collection, "--mask", plan.MEMORY_MASK], workspace)
        index = backend.index_file(transport.env)
        if index is not None and not index.exists():  # no index yet: no collection (and qmd is not started)
            return plan.QmdState(collection, False, tuple(add)), transport, index
        try:
            listed = subprocess.run(
                transport.argv("collection", ["list"]),
                cwd=transport.cwd if transport.cwd.is_dir() else None,  # made by the step, not by a look
                env=transport.env,
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None, None, None
        exists = f"{collection} (qmd://" in listed.stdout
        return plan.QmdState(collection, exists, tuple(add)), transport, index
    return None, None, None


def _router_config(state_dir: Path, agent: str, qmd: plan.QmdState | None) -> tuple[str | None, Any, str | None]:
    """Where install writes router-config.json (the packaged rules, qmd given the agent's
    collection), its content, and a note when an existing one does not list the collection."""
    if qmd is None:
        return None, None, None
    own = paths.resolve_config(None, str(state_dir))
    if own != paths.packaged_config_str():
        data = orjson.loads(Path(own).read_bytes()) if os.path.isfile(own) else {}
        listed = (((data.get("backends") or {}).get("qmd") or {}).get("agent_collections") or {}).get(agent) or []
        if qmd.collection in listed:
            return None, None, None
        return (
            None,
            None,
            (
                f'{own} is not replaced: add "agent_collections": {{"{agent}": ["{qmd.collection}"]}} to its '
                "qmd backend so the agent's searches read the collection"
            ),
        )
    data = orjson.loads(paths.packaged_config().read_bytes())
    qmd_settings = data.setdefault("backends", {}).setdefault("qmd", {"type": "qmd"})
    qmd_settings.setdefault("agent_collections", {})[agent] = [qmd.collection]
    return str(state_dir / paths.CONFIG_NAME), data, None


def gather_install(
    opts: Options, openclaw: tuple[str, ...], agent: str | None, force: bool
) -> tuple[plan.InstallState, Any]:
    from memory_router.config.openclaw import agent_workspace

    where, config = read_openclaw_json()
    try:
        session = Session(opts, cached=False)
    except RouterError as exc:
        raise Failed(str(exc), exc.exit_code, exc.error_code) from None
    agent = (agent or default_agent(config)).strip().lower()
    workspace, _ = agent_workspace(agent)
    state_dir = session.state_dir
    source = plugin_folder()
    copy = Path(paths.openclaw_root()) / "extensions" / plan.PLUGIN_ID
    qmd, transport, index = _qmd_state(session, agent, workspace)
    rc_path, rc_data, note = _router_config(state_dir, agent, qmd)
    record_path = state_dir / plan.RECORD_NAME
    state = plan.InstallState(
        openclaw=openclaw,
        config=config,
        plugin_source=str(source),
        plugin_current=same_plugin(source, copy),
        plugin_settings={"command": memory_router_command(), "stateDir": str(state_dir)},
        record_path=str(record_path),
        record=_read_record(record_path),
        agent=agent,
        workspace=workspace,
        workspace_exists=os.path.isdir(workspace),
        backends_json=str(session.backends_path),
        backends_json_exists=os.path.lexists(session.backends_path),
        force=force,
        qmd=qmd,
        router_config_path=rc_path,
        router_config=rc_data,
        notes=(f"OpenClaw's config: {where}", *([note] if note else [])),
    )
    return state, (session, transport, index)


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _write_private(path: Path, content: Any) -> None:
    """A small JSON file of memory-router's state dir, written whole."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps(content, option=orjson.OPT_INDENT_2) + b"\n")
    os.replace(tmp, path)


def _key_present(dotted: str) -> bool:
    """``config unset`` exits 1 on a key that is not there: is it there now (after earlier steps)?"""
    _, config = read_openclaw_json()
    node: Any = config
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def execute(step: plan.InstallStep, context: Any, state: Any) -> str:
    """Run one step; what it did, in a few words."""
    if step.unset is not None and not _key_present(step.unset):
        return "already gone"
    if step.id == "qmd-collection":
        return _index_qmd(step, context, state)
    source = getattr(state, "plugin_source", None)  # install's state; uninstall's has none
    if step.id == "plugin" and step.argv is not None and source in step.argv:
        return install_plugin(step.argv, source)
    if step.argv is not None:
        run(step.argv)
        return "done"
    return _write_step(step, context, state)


def _index_qmd(step: plan.InstallStep, context: Any, state: Any) -> str:
    from memory_router.backends.qmd.indexing import build_collection

    session, transport, index = context
    assert state.qmd is not None and transport is not None
    # The index-writer lock every writer of this index takes: `<index>.lock` beside it (the
    # daemon's refresh and the demo use the same), so install never writes while they update.
    lock = index.with_name(index.stem + ".lock") if index is not None else session.state_dir / "qmd-index.lock"
    try:
        build_collection(transport, Path(state.workspace), state.qmd.collection, plan.MEMORY_MASK, lock)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        raise Failed(f"indexing {state.workspace} with qmd failed: {exc}") from None
    return "done"


def _write_step(step: plan.InstallStep, context: Any, state: Any) -> str:
    assert step.path is not None
    target = Path(step.path)
    if step.id == "record" and step.payload is None:  # uninstall: forget it
        target.unlink(missing_ok=True)
        return "deleted"
    if step.id == "record":
        _write_private(target, {"written_by": f"memory-router openclaw install {__version__}", **step.payload})
    elif step.id == "workspace":
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
    elif step.id == "router-config":
        _write_private(target, step.payload)
    elif step.id == "backends":
        _write_backends(target, state)
    return "done"


def _write_backends(target: Path, state: plan.InstallState) -> None:
    """As ``memory-router init``: each backend's probe, with the agent's workspace as the memory
    root Total Recall is probed on (the plugin passes it as OPENCLAW_REPO_ROOT)."""
    from memory_router.cli import initialize
    from memory_router.config.readiness import probe_all

    # Total Recall is probed on the agent's workspace, the memory root the plugin gives it.
    os.environ.setdefault("OPENCLAW_REPO_ROOT", state.workspace)
    session = Session(Options(state_dir=str(target.parent), backends_json=str(target), config=None), cached=False)
    content = initialize.document(probe_all(session.router, None))
    content["written_by"] = f"memory-router openclaw install {__version__}"
    try:
        initialize.write(target, content, force=state.force)
    except initialize.AlreadyThere:
        pass  # written meanwhile by someone else: theirs stands
    except OSError as exc:
        raise Failed(f"cannot write {target}: {exc}", EXIT_USAGE, ROUTER_ERROR) from None


def check(openclaw: tuple[str, ...], agent: str) -> dict[str, Any]:
    """``openclaw plugins doctor`` and one search, which must be memory-router's answer (the
    plugin adds a ``routing`` block, or its error names memory-router; memory-core's does neither).
    A memory-router error (no backend can answer yet: no memory files, no qmd) passes the check
    with a warning: the slot is memory-router's, and the message says what to install."""
    doctor = _json_of(run((*openclaw, "plugins", "doctor", "--json")))
    problems = [*doctor.get("pluginErrors", []), *doctor.get("diagnostics", [])]
    if doctor.get("ok") is not True:
        text = orjson.dumps(problems or doctor).decode()
        # Another plugin's trouble is OpenClaw's to report, not a failed install of this one.
        if plan.PLUGIN_ID in text or "slots" in text or not problems:
            raise Failed(f"openclaw plugins doctor reports problems: {text[:1500]}")
        say(f"warning: openclaw plugins doctor reports problems of other plugins: {text[:600]}")
    facts = {"ok": doctor.get("ok") is True, "problems": problems}
    argv = (*openclaw, "memory", "search", "--json", "--agent", agent, "--max-results", "3", "--query", CHECK_QUERY)
    answer = _json_of(_stdout_even_on_failure(argv))
    routing, error = answer.get("routing"), answer.get("error")
    if isinstance(routing, dict):
        return {
            "doctor": facts,
            "search": {"results": len(answer.get("results") or []), "routing": routing},
        }
    if isinstance(error, str) and error.startswith("memory-router"):
        say(f"warning: memory-router holds the slot but could not answer the check search yet: {error}")
        return {"doctor": facts, "search": {"results": 0, "error": error}}
    raise Failed(
        "`openclaw memory search` was not answered by memory-router (no routing block): "
        f"{(error or str(answer))[:800]}; is memory-core still enabled?"
    )


def _stdout_even_on_failure(argv: tuple[str, ...]) -> str:
    """The check search's stdout: the plugin prints its JSON (with the error) and exits 1 on a
    memory-router error, which the caller tells apart."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=STEP_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Failed(f"{argv[0]}: {exc}") from None
    if done.returncode != 0 and "{" not in done.stdout:
        raise Failed(f"the check search exited {done.returncode}: {done.stderr.strip()[-1500:]}")
    return done.stdout


def _json_of(stdout: str) -> dict[str, Any]:
    """The JSON object an OpenClaw command printed (after any banner line), ``{}`` when none."""
    start = stdout.find("{")
    try:
        data = orjson.loads(stdout[start:]) if start >= 0 else {}
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _report(out: dict[str, Any], code: int) -> None:
    write_json(orjson.dumps(out, option=orjson.OPT_INDENT_2) + b"\n")
    sys.exit(code)


def carry_out(steps: list[plan.InstallStep], context: Any, state: Any, out: dict[str, Any]) -> None:
    """Run the steps in order, each reported on stderr and in ``out``; stops at the first failure."""
    done: list[dict[str, Any]] = out["steps"]
    for index, step in enumerate(steps, 1):
        say(f"[{index}/{len(steps)}] {step.what}")
        row = step.as_dict()
        done.append(row)
        try:
            row["status"] = execute(step, context, state)
        except Failed:
            row["status"] = "failed"
            raise
    out["changed"] = any(row["status"] not in ("already gone",) for row in done)


def _guarded(body: Callable[[dict[str, Any]], None], out: dict[str, Any]) -> None:
    try:
        body(out)
    except Failed as exc:
        say(f"memory-router openclaw: {exc}")
        _report({**out, "ok": False, "error_code": exc.error_code, "error_message": str(exc)}, exc.code)
    _report({**out, "ok": True}, EXIT_OK)


@click.group()
def openclaw() -> None:
    """Put memory-router in OpenClaw's memory slot, or take it out.

    Exit codes: 0 done (or nothing to do), 1 a step or the check failed, 2 OpenClaw not found
    or a configuration that cannot be used."""


_openclaw_option = click.option(
    "--openclaw", "openclaw_path", metavar="PATH", help="OpenClaw's CLI (default: openclaw on PATH)."
)
_dry_run_option = click.option("--dry-run", is_flag=True, help="Print the steps (argument lists); change nothing.")
_state_option = click.option("--state-dir", metavar="DIR", help="memory-router's state dir (default: as `init`).")


@openclaw.command()
@_dry_run_option
@_openclaw_option
@click.option(
    "--agent",
    metavar="ID",
    help="The agent whose memory qmd indexes and the check searches (default: OpenClaw's default agent).",
)
@click.option("--force", is_flag=True, help="Replace an existing backends.json.")
@click.option("--no-check", is_flag=True, help="Skip `openclaw plugins doctor` and the check search.")
@_state_option
def install(
    dry_run: bool, openclaw_path: str | None, agent: str | None, force: bool, no_check: bool, state_dir: str | None
) -> None:
    """Make memory-router OpenClaw's memory: plugin, slot, backends.json, qmd collection.

    Copies the plugin in with `openclaw plugins install`, selects it for plugins.slots.memory,
    disables memory-core (recorded, so uninstall gives it back), writes backends.json from the
    probes unless one exists, indexes the agent's memory files with qmd when qmd is installed,
    then checks with `openclaw plugins doctor` and one `openclaw memory search`. A second run
    changes nothing."""
    out: dict[str, Any] = {"command": "openclaw install", "dry_run": dry_run, "changed": False, "steps": []}

    def body(out: dict[str, Any]) -> None:
        oc = find_openclaw(openclaw_path)
        state, context = gather_install(Options(state_dir=state_dir, backends_json=None, config=None), oc, agent, force)
        steps = plan.plan_install(state)
        out.update(openclaw=oc[0], agent=state.agent, workspace=state.workspace, state_dir=str(context[0].state_dir))
        out["notes"] = list(state.notes)
        if dry_run:
            _show_plan(steps, out, "nothing to do: memory-router holds the memory slot")
            return
        if not steps:
            say("nothing to do: memory-router already holds OpenClaw's memory slot")
        carry_out(steps, context, state, out)
        if not no_check:
            say("checking: openclaw plugins doctor, one openclaw memory search")
            out["check"] = check(oc, state.agent)
        if steps:
            say("done: restart the Gateway (`openclaw gateway restart`) if one is running")

    _guarded(body, out)


def _show_plan(steps: Sequence[plan.InstallStep], out: dict[str, Any], nothing: str) -> None:
    """``--dry-run``: the steps said on stderr and listed in the JSON, none carried out."""
    out["steps"] = [step.as_dict() for step in steps]
    for step in steps:
        say(f"would {step.what}: {' '.join(step.argv) if step.argv else step.path}")
    say(nothing if not steps else f"{len(steps)} steps")


@openclaw.command()
@_dry_run_option
@_openclaw_option
@_state_option
def uninstall(dry_run: bool, openclaw_path: str | None, state_dir: str | None) -> None:
    """Give OpenClaw's memory back: remove the plugin, restore the slot and memory-core.

    Restores what install recorded (memory-core enabled, OpenClaw's default, when nothing was
    recorded). backends.json, router-config.json and qmd's index stay (memory-router's, not OpenClaw's)."""
    out: dict[str, Any] = {"command": "openclaw uninstall", "dry_run": dry_run, "changed": False, "steps": []}

    def body(out: dict[str, Any]) -> None:
        oc = find_openclaw(openclaw_path)
        _, config = read_openclaw_json()
        state_path = paths.state_dir(state_dir)
        record_path = state_path / plan.RECORD_NAME
        state = plan.UninstallState(
            openclaw=oc,
            config=config,
            plugin_present=(Path(paths.openclaw_root()) / "extensions" / plan.PLUGIN_ID).is_dir(),
            record_path=str(record_path),
            record=_read_record(record_path),
        )
        steps = plan.plan_uninstall(state)
        out.update(openclaw=oc[0], state_dir=str(state_path))
        if dry_run:
            _show_plan(steps, out, "nothing to do: memory-router is not installed in OpenClaw")
            return
        if not steps:
            say("nothing to do: memory-router is not installed in OpenClaw")
        carry_out(steps, None, state, out)
        if steps:
            say("done: memory-core holds the memory slot again; restart the Gateway if one is running")

    _guarded(body, out)
