"""The fault matrix: 8 faults x {primary, fallback position}, through the real CLI and daemon.

Each cell runs ``memory-router query`` as a subprocess, and again sends the query to a fresh
``memory-router serve`` (JSON lines on stdin), over a router-config.json whose default rule
chains two command backends, both the real fault program (tests/support/faultbackend.py):

* primary:  [FAULT, good]  good answers at relevance 0.9 -> the router must still succeed;
* fallback: [weak, FAULT]  weak answers at 0.2 (below the threshold), so the router reaches the
  faulty backend last and must return the weak results as ``partial``.

``slow`` (answers after 250 ms, under the 800 ms timeout) is the control: it must be accepted.
For every cell: a valid envelope with the spec's fields in order, status, routed_to and
fallbacks_used, exactly the expected router.log line, the router's peak RSS within a fixed margin
of a healthy query's (stdout is capped at 8 MiB, so 50 MB of output is never buffered), no
process of the backend's group left alive, and a hang abandoned within timeout_ms + 100 ms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from memory_router.core.envelope import FIELD_NAMES, Envelope

from ..support.faults import (
    command_backend,
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    log_lines,
    report,
    run_cli,
    run_daemon,
    wait_no_leftovers,
    write_setup,
)

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

TIMEOUT_MS = 800
SLOW_MS = 250
HANG_SLACK_MS = 100
# The storm starts 16 backend programs at once on a 2-core machine: the event loop can be busy
# spawning when a deadline passes, so its hang bound is looser than a single cell's 100 ms.
STORM_SLACK_MS = 300
RSS_MARGIN_KB = 32 * 1024  # the 8 MiB cap, a copy of it, and noise; 50 MB buffered would blow it
QUERY = "what did we decide about the cache"
SPEC_FIELDS = list(FIELD_NAMES)


@dataclass(frozen=True)
class Fault:
    name: str
    description: str
    log_kind: str | None  # FALLBACK / TIMEOUT / None (accepted, nothing logged)
    error_code: str | None
    message: str | None  # a fragment of the attempt's error_message


FAULTS = (
    Fault(
        "crash",
        "process crash (exit 3, no output)",
        "FALLBACK",
        "BACKEND_ERROR",
        "exited with code 3 and printed nothing",
    ),
    Fault(
        "hang",
        "hang (never returns, ignores SIGTERM, has a grandchild)",
        "TIMEOUT",
        "QUERY_TIMEOUT",
        f"no answer within {TIMEOUT_MS} ms",
    ),
    Fault("garbage", "garbage on stdout (HTML)", "FALLBACK", "BACKEND_ERROR", "printed output that is not JSON"),
    Fault("wrong_shape", "valid JSON, wrong shape", "FALLBACK", "BACKEND_ERROR", "printed JSON of the wrong shape"),
    Fault("huge", "50 MB on stdout", "FALLBACK", "BACKEND_ERROR", "printed more than 8388608 bytes"),
    Fault("error", "an error contract", "FALLBACK", "BACKEND_ERROR", "index is locked by another writer"),
    Fault("missing", "missing executable", "FALLBACK", "BACKEND_UNAVAILABLE", "No such file or directory"),
    Fault("slow", f"slow ({SLOW_MS} ms) but under the {TIMEOUT_MS} ms timeout", None, None, None),
)
POSITIONS = ("primary", "fallback")

LINE = re.compile(
    r"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] (?:"
    r'FALLBACK query="(?P<fq>(?:[^"\\]|\\.)*)" backend=(?P<fb>\S+) error_code=(?P<code>\S+) '
    r'error_message="(?P<msg>(?:[^"\\]|\\.)*)" next=(?P<fnext>\S+)'
    r'|TIMEOUT query="(?P<tq>(?:[^"\\]|\\.)*)" backend=(?P<tb>\S+) duration_ms=(?P<ms>\d+) next=(?P<tnext>\S+))$'
)


def fault_spec(fault: Fault, piddir: Path) -> dict[str, Any]:
    if fault.name == "missing":
        return {"type": "command", "argv": [str(piddir / "no-such-wrapper.sh"), "--adapter", "{query}"]}
    if fault.name == "slow":
        return command_backend("slow", "--delay-ms", str(SLOW_MS), piddir=piddir)
    return command_backend(fault.name, piddir=piddir)


@dataclass(frozen=True)
class Cell:
    fault: Fault
    position: str
    prefix: str  # backend names are prefix + good/weak/faulty (the daemon serves all cells at once)
    piddir: Path
    label: str

    @property
    def marker(self) -> str:
        return f"cell-{self.label}"

    @property
    def query(self) -> str:
        return f"{QUERY} {self.marker}"

    def name(self, role: str) -> str:
        return self.prefix + role

    @property
    def chain(self) -> list[str]:
        roles = ["faulty", "good"] if self.position == "primary" else ["weak", "faulty"]
        return [self.name(r) for r in roles]

    def backends(self) -> dict[str, dict[str, Any]]:
        specs = {
            "good": command_backend("ok", piddir=self.piddir),
            "weak": command_backend("weak", piddir=self.piddir),
            "faulty": fault_spec(self.fault, self.piddir),
        }
        return {self.name(role): specs[role] for role in ("faulty", "good", "weak") if self.name(role) in self.chain}


def make_cell(root: Path, fault: Fault, position: str, prefix: str = "", label: str = "") -> Cell:
    label = label or f"{fault.name}-{position}"
    piddir = root / f"pids-{label}"
    piddir.mkdir(parents=True)
    return Cell(fault, position, prefix, piddir, label)


@dataclass
class Answer:
    envelope: dict[str, Any]
    exit_code: int  # the CLI's exit code; for the daemon, its exit code after EOF
    peak_rss_kb: int
    log: list[str]  # this query's router.log lines
    cell: Cell
    leftovers: list[tuple[int, str]] | None = None  # the daemon's, checked while it still runs


TRANSPORTS = ("cli", "daemon")


def ask_cli(root: Path, cell: Cell) -> Answer:
    state, config = write_setup(root, cell.backends(), cell.chain, timeout_ms=TIMEOUT_MS)
    run = run_cli(["query", cell.query, "--state-dir", str(state), "--config", str(config)])
    return Answer(run.envelope, run.returncode, run.maxrss_kb, log_lines(state), cell)


def daemon_setup(root: Path, **config: Any) -> tuple[Path, Path, list[Cell], Cell]:
    """A state dir and config serving every cell at once: one rule per cell (its marker in the
    query picks its chain), backend names prefixed per cell."""
    cells = [make_cell(root, f, p, prefix=f"{f.name}-{p}-") for f in FAULTS for p in POSITIONS]
    healthy = make_cell(
        root, next(f for f in FAULTS if f.name == "slow"), "primary", prefix="healthy-", label="healthy"
    )
    backends: dict[str, Any] = {}
    rules = []
    for number, cell in enumerate([healthy, *cells], start=1):
        backends.update(cell.backends())
        rules.append(
            {
                "number": number,
                "id": f"r{number}",
                "strong": [re.escape(cell.marker) + r"\b"],
                "chain": [{"backend": b} for b in cell.chain],
            }
        )
    rules.append({"number": len(rules) + 1, "id": "default", "chain": [{"backend": healthy.name("good")}]})
    state, config_path = write_setup(root, backends, [], timeout_ms=TIMEOUT_MS, **config)
    cfg = orjson.loads(config_path.read_bytes())
    cfg["rules"] = rules
    config_path.write_bytes(orjson.dumps(cfg))
    return state, config_path, cells, healthy


@pytest.fixture(scope="module")
def daemon_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Answer]:
    """One long-lived ``memory-router serve`` answers every cell in turn (a rule per cell picks
    its chain), so the daemon must survive all 16 faults; its peak RSS is read after each answer."""
    root = tmp_path_factory.mktemp("daemon")
    state, config, cells, healthy = daemon_setup(root)

    requests = [{"id": i, "query": c.query} for i, c in enumerate([healthy, healthy, *cells])]
    sequence = [healthy, healthy, *cells]
    run = run_daemon(
        ["--state-dir", str(state), "--config", str(config)],
        requests,
        after_each=lambda i: wait_no_leftovers(sequence[i].piddir),
    )
    assert run.exit_code == 0, run.stderr
    lines = log_lines(state)
    answers = {}
    for cell, response, hwm, leftovers in zip(sequence, run.responses, run.peak_rss_kb, run.after_each, strict=False):
        envelope = dict(response)
        envelope.pop("id")
        answers[(cell.fault.name if cell is not healthy else "healthy", cell.position)] = Answer(
            envelope, run.exit_code, hwm, [line for line in lines if f'{cell.marker}"' in line], cell, leftovers
        )
    return answers


@pytest.fixture(scope="module")
def healthy_rss_kb(
    tmp_path_factory: pytest.TempPathFactory, daemon_answers: dict[tuple[str, str], Answer]
) -> dict[str, int]:
    """Peak RSS of each transport after answering a healthy query: the baseline of the cells."""
    slow = next(f for f in FAULTS if f.name == "slow")
    runs = []
    for _ in range(2):
        root = tmp_path_factory.mktemp("baseline")
        runs.append(ask_cli(root, make_cell(root, slow, "primary")))
    assert all(a.envelope["status"] == "success" for a in runs)
    return {"cli": max(a.peak_rss_kb for a in runs), "daemon": daemon_answers[("healthy", "primary")].peak_rss_kb}


def expected_outcome(fault: Fault, position: str) -> dict[str, Any]:
    if fault.log_kind is None:  # slow: answered by the faulty backend itself
        return {
            "status": "success",
            "routed_to": "faulty",
            "fallbacks_used": 0 if position == "primary" else 1,
            "exit": 0,
        }
    if position == "primary":
        return {"status": "success", "routed_to": "good", "fallbacks_used": 1, "exit": 0}
    return {"status": "partial", "routed_to": "weak", "fallbacks_used": 2, "exit": 0}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_fault_matrix(
    tmp_path: Path,
    fault: Fault,
    position: str,
    transport: str,
    healthy_rss_kb: dict[str, int],
    daemon_answers: dict[tuple[str, str], Answer],
) -> None:
    if transport == "cli":
        answer = ask_cli(tmp_path, make_cell(tmp_path, fault, position))
    else:
        answer = daemon_answers[(fault.name, position)]
    cell, chain, faulty_name = answer.cell, answer.cell.chain, answer.cell.name("faulty")
    want = expected_outcome(fault, position)
    want = {**want, "routed_to": cell.name(want["routed_to"])}

    # A valid envelope, the spec's fields first and in order.
    assert answer.exit_code == want["exit"]
    data = answer.envelope
    Envelope.from_dict(data)
    assert list(data)[: len(SPEC_FIELDS)] == SPEC_FIELDS
    assert data["fallback_chain"] == chain
    assert (data["status"], data["routed_to"], data["fallbacks_used"]) == (
        want["status"],
        want["routed_to"],
        want["fallbacks_used"],
    )
    assert data["router_duration_ms"] >= data["backend_duration_ms"]
    faulty = data["attempts"][chain.index(faulty_name)]
    assert faulty["backend"] == faulty_name and faulty["error_code"] == fault.error_code
    if fault.message:
        assert fault.message in faulty["error_message"]

    # Exactly the right router.log line.
    lines = answer.log
    next_backend = cell.name("good") if position == "primary" else "none"
    if fault.log_kind is None:
        assert lines == []
    else:
        assert len(lines) == 1, lines
        m = LINE.match(lines[0])
        assert m, lines[0]
        if fault.log_kind == "TIMEOUT":
            assert (m["tq"], m["tb"], m["tnext"]) == (cell.query, faulty_name, next_backend)
            assert int(m["ms"]) == faulty["duration_ms"]
        else:
            assert (m["fq"], m["fb"], m["code"], m["fnext"]) == (
                cell.query,
                faulty_name,
                fault.error_code,
                next_backend,
            )
            assert fault.message in m["msg"]

    # A hang is abandoned at timeout_ms + at most 100 ms.
    if fault.name == "hang":
        assert TIMEOUT_MS <= faulty["duration_ms"] <= TIMEOUT_MS + HANG_SLACK_MS, faulty
    if fault.name == "slow":
        assert SLOW_MS <= faulty["duration_ms"] < TIMEOUT_MS

    # Bounded memory and no survivors.
    healthy = healthy_rss_kb[transport]
    assert answer.peak_rss_kb <= healthy + RSS_MARGIN_KB, (answer.peak_rss_kb, healthy)
    leftovers = answer.leftovers if answer.leftovers is not None else wait_no_leftovers(cell.piddir)
    assert leftovers == []
    if fault.name not in ("missing",):
        assert list(cell.piddir.glob("*.pids")), "the fault program should have recorded its process group"

    report(
        "matrix",
        f"{fault.name}/{position}/{transport}",
        order=f"{FAULTS.index(fault):02d}{POSITIONS.index(position)}{TRANSPORTS.index(transport)}",
        timeout_ms=TIMEOUT_MS,
        fault=fault.description,
        position=position,
        transport=transport,
        status=data["status"],
        routed_to=data["routed_to"],
        fallbacks_used=data["fallbacks_used"],
        exit=answer.exit_code,
        log=(lines[0].split("] ", 1)[1].split(" ", 1)[0] if lines else "none")
        + (f" {faulty['error_code']}" if fault.log_kind == "FALLBACK" else ""),
        faulty_ms=faulty["duration_ms"],
        peak_rss_mb=f"{answer.peak_rss_kb / 1024:.0f} (healthy {healthy / 1024:.0f})",
        leftovers=len(leftovers),
        message=(faulty["error_message"] or "")[:90],
    )


def test_every_backend_failing_is_an_error_envelope_with_exit_1(tmp_path: Path) -> None:
    piddir = tmp_path / "pids"
    piddir.mkdir()
    backends = {"a": command_backend("crash", piddir=piddir), "b": command_backend("hang", piddir=piddir)}
    state, config = write_setup(tmp_path, backends, ["a", "b"], timeout_ms=TIMEOUT_MS)
    run = run_cli(["query", QUERY, "--state-dir", str(state), "--config", str(config)])
    assert run.returncode == 1
    data = run.envelope
    Envelope.from_dict(data)
    assert (data["status"], data["error_code"], data["fallbacks_used"], data["routed_to"]) == (
        "error",
        "ALL_BACKENDS_FAILED",
        2,
        None,
    )
    assert f"Check {state / 'router.log'} for details" in data["error_message"]
    kinds = [LINE.match(line) for line in log_lines(state)]
    assert all(kinds), log_lines(state)
    assert [(m["fb"], m["fnext"]) if m["fb"] else (m["tb"], m["tnext"]) for m in kinds if m] == [
        ("a", "b"),
        ("b", "none"),
    ]
    assert "all backends" in run.stderr.decode().lower() or "All backends" in run.stderr.decode()
    assert wait_no_leftovers(piddir) == []
    report(
        "matrix",
        "all/both/cli",
        order="99",
        fault="crash then hang (every backend fails)",
        position="both",
        transport="cli",
        status=data["status"],
        routed_to=None,
        fallbacks_used=data["fallbacks_used"],
        exit=run.returncode,
        log="FALLBACK + TIMEOUT",
        faulty_ms=data["attempts"][1]["duration_ms"],
        peak_rss_mb=f"{run.maxrss_kb / 1024:.0f}",
        leftovers=0,
        message=data["error_code"],
    )


def test_daemon_fault_storm(tmp_path: Path) -> None:
    """All 16 cells sent to one daemon at once (concurrency 16): every answer is still right, each
    hang is still cut at the timeout, and no backend process survives."""
    state, config, cells, _ = daemon_setup(tmp_path)
    requests = [{"id": i, "query": c.query} for i, c in enumerate(cells)]
    run = run_daemon(
        ["--state-dir", str(state), "--config", str(config), "--concurrency", "16"], requests, concurrent=True
    )
    assert run.exit_code == 0, run.stderr
    by_id = {r["id"]: r for r in run.responses}
    assert sorted(by_id) == list(range(len(cells)))
    hang_ms = []
    for i, cell in enumerate(cells):
        data = by_id[i]
        want = expected_outcome(cell.fault, cell.position)
        assert (data["status"], data["routed_to"], data["fallbacks_used"]) == (
            want["status"],
            cell.name(want["routed_to"]),
            want["fallbacks_used"],
        ), (cell.label, data["attempts"])
        faulty = data["attempts"][cell.chain.index(cell.name("faulty"))]
        assert faulty["error_code"] == cell.fault.error_code
        if cell.fault.name == "hang":
            hang_ms.append(faulty["duration_ms"])
            assert TIMEOUT_MS <= faulty["duration_ms"] <= TIMEOUT_MS + STORM_SLACK_MS, faulty
    assert sum(1 for line in log_lines(state) if "] FALLBACK " in line or "] TIMEOUT " in line) == 14
    for cell in cells:
        assert wait_no_leftovers(cell.piddir) == []
    report(
        "matrix",
        "storm/both/daemon",
        order="98",
        fault="all 16 cells at once (concurrency 16)",
        position="both",
        transport="daemon",
        status="as in the cells above",
        routed_to="as above",
        fallbacks_used="as above",
        exit=run.exit_code,
        log="14 lines (FALLBACK/TIMEOUT)",
        faulty_ms=f"hangs: {', '.join(map(str, hang_ms))}",
        timeout_ms=TIMEOUT_MS,
        peak_rss_mb=f"{max(run.peak_rss_kb) / 1024:.0f}",
        leftovers=0,
        message="",
    )
