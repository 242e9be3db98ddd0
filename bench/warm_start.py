"""The first semantic query of a fresh ``memory-router serve``: with and without the start-up warm-up.

On a qmd index of ``--notes`` notes embedded with the all-MiniLM-L6-v2 GGUF that
``.ci/setup.d/30-qmd-models.sh`` builds, a new ``serve`` (stdin/stdout) is started for each repeat
and asked, as its very first query, the concept question of rule 4 (``qmd vsearch``):

* before - ``engine_warmup: false`` (the behaviour before the warm-up): the query starts qmd's
  engine and loads the embedding model itself;
* after  - ``engine_warmup: true`` (shipped): the query is sent once ``stats`` reports the
  warm-up ``ready`` (an agent's first question a few seconds after the daemon started);
* after, at once - the query is sent as soon as the daemon is up, while the warm-up still runs:
  it waits for the load already under way, never for a second one (no worse than before).

A keyword query (rule 1, ``qmd search``) sent at once to a warming daemon shows that keyword
answers do not wait for the warm-up. Figures: the qmd attempt's ``duration_ms`` and the
wall-clock answer time, medians over ``--repeat`` fresh daemons, and the warm-up's own time.
Without qmd or the model file it says so and exits 0.

    python bench/warm_start.py [--quick] [--repeat 5] [--notes 60]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import REPO, environment_line, fmt, median, parser, repeats, scratch_dir, table
from _qmd_index import ENV, MODEL, embedded_index

from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.locate import QmdNotFound

CONCEPT = "how does error handling work in the API layer"  # rule 4: qmd vsearch
KEYWORD = "find the function mapErrorToStatus"  # rule 1: qmd search
TOPICS = [
    "API error handling: handlers raise typed errors, the middleware maps them to HTTP status codes",
    "gardening: water the tomatoes, prune the roses in March, plant garlic in October",
    "Raft consensus: leader election with randomized timeouts, followers replicate the log",
    "deployment: tag the release, build the image, run migrations, roll out to staging",
]


def build(notes: int) -> tuple[Path, dict[str, Any]]:
    """A qmd index of the notes, embedded with the MiniLM GGUF, and the qmd settings for it."""
    base = scratch_dir("mr-bench-warm-start-")
    texts = (f"# Note {i}\n\n{TOPICS[i % len(TOPICS)]}. Entry {i}; see mapErrorToStatus.\n" for i in range(notes))
    return base, embedded_index(base, texts)


def state_dir(base: Path, settings: dict[str, Any], warmup: bool) -> Path:
    state = base / ("state-warm" if warmup else "state-cold")
    state.mkdir(exist_ok=True)
    config = json.loads((REPO / "router-config.json").read_text())
    config["calibration"] = "off"  # the engine's start is measured here: native scores keep rule 4 on vsearch
    config["backends"]["qmd"] = {"type": "qmd", **settings, "engine_warmup": warmup}
    (state / "router-config.json").write_text(json.dumps(config))
    (state / "backends.json").write_text(json.dumps({"backends": {"qmd": {"status": "ready"}}}))
    return state


class Serve:
    def __init__(self, state: Path) -> None:
        argv = [sys.executable, "-m", "memory_router", "serve", "--state-dir", str(state)]
        argv += ["--config", str(state / "router-config.json")]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV
        )
        self.ids = 0

    def ask(self, payload: dict[str, Any]) -> tuple[dict[str, Any], float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.ids += 1
        started = time.perf_counter()
        self.proc.stdin.write(json.dumps({"id": self.ids, **payload}).encode() + b"\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        return answer, (time.perf_counter() - started) * 1000

    def warmup(self) -> dict[str, Any]:
        runtime = self.ask({"op": "stats"})[0]["stats"].get("runtime") or {}
        return (runtime.get("qmd") or {}).get("warmup") or {}

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def qmd_ms(answer: dict[str, Any]) -> float:
    return next((a["duration_ms"] for a in answer.get("attempts", []) if a["backend"] == "qmd"), float("nan"))


def first_query(
    state: Path, *, wait_ready: bool, query: str = CONCEPT, then_warmup: bool = True
) -> tuple[float, float, float]:
    """(qmd attempt ms, answer ms, warm-up s) of a fresh daemon's first query; ``then_warmup``:
    after a query sent at once, wait for the warm-up to end to report its time."""
    serve = Serve(state)
    try:
        serve.ask({"op": "stats"})  # the daemon is up (its ready line); nothing asked of qmd yet
        warm: dict[str, Any] = {}
        if wait_ready:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and warm.get("state") not in ("ready", "failed", "skipped"):
                time.sleep(0.2)
                warm = serve.warmup()
            if warm.get("state") != "ready":
                raise SystemExit(f"the warm-up did not get ready: {warm}")
        answer, wall = serve.ask({"query": query, "timeout_ms": 60000})
        if answer.get("status") != "success" and query == CONCEPT:
            raise SystemExit(f"the concept query failed: {answer.get('error_message') or answer.get('attempts')}")
        if not wait_ready and then_warmup:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and warm.get("state") in (None, "warming"):
                time.sleep(0.2)
                warm = serve.warmup()
        return qmd_ms(answer), wall, float(warm.get("seconds") or "nan")
    finally:
        serve.close()


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--notes", type=int, default=None, help="notes in the index (default 60; --quick 8)")
    args = p.parse_args()
    if not MODEL.is_file():
        print(f"warm_start: {MODEL} is absent (bash .ci/setup.d/30-qmd-models.sh); nothing to measure")
        return
    try:
        qmd_adapter.resolve_command(None, None, ENV)
    except QmdNotFound as exc:
        print(f"warm_start: qmd is not installed ({exc}); nothing to measure")
        return
    n = repeats(args, 5)
    base, settings = build(args.notes or (8 if args.quick else 60))
    cold, warm = state_dir(base, settings, False), state_dir(base, settings, True)
    rows = []
    variants = [("after: warm-up ready", warm, True)]  # --quick: one daemon (CI smoke)
    if not args.quick:
        variants = [("before: no warm-up", cold, False), *variants, ("after: sent at once (warming)", warm, False)]
    for name, state, wait in variants:
        runs = [first_query(state, wait_ready=wait) for _ in range(n)]
        rows.append([name, fmt(median(r[0] for r in runs), 0), fmt(median(r[1] for r in runs), 0)])
        warmups = [r[2] for r in runs if r[2] == r[2]]
        rows[-1].append(fmt(median(warmups), 2) if warmups else "-")
    if not args.quick:
        keyword = [first_query(warm, wait_ready=False, query=KEYWORD, then_warmup=False) for _ in range(n)]
        rows.append(["keyword query sent at once (warming)", fmt(median(r[0] for r in keyword), 0)])
        rows[-1] += [fmt(median(r[1] for r in keyword), 0), "-"]
    table(
        f"First query of a fresh `serve`, medians of {n} daemons",
        ["first query", "qmd attempt ms", "answer ms", "warm-up s"],
        rows,
        note=environment_line(),
    )


if __name__ == "__main__":
    main()
