"""The retrieval benches ask the router as an agent's daemon would: one ``memory-router serve``
per variant and workspace, over its stdin/stdout JSON lines, one request at a time (so each
latency is a query's own).

:func:`serve` starts the daemon in a state dir of the variant's own (its router-config.json and
backends.json written there) and stops it, its whole process group if it will not leave;
:func:`ask_in_turn` asks a list of queries through it, after an unscored warm-up query where the
bench wants one (it loads qmd's models), and records a daemon that dies as
:data:`SERVE_FAILED` answers for the queries it left, so a bench's tables keep every query.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

Answer = tuple[dict[str, Any], float]
"""An envelope as the daemon wrote it, and the milliseconds from request written to answer read."""
Ask = Callable[[dict[str, Any]], Awaitable[Answer]]

SERVE_FAILED: dict[str, Any] = {"status": "error", "error_code": "BENCH_SERVE_FAILED"}
_STOP_S = 30


@contextlib.asynccontextmanager
async def serve(
    state: Path, config: Mapping[str, Any], *, tier: str, ready: Sequence[str], env: Mapping[str, str]
) -> AsyncIterator[Ask]:
    """A ``memory-router serve`` in ``state`` with ``config`` as its router-config.json and
    ``ready`` as the backends backends.json lists (the others are not installed, so the router
    passes their steps over). Yields the function that asks it one request."""
    state.mkdir(parents=True, exist_ok=True)
    config_path = state / "router-config.json"
    config_path.write_text(json.dumps(config, indent=1), encoding="utf-8")
    backends = {"tier": tier, "backends": {name: {"status": "ready"} for name in ready}}
    (state / "backends.json").write_text(json.dumps(backends), encoding="utf-8")
    argv = [sys.executable, "-m", "memory_router", "serve", "--state-dir", str(state)]
    argv += ["--config", str(config_path), "--no-reload", "--concurrency", "1"]
    stderr_path = state / "serve.stderr"
    with open(stderr_path, "wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=dict(env),
            limit=64 * 1024 * 1024,
            start_new_session=True,
        )
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None

    async def ask(request: dict[str, Any]) -> Answer:
        t0 = time.perf_counter()
        stdin.write(orjson.dumps(request) + b"\n")
        await stdin.drain()
        line = await stdout.readline()
        elapsed = (time.perf_counter() - t0) * 1000
        if not line:
            tail = stderr_path.read_text(encoding="utf-8", errors="replace")[-400:]
            raise ConnectionError(f"serve exited early (stderr: {tail})")
        answer: dict[str, Any] = orjson.loads(line)
        return answer, elapsed

    try:
        yield ask
    finally:
        if not stdin.is_closing():
            stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), _STOP_S)
        except asyncio.TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


async def ask_in_turn(
    ask: Ask,
    queries: Sequence[str],
    *,
    limit: int,
    on_error: Callable[[Exception], None],
    warmup_timeout_ms: int | None = None,
    timeout_ms: int | None = None,
) -> list[Answer]:
    """Each query's answer, in order. With ``warmup_timeout_ms``, the first query is asked once
    before (unscored, under that timeout). When the daemon dies or answers out of turn,
    ``on_error`` hears why and the queries left get :data:`SERVE_FAILED`."""
    answers: list[Answer] = []
    try:
        if queries and warmup_timeout_ms is not None:
            await ask({"id": "warm-up", "query": queries[0], "limit": limit, "timeout_ms": warmup_timeout_ms})
        for i, query in enumerate(queries):
            request: dict[str, Any] = {"id": i, "query": query, "limit": limit}
            if timeout_ms is not None:
                request["timeout_ms"] = timeout_ms
            answer, elapsed = await ask(request)
            if answer.get("id") != i:
                raise ConnectionError(f"answer for id {answer.get('id')!r} while waiting for {i}")
            answers.append((answer, elapsed))
    except (ConnectionError, BrokenPipeError, ValueError) as exc:
        on_error(exc)
        answers += [(SERVE_FAILED, 0.0)] * (len(queries) - len(answers))
    return answers
