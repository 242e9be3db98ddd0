"""``memory-router demo``: a real workspace, the spec's 15 example queries, a table of results.

The workspace (``workspace/`` beside this file) is a small project with Total Recall memory
tiers (working memory, registers with a superseded decision, daily logs, archive), docs and code.
Daily log files are shipped as ``DAY-N.md`` and renamed to the date N days ago, so recency
scoring behaves as it would on a live project.

Each adapter module may define ``demo_setup(workspace, state_dir) -> dict`` returning the
settings the demo's router-config.json should give it (for example an index it built), or raise
:class:`~memory_router.backends.DemoUnavailable` with the reason it cannot run here; the
demo's backends.json marks such a backend ``unavailable`` and the router skips it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from datetime import time as dtime
from pathlib import Path
from typing import Any

import orjson

from memory_router.core.frozen import Frozen

WORKSPACE = Path(__file__).with_name("workspace")


class Example(Frozen):
    number: int
    query: str
    rule: int
    chain: tuple[str, ...]  # the spec's full (Pro tier) chain of backends


# The spec's few-shot examples: query, expected rule, expected Pro-tier chain.
SPEC_EXAMPLES: tuple[Example, ...] = (
    Example(1, "find the function parseAuthToken", 1, ("qmd", "totalrecall")),
    Example(2, "how does the auth middleware relate to the session store", 2, ("cognee", "qmd", "totalrecall")),
    Example(
        3, "what did we decide about the database schema in the morning session", 3, ("lossless", "totalrecall", "qmd")
    ),
    Example(4, "how does error handling work in the API layer", 4, ("qmd", "qmd", "totalrecall")),
    Example(5, "what was the last thing we changed", 5, ("totalrecall", "qmd")),
    Example(6, "search in src/models/*.ts", 6, ("qmd", "totalrecall")),
    Example(7, "find all usages of UserService", 1, ("qmd", "totalrecall")),
    Example(
        8, "what's the relationship between OrderController and PaymentService", 2, ("cognee", "qmd", "totalrecall")
    ),
    Example(9, "recall the architecture decision from this morning", 3, ("lossless", "totalrecall", "qmd")),
    Example(10, "explain the caching strategy", 4, ("qmd", "qmd", "totalrecall")),
    Example(11, "auth", 7, ("qmd", "totalrecall")),
    Example(12, "that thing with the tokens", 5, ("totalrecall", "qmd")),
    Example(13, "database", 7, ("qmd", "totalrecall")),
    Example(14, "why did we do it that way", 3, ("lossless", "totalrecall", "qmd")),
    Example(15, "the middleware issue", 7, ("qmd", "totalrecall")),
)


class DemoWorkspace(Frozen):
    root: Path
    state_dir: Path
    config_path: Path
    backends_path: Path
    statuses: dict[str, str]


ARCHIVE_AGE_DAYS = 60


def date_workspace(dest: Path, today: date) -> None:
    """Date every file of a copied workspace relative to ``today``, never by when it was copied
    or checked out: memory without a date of its own is dated by its mtime, so the demo's (and
    SKILL.md's) answers would otherwise change with the time of day. Working memory, registers
    and docs: today 00:00 UTC (older than any of today's ``[HH:MM]`` daily entries); the archive:
    60 days earlier. Daily logs are dated by their file names."""
    midnight = datetime.combine(today, dtime.min, tzinfo=timezone.utc).timestamp()
    for path in dest.rglob("*"):
        if path.is_file() and not path.is_symlink():
            archived = "archive" in path.relative_to(dest).parts
            stamp = midnight - (ARCHIVE_AGE_DAYS * 86400 if archived else 0)
            os.utime(path, (stamp, stamp))


def materialize(dest: Path, *, today: date | None = None, log: Callable[[str], object] = print) -> DemoWorkspace:
    """Copy the workspace to ``dest``, date the daily logs, prepare each backend, write configs."""
    from memory_router.backends import DemoUnavailable, adapter_module
    from memory_router.config.paths import packaged_config
    from memory_router.config.router_config import read_json

    today = today or date.today()
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(WORKSPACE, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".keep", "__pycache__"))
    daily = dest / "memory" / "daily"
    for template in sorted(daily.glob("DAY-*.md")):
        days_ago = int(template.stem.split("-")[1])
        template.replace(daily / f"{(today - timedelta(days=days_ago)).isoformat()}.md")
    date_workspace(dest, today)

    state_dir = dest / "state"
    state_dir.mkdir(exist_ok=True)
    config = read_json(packaged_config())
    statuses: dict[str, dict[str, Any]] = {}
    for name, spec in config["backends"].items():
        module = adapter_module(spec["type"])
        setup = module.demo_setup
        try:
            if setup is None:
                raise DemoUnavailable(f"the {spec['type']} adapter has no demo set-up")
            spec.update(setup(dest, state_dir))
            statuses[name] = {"status": "ready", "message": None}
        except DemoUnavailable as exc:
            statuses[name] = {"status": "unavailable", "message": str(exc)}
            log(f"demo: {name} is unavailable here: {exc}")
    config_path = state_dir / "router-config.json"
    config_path.write_bytes(orjson.dumps(config, option=orjson.OPT_INDENT_2))
    ready = {n for n, s in statuses.items() if s["status"] == "ready"}
    tier = "pro" if {"qmd", "totalrecall", "cognee", "lossless"} <= ready else "starter"
    backends_path = state_dir / "backends.json"
    backends_path.write_bytes(
        orjson.dumps({"version": "2.0", "tier": tier, "backends": statuses}, option=orjson.OPT_INDENT_2)
    )
    return DemoWorkspace(dest, state_dir, config_path, backends_path, {n: s["status"] for n, s in statuses.items()})


async def _route_all(ws: DemoWorkspace) -> list[Any]:
    from memory_router.backends import BackendContext
    from memory_router.backends.base import ClosableBackend, WarmableBackend
    from memory_router.config.installed import load_installed
    from memory_router.config.router_config import load_config
    from memory_router.routing.router import Router

    # Long-lived and warmed first, as `serve` runs: qmd's engine loads the embedding model once,
    # so a semantic step is not timed out by a model load (3-5 s on a CPU) on every query.
    context = BackendContext(state_dir=ws.state_dir, cwd=ws.root, long_lived=True)
    router = Router(load_config(ws.config_path), context=context)
    installed = load_installed(ws.backends_path)
    instances = [router.backend(name) for name in router.config.backends if installed.unusable_reason(name) is None]
    try:
        for instance in instances:
            if isinstance(instance, WarmableBackend):
                await instance.warm()
        return [await router.route(ex.query, installed) for ex in SPEC_EXAMPLES]
    finally:
        for instance in router.instances().values():
            if isinstance(instance, ClosableBackend):
                await instance.aclose()


def run_demo(directory: Path | None, *, as_json: bool = False) -> int:
    """Build the workspace, route the 15 examples, print a table. Exit 0 iff every example
    matched the rule the spec names."""
    dest = directory or Path(tempfile.mkdtemp(prefix="memory-router-demo-"))
    ws = materialize(dest, log=lambda m: print(m, file=sys.stderr))
    print(f"demo workspace: {ws.root}", file=sys.stderr)
    print(
        f"backends.json:  {ws.backends_path}  ({', '.join(f'{k}={v}' for k, v in ws.statuses.items())})",
        file=sys.stderr,
    )
    envelopes = asyncio.run(_route_all(ws))
    mismatches = 0
    rows = []
    for ex, env in zip(SPEC_EXAMPLES, envelopes, strict=True):
        ok = env.rule is not None and env.rule["number"] == ex.rule
        mismatches += not ok
        if as_json:
            sys.stdout.buffer.write(env.to_json() + b"\n")
            continue
        rows.append(
            (
                str(ex.number),
                ex.query[:58],
                f"{env.rule['number'] if env.rule else '-'} {env.rule['id'] if env.rule else ''}",
                "ok" if ok else f"want {ex.rule}",
                env.routed_to or "-",
                env.routed_mode or "-",
                env.status,
                f"{env.normalized_relevance:.2f}",
                str(env.fallbacks_used),
                str(env.router_duration_ms),
            )
        )
    if not as_json:
        header = ("#", "query", "rule", "spec", "routed_to", "mode", "status", "relev", "fb", "ms")
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        print(
            f"\n{15 - mismatches}/15 examples routed to the rule the spec names. "
            f"router.log: {ws.state_dir / 'router.log'}"
        )
        # The state dir carries its own router-config.json (memory_router.config.paths), so this is all it takes.
        import shlex

        print(f'Your turn: memory-router query "auth middleware" --state-dir {shlex.quote(str(ws.state_dir))}')
    return 0 if mismatches == 0 else 1
