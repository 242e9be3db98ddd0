"""Soak: the socket daemon under a mixed load for minutes; its memory, fds and threads stay flat.

One ``memory-router serve --socket`` with command backends running tests/support/faultbackend.py. First
the oversized-output check (issue #12 item 6, socket transport): N calls in a row whose backend
hits the 8 MiB output cap; the daemon's peak RSS (VmHWM) after the first and after the last.
Then ``--clients`` threads, for ``--seconds``, each opening a connection per action:

* good queries (answered by an instant backend), a backend that crashes, one that hangs (killed
  at ``timeout_ms``, fallback answers), one that prints 50 MB (capped, fallback answers);
* bad lines: not JSON, a JSON number, a line over ``--max-line-bytes``;
* clients that hang up: a hanging query sent and the connection closed without reading.

Every request must be answered exactly once (its id echoed; after the client half-closes, no
byte more). A sampler reads the daemon's RSS, open fds, threads and child processes every
``--every`` seconds; the table compares the first and last tenth of the run.

    python bench/soak.py [--quick] [--seconds 180] [--clients 6]
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from _common import REPO, environment_line, fmt, median, parser, percentile, scratch_dir, table

FAULT = REPO / "tests" / "support" / "faultbackend.py"
TIMEOUT_MS = 300
MAX_LINE = 4096


def backend(fault: str) -> dict[str, Any]:
    argv = [sys.executable, "-I", "-S", str(FAULT), "--fault", fault, "--adapter", "{query}"]
    return {"type": "command", "argv": argv}


def rule(number: int, word: str, chain: list[str]) -> dict[str, Any]:
    return {"number": number, "id": word, "strong": [rf"\b{word}\b"], "chain": [{"backend": b} for b in chain]}


def setup(root: Path) -> tuple[Path, Path]:
    state = root / "state"
    state.mkdir(mode=0o700)
    names = {"good": "ok", "crash": "crash", "hang": "hang", "huge": "huge"}
    (state / "backends.json").write_text(json.dumps({"backends": {n: {"status": "ready"} for n in names}}))
    config = {
        "timeout_ms": TIMEOUT_MS,
        "cooldown": None,  # every hang and crash is paid, every time
        "rules": [
            rule(1, "soakcrash", ["crash", "good"]),
            rule(2, "soakhang", ["hang", "good"]),
            rule(3, "soakhuge", ["huge", "good"]),
            {"number": 7, "id": "default", "chain": [{"backend": "good"}]},
        ],
        "backends": {n: backend(f) for n, f in names.items()},
    }
    path = root / "router-config.json"
    path.write_text(json.dumps(config))
    return state, path


class Daemon:
    def __init__(self, state: Path, config: Path) -> None:
        self.socket = state / "router.sock"
        self.log = open(state / "daemon.log", "wb")  # noqa: SIM115 - closed in stop()
        argv = [sys.executable, "-m", "memory_router", "serve", "--socket", "--no-reload"]
        argv += ["--max-line-bytes", str(MAX_LINE), "--state-dir", str(state), "--config", str(config)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 30
        while not self.socket.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the daemon did not start; see {state / 'daemon.log'}")
            time.sleep(0.05)

    def sample(self) -> dict[str, float]:
        pid = self.proc.pid
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
        )
        children = 0
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                    children += 1
        return {
            "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
            "hwm_mb": int(status["VmHWM"].split()[0]) / 1024,
            "threads": int(status["Threads"]),
            "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "children": children,
        }

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(30)
        self.log.close()
        return code


def exchange(
    path: Path, lines: list[bytes], *, hang_up: bool = False, timeout: float = 30
) -> list[dict[str, Any]] | None:
    """Send ``lines`` on a new connection, read one response per line, half-close and check that
    nothing more comes. ``hang_up``: close right after sending (returns None)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(b"".join(line + b"\n" for line in lines))
        if hang_up:
            return None
        buf = b""
        while buf.count(b"\n") < len(lines):
            chunk = sock.recv(1 << 16)
            if not chunk:
                got = buf.count(b"\n")
                raise AssertionError(f"connection closed after {got} of {len(lines)} answers")
            buf += chunk
        sock.shutdown(socket.SHUT_WR)
        rest = buf.split(b"\n", len(lines))[-1]
        while chunk := sock.recv(1 << 16):
            rest += chunk
        if rest:
            raise AssertionError(f"extra bytes after the answers: {rest[:200]!r}")
        return [json.loads(line) for line in buf.split(b"\n")[: len(lines)]]


KINDS = [  # (kind, weight)
    ("good query", 40),
    ("crashing backend", 10),
    ("hanging backend", 10),
    ("50 MB output", 8),
    ("not JSON", 8),
    ("JSON number", 6),
    ("oversized line", 6),
    ("client hangs up", 12),
]
EXPECT = {
    "good query": ("success", None),
    "crashing backend": ("success", None),
    "hanging backend": ("success", None),
    "50 MB output": ("success", None),
    "not JSON": ("error", "INVALID_JSON"),
    "JSON number": ("error", "INVALID_REQUEST"),
    "oversized line": ("error", "REQUEST_TOO_LARGE"),
}


def request_line(kind: str, rid: int) -> bytes:
    query = {
        "good query": "deploy notes",
        "crashing backend": "soakcrash deploy",
        "hanging backend": "soakhang deploy",
        "50 MB output": "soakhuge deploy",
        "client hangs up": "soakhang bye",
    }.get(kind)
    if query is not None:
        request = {"id": rid, "query": query}
        if kind == "50 MB output":
            request["timeout_ms"] = 5000  # the cap, not the timeout, must end it (even under load)
        return json.dumps(request).encode()
    if kind == "not JSON":
        return b'{"id": ' + str(rid).encode() + b", not json"
    if kind == "JSON number":
        return str(rid).encode()
    return json.dumps({"id": rid, "query": "x" * (MAX_LINE * 2)}).encode()


def oversized_phase(daemon: Daemon, calls: int) -> None:
    peaks = []
    for i in range(calls):
        line = json.dumps({"id": i, "query": "soakhuge deploy", "timeout_ms": 5000}).encode()
        (answer,) = exchange(daemon.socket, [line]) or []
        message = answer["attempts"][0].get("error_message") or ""
        if answer["status"] != "success" or "more than" not in message:
            raise SystemExit(f"oversized call {i}: unexpected answer {json.dumps(answer)[:300]}")
        peaks.append(daemon.sample()["hwm_mb"])
    table(
        f"Oversized backend output over the socket ({calls} calls in a row, each capped at 8 MiB)",
        ["daemon peak RSS (VmHWM)", "MB"],
        [["after 1 call", fmt(peaks[0])], [f"after {calls} calls", fmt(peaks[-1])]],
    )


class Load:
    """The mixed load: worker threads and a sampler until ``stop_at``."""

    def __init__(self, daemon: Daemon, stop_at: float, every: float) -> None:
        self.daemon, self.stop_at, self.every = daemon, stop_at, every
        self.samples: list[dict[str, float]] = []
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.unexpected: dict[str, int] = defaultdict(int)  # answered once, another status (load)
        self.failures: list[str] = []  # not answered exactly once
        self.lock = threading.Lock()
        self.ids = iter(range(10**6, 10**9))

    def sampler(self) -> None:
        while time.monotonic() < self.stop_at:
            self.samples.append(self.daemon.sample())
            time.sleep(self.every)

    def worker(self, seed: int) -> None:
        rng = random.Random(seed)
        kinds, weights = zip(*KINDS, strict=True)
        while time.monotonic() < self.stop_at:
            kind = rng.choices(kinds, weights)[0]
            with self.lock:
                rid = next(self.ids)
            t0 = time.perf_counter()
            try:
                answers = exchange(self.daemon.socket, [request_line(kind, rid)], hang_up=kind == "client hangs up")
            except Exception as exc:  # noqa: BLE001 - every failure is reported
                with self.lock:
                    self.failures.append(f"{kind}: {exc}")
                continue
            ms = (time.perf_counter() - t0) * 1000
            with self.lock:
                self.latency[kind].append(ms)
                if answers is not None:
                    self.check(kind, rid, answers[0])

    def check(self, kind: str, rid: int, answer: dict[str, Any]) -> None:
        if kind not in ("not JSON", "JSON number") and answer.get("id") != rid:
            self.failures.append(f"{kind}: answered with id {answer.get('id')!r}, not {rid}")
        elif (answer.get("status"), answer.get("error_code")) != EXPECT[kind]:
            self.unexpected[kind] += 1

    def run(self, clients: int) -> None:
        threads = [threading.Thread(target=self.sampler)]
        threads += [threading.Thread(target=self.worker, args=(seed,)) for seed in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def report(load: Load, final: dict[str, float], code: int, seconds: float, clients: int, every: float) -> None:
    rows = []
    for kind, _ in KINDS:
        ms = load.latency.get(kind, [])
        answered = "-" if kind == "client hangs up" else f"{len(ms)} once each"
        other = "-" if kind == "client hangs up" else load.unexpected.get(kind, 0)
        rows.append([kind, len(ms), answered, other, fmt(median(ms)), fmt(percentile(ms, 99))])
    table(
        f"Soak: {seconds:g} s, {clients} clients, one connection per request (timeout_ms {TIMEOUT_MS}, cooldown off)",
        ["request", "sent", "answered", "other status", "median ms", "p99 ms"],
        rows,
        note=f"not answered exactly once: {len(load.failures)}"
        + (f" (first: {load.failures[0]})" if load.failures else "")
        + "; other status: answered once, but e.g. QUERY_TIMEOUT when the machine is overloaded",
    )
    samples = load.samples
    tenth = max(1, len(samples) // 10)
    first, last = samples[:tenth], samples[-tenth:]
    res_rows = []
    for key, label in (("rss_mb", "RSS MB"), ("fds", "open fds"), ("threads", "threads"), ("children", "children")):
        res_rows.append(
            [
                label,
                fmt(median(s[key] for s in first)),
                fmt(median(s[key] for s in last)),
                fmt(max(s[key] for s in samples)),
                fmt(final[key]),
            ]
        )
    table(
        f"Soak: the daemon's resources ({len(samples)} samples, every {every:g} s)",
        ["resource", "first tenth (median)", "last tenth (median)", "max", "after the load"],
        res_rows,
        note=f"daemon exit code after SIGTERM: {code}",
    )


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=None, help="load duration (default 180; --quick 6)")
    p.add_argument("--clients", type=int, default=None, help="concurrent client threads (default 6; --quick 3)")
    p.add_argument("--every", type=float, default=None, help="sampling period in seconds (default 1; --quick 0.25)")
    p.add_argument("--oversized", type=int, default=None, help="oversized calls in a row (default 100; --quick 5)")
    args = p.parse_args()
    seconds = args.seconds or (6.0 if args.quick else 180.0)
    clients = args.clients or (3 if args.quick else 6)
    every = args.every or (0.25 if args.quick else 1.0)
    print(environment_line())

    state, config = setup(scratch_dir("mr-bench-soak-"))
    daemon = Daemon(state, config)
    try:
        oversized_phase(daemon, args.oversized or (5 if args.quick else 100))
        load = Load(daemon, time.monotonic() + seconds, every)
        load.run(clients)
        time.sleep(max(1.0, TIMEOUT_MS / 1000 * 2))  # let hung-up clients' requests be cancelled
        final = daemon.sample()
    finally:
        code = daemon.stop()
    report(load, final, code, seconds, clients, every)
    if load.failures or code != 0:
        sys.exit(1)


if __name__ == "__main__":
    main()
