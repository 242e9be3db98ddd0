#!/usr/bin/env python3
"""A memory backend that misbehaves on request: the fault-injection program of the test suite.

It speaks the OpenClaw stack's backend contract exactly like a skill's ``wrapper.sh``::

    faultbackend.py --fault FAULT --adapter "<query>" [--hint MODE] [--delay-ms N] [--relevance R]

and is plugged into the router as a ``"type": "command"`` backend, so every fault travels the
real path: argv template -> process group -> capped stdout -> contract validation -> router.

Faults: ``ok`` (one result, relevance R, default 0.9), ``weak`` (relevance 0.2), ``empty``,
``crash`` (stderr traceback, exit 3, no stdout), ``hang`` (starts a grandchild, then never
returns, ignoring SIGTERM), ``garbage`` (HTML on stdout), ``wrong_shape`` (valid JSON, not the
contract), ``huge`` (50 MB on stdout), ``error`` (a well-formed ``error`` contract), ``slow``
(answers ``ok`` after --delay-ms), ``many`` (``--count`` results, default 30, whatever the
limit), ``echo`` (returns its argv and stdin as results, to prove what it was given).

With ``FAULT_PIDDIR`` set it records ``<pid> <pgid>`` (and any grandchild pid) in a file there,
so a test can check afterwards that no process of its group survived. Standard library only and
meant to run with ``python -I -S`` so it starts in a few milliseconds.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

HUGE_BYTES = 50 * 1024 * 1024


def contract(query: str, results: list[dict[str, Any]], status: str | None = None, **extra: object) -> dict[str, Any]:
    return {
        "query_echo": query,
        "results": results,
        "result_count": len(results),
        "status": status or ("success" if results else "empty"),
        "error_message": None,
        "error_code": None,
        "backend_duration_ms": 1,
        "normalized_relevance": max((r["relevance"] for r in results), default=0.0),
        "backend": "faultbackend",
        **extra,
    }


def record(piddir: str | None, *pids: int) -> None:
    if not piddir:
        return
    path = os.path.join(piddir, f"{os.getpid()}.pids")
    # Write aside, then rename: a reader polling the folder never sees a half-written record.
    with open(path + ".tmp", "w") as fh:
        fh.write(" ".join(str(p) for p in (os.getpid(), os.getpgid(0), *pids)) + "\n")
    os.replace(path + ".tmp", path)


def main(argv: list[str]) -> int:  # noqa: C901 - a scripted fake: one branch per fault it can play
    args: dict[str, str] = {}
    rest = list(argv)
    # FAULT_MODE set: stand in for another program (a fake `qmd` for the qmd adapter's fault
    # tests) whose arguments are not ours to parse.
    impersonating = os.environ.get("FAULT_MODE")
    while rest and not impersonating:
        flag = rest.pop(0)
        if flag.startswith("--") and rest:
            args[flag[2:]] = rest.pop(0)
        else:
            print(f"faultbackend: unexpected argument {flag!r}", file=sys.stderr)
            return 64
    fault = impersonating or args.get("fault", "ok")
    query = args.get("adapter", "")
    delay = int(args.get("delay-ms", "0")) / 1000
    relevance = float(args.get("relevance", "0.9"))
    piddir = os.environ.get("FAULT_PIDDIR")
    out = sys.stdout

    if fault == "hang":
        # A grandchild too, so the test proves the whole process group is killed, not just us.
        import subprocess

        child = subprocess.Popen(["sleep", "300"])
        record(piddir, child.pid)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(3600)
    record(piddir)
    if delay:
        time.sleep(delay)
    if fault in ("ok", "slow"):
        result = {
            "content": f"answer to {query}",
            "relevance": relevance,
            "source": "faultbackend",
            "timestamp": "2026-03-17T14:30:00Z",
            "path": "memory/fault.md",
            "line": 1,
        }
        json.dump(contract(query, [result]), out)
    elif fault == "weak":
        json.dump(
            contract(
                query,
                [{"content": f"weak hit for {query}", "relevance": 0.2, "source": "faultbackend", "timestamp": None}],
            ),
            out,
        )
    elif fault == "empty":
        json.dump(contract(query, []), out)
    elif fault == "many":
        # --count results (default 30) whatever {limit} asked for, the best one last.
        count = int(args.get("count", "30"))
        hits = [
            {"content": f"hit {i} for {query}", "relevance": round(0.5 + 0.4 * i / count, 4), "source": "faultbackend"}
            for i in range(1, count + 1)
        ]
        json.dump(contract(query, hits), out)
    elif fault == "crash":
        print(
            'Traceback (most recent call last):\n  File "search.py", line 12, in <module>\n'
            "RuntimeError: index file is corrupt",
            file=sys.stderr,
        )
        return 3
    elif fault == "garbage":
        out.write("<html><body>502 Bad Gateway</body></html>\n")
    elif fault == "wrong_shape":
        json.dump({"hits": [{"text": query, "score": "high"}], "status": "ok"}, out)
    elif fault == "huge":
        chunk = b"x" * (64 * 1024)
        written = 0
        try:
            sys.stdout.buffer.write(b'{"results": [{"content": "')
            while written < HUGE_BYTES:
                sys.stdout.buffer.write(chunk)
                written += len(chunk)
            sys.stdout.buffer.write(b'", "relevance": 0.9}], "status": "success"}')
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            return 1
    elif fault == "error":
        json.dump(
            contract(
                query, [], status="error", error_code="BACKEND_ERROR", error_message="index is locked by another writer"
            ),
            out,
        )
    elif fault == "echo":
        # Everything it was given, as results tagged by source (all at relevance 0.9).
        given = [("argv", a) for a in sys.argv[1:]]
        given.append(("stdin", sys.stdin.read()))
        given.append(("cwd", os.getcwd()))
        given += [("env", f"{k}={v}") for k, v in sorted(os.environ.items()) if k.startswith("ECHO_")]
        json.dump(contract(query, [{"content": c, "relevance": 0.9, "source": s} for s, c in given]), out)
    else:
        print(f"faultbackend: unknown fault {fault!r}", file=sys.stderr)
        return 64
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
