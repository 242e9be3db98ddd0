"""Bounded work under a hostile Total Recall tree (issue 17), through `memory-router serve`.

1. One huge memory file (default 200 MB of list items): the first and a warm Total Recall query,
   and the daemon's peak RSS (VmHWM). With the default ``max_file_bytes`` (4 MiB) the file is
   skipped; ``--no-cap`` raises the cap to 1 TiB to see what parsing it costs.
2. Total Recall stuck: ``cpu_count + 4`` Total Recall queries time out (300 ms) parsing a file
   under the cap raised for it, then Lossless queries: their latency while Total Recall is stuck.

    python bench/hostile_memory.py [--quick] [--mb 200] [--no-cap]
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from _common import REPO, environment_line, fmt, median, parser, repeats, table

sys.path.insert(0, str(REPO))  # the tests' Lossless builders, tests/support/lcm_fixtures.py

LINE = b"- [10:30] decided to move the payments queue to Redis streams, see OrderService notes\n"


class Serve:
    def __init__(self, state: Path, config: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memory_router", "serve", "--no-reload", "--concurrency", "64"]
            + ["--state-dir", str(state), "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )

    def ask(self, *requests: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
        """Send all, return (ms until answered, response) in completion order."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        started = time.perf_counter()
        self.proc.stdin.write(b"".join(orjson.dumps(r) + b"\n" for r in requests))
        out = []
        for _ in requests:
            ready, _, _ = select.select([self.proc.stdout], [], [], 900)
            if not ready:
                raise SystemExit("serve did not answer within 900 s")
            out.append(((time.perf_counter() - started) * 1000, orjson.loads(self.proc.stdout.readline())))
        return out

    def peak_mb(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
        return 0

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def setup(base: Path, big_bytes: int, cap: int | None) -> tuple[Path, Path]:
    from tests.support.lcm_fixtures import build_small_db

    root = base / "project"
    (root / "memory" / "archive").mkdir(parents=True)
    (root / "CLAUDE.local.md").write_text("- decided: the payments queue moves to Redis streams\n")
    with (root / "memory" / "archive" / "big.md").open("wb") as f:
        f.write(LINE * max(1, big_bytes // len(LINE)))
    tr: dict[str, Any] = {"type": "totalrecall", "root": str(root)}
    if cap is not None:
        tr["max_file_bytes"] = cap
    state = base / "state"
    state.mkdir()
    (state / "backends.json").write_bytes(b'{"backends": ["tr", "lcm"]}')
    config = base / "router-config.json"
    config.write_bytes(
        orjson.dumps(
            {
                "timeout_ms": 600_000,
                "rules": [
                    {"number": 1, "id": "recall", "strong": [r"^recall\b"], "chain": [{"backend": "tr"}]},
                    {"number": 7, "id": "default", "chain": [{"backend": "lcm"}]},
                ],
                "backends": {"tr": tr, "lcm": {"type": "lossless", "db_path": str(build_small_db(base / "lcm.db"))}},
            }
        )
    )
    return state, config


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=None, help="size of the huge file in MB (default 200; --quick: 2)")
    p.add_argument("--no-cap", action="store_true", help="raise max_file_bytes to 1 TiB: parse the huge file")
    args = p.parse_args()
    mb = args.mb or (2 if args.quick else 200)
    no_cap = args.no_cap
    print(f"hostile memory: {environment_line()}")
    with tempfile.TemporaryDirectory(prefix="mr-hostile-") as tmp:
        state, config = setup(Path(tmp) / "one", mb * 1_000_000, (1 << 40) if no_cap else None)
        serve = Serve(state, config)
        try:
            rows = []
            for label in ("first query", "warm query"):
                [(ms, response)] = serve.ask({"id": label, "query": "recall payments queue"})
                rows.append([label, fmt(ms), response["status"], serve.peak_mb()])
        finally:
            serve.close()
        cap = "none (1 TiB)" if no_cap else "default (4 MiB)"
        table(f"Total Recall over a {mb} MB memory file, cap {cap}", ["query", "ms", "status", "peak RSS MB"], rows)

        stuck = (os.cpu_count() or 2) + 4
        state, config = setup(Path(tmp) / "two", 2_000_000 if args.quick else 9_400_000, 1 << 30)
        serve = Serve(state, config)
        try:
            serve.ask({"id": "warm", "query": "payments queue"})
            lossless: list[float] = []
            for _ in range(repeats(args, 3)):
                tr = [{"id": f"tr{i}", "query": "recall payments queue", "timeout_ms": 300} for i in range(stuck)]
                serve.ask(*tr)
                answers = serve.ask(*({"id": f"l{i}", "query": "payments queue"} for i in range(4)))
                lossless += [r["attempts"][0]["duration_ms"] for _, r in answers if r["attempts"]]
        finally:
            serve.close()
        table(
            f"Lossless while {stuck} Total Recall calls are stuck (timed out at 300 ms, parsing)",
            ["queries", "median ms", "max ms"],
            [[len(lossless), fmt(median(lossless)), fmt(max(lossless))]],
            "Lossless's own call time (attempts[0].duration_ms); before issue 17: QUERY_TIMEOUT at the timeout.",
        )


if __name__ == "__main__":
    main()
