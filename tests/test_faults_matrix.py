"""The fault matrix: 8 faults x {primary, fallback position}, through the real CLI.

Each cell runs ``memory-router query`` as a subprocess over a router-config.json whose default
rule chains two command backends, both the real fault program (tests/faultbackend.py):

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

import pytest

from faults_support import command_backend, log_lines, report, run_cli, wait_no_leftovers, write_setup
from memory_router.envelope import Envelope

TIMEOUT_MS = 800
SLOW_MS = 250
HANG_SLACK_MS = 100
RSS_MARGIN_KB = 32 * 1024  # the 8 MiB cap, a copy of it, and noise; 50 MB buffered would blow it
QUERY = "what did we decide about the cache"
SPEC_FIELDS = list(Envelope.model_fields)


@dataclass(frozen=True)
class Fault:
    name: str
    description: str
    log_kind: str | None  # FALLBACK / TIMEOUT / None (accepted, nothing logged)
    error_code: str | None
    message: str | None  # a fragment of the attempt's error_message


FAULTS = (
    Fault("crash", "process crash (exit 3, no output)", "FALLBACK", "BACKEND_ERROR", "exited with code 3 and printed nothing"),
    Fault("hang", "hang (never returns, ignores SIGTERM, has a grandchild)", "TIMEOUT", "QUERY_TIMEOUT", f"no answer within {TIMEOUT_MS} ms"),
    Fault("garbage", "garbage on stdout (HTML)", "FALLBACK", "BACKEND_ERROR", "printed output that is not JSON"),
    Fault("wrong_shape", "valid JSON, wrong shape", "FALLBACK", "BACKEND_ERROR", "printed JSON of the wrong shape"),
    Fault("huge", "50 MB on stdout", "FALLBACK", "BACKEND_ERROR", "printed more than 8388608 bytes"),
    Fault("error", "an error contract", "FALLBACK", "BACKEND_ERROR", "index is locked by another writer"),
    Fault("missing", "missing executable", "FALLBACK", "BACKEND_UNAVAILABLE", "No such file or directory"),
    Fault("slow", f"slow ({SLOW_MS} ms) but under the {TIMEOUT_MS} ms timeout", None, None, None),
)
POSITIONS = ("primary", "fallback")

LINE = re.compile(
    r'^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] (?:'
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


def cell_setup(tmp_path: Path, fault: Fault, position: str) -> tuple[Path, Path, Path, list[str]]:
    piddir = tmp_path / "pids"
    piddir.mkdir()
    backends = {
        "good": command_backend("ok", piddir=piddir),
        "weak": command_backend("weak", piddir=piddir),
        "faulty": fault_spec(fault, piddir),
    }
    chain = ["faulty", "good"] if position == "primary" else ["weak", "faulty"]
    state, config = write_setup(tmp_path, {n: backends[n] for n in chain}, chain, timeout_ms=TIMEOUT_MS)
    return state, config, piddir, chain


@pytest.fixture(scope="module")
def healthy_rss_kb(tmp_path_factory) -> int:
    """Peak RSS of the CLI answering a healthy query: the baseline the fault cells are held to."""
    fault = next(f for f in FAULTS if f.name == "slow")
    tmp = tmp_path_factory.mktemp("baseline")
    state, config, _, _ = cell_setup(tmp, fault, "primary")
    runs = [run_cli(["query", QUERY, "--state-dir", str(state), "--config", str(config)]) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs)
    return max(r.maxrss_kb for r in runs)


def expected_outcome(fault: Fault, position: str) -> dict[str, Any]:
    if fault.log_kind is None:  # slow: answered by the faulty backend itself
        return {"status": "success", "routed_to": "faulty", "fallbacks_used": 0 if position == "primary" else 1, "exit": 0}
    if position == "primary":
        return {"status": "success", "routed_to": "good", "fallbacks_used": 1, "exit": 0}
    return {"status": "partial", "routed_to": "weak", "fallbacks_used": 2, "exit": 0}


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_fault_matrix_cli(tmp_path: Path, fault: Fault, position: str, healthy_rss_kb: int) -> None:
    state, config, piddir, chain = cell_setup(tmp_path, fault, position)
    run = run_cli(["query", QUERY, "--state-dir", str(state), "--config", str(config)])
    want = expected_outcome(fault, position)

    # A valid envelope, the spec's fields first and in order.
    assert run.returncode == want["exit"], run.stderr
    data = run.envelope
    Envelope.model_validate(data)
    assert list(data)[: len(SPEC_FIELDS)] == SPEC_FIELDS
    assert data["fallback_chain"] == chain
    assert (data["status"], data["routed_to"], data["fallbacks_used"]) == (want["status"], want["routed_to"], want["fallbacks_used"])
    assert data["router_duration_ms"] >= data["backend_duration_ms"]
    faulty = data["attempts"][chain.index("faulty")]
    assert faulty["backend"] == "faulty" and faulty["error_code"] == fault.error_code
    if fault.message:
        assert fault.message in faulty["error_message"]

    # Exactly the right router.log line.
    lines = log_lines(state)
    next_backend = "good" if position == "primary" else "none"
    if fault.log_kind is None:
        assert lines == []
    else:
        assert len(lines) == 1, lines
        m = LINE.match(lines[0])
        assert m, lines[0]
        if fault.log_kind == "TIMEOUT":
            assert (m["tq"], m["tb"], m["tnext"]) == (QUERY, "faulty", next_backend)
            assert int(m["ms"]) == faulty["duration_ms"]
        else:
            assert (m["fq"], m["fb"], m["code"], m["fnext"]) == (QUERY, "faulty", fault.error_code, next_backend)
            assert fault.message in m["msg"]

    # A hang is abandoned at timeout_ms + at most 100 ms.
    if fault.name == "hang":
        assert TIMEOUT_MS <= faulty["duration_ms"] <= TIMEOUT_MS + HANG_SLACK_MS, faulty
    if fault.name == "slow":
        assert SLOW_MS <= faulty["duration_ms"] < TIMEOUT_MS

    # Bounded memory and no survivors.
    assert run.maxrss_kb <= healthy_rss_kb + RSS_MARGIN_KB, (run.maxrss_kb, healthy_rss_kb)
    leftovers = wait_no_leftovers(piddir)
    assert leftovers == []
    if fault.name not in ("missing",):
        assert list(piddir.glob("*.pids")), "the fault program should have recorded its process group"

    report(
        "matrix", f"{fault.name}/{position}/cli",
        fault=fault.description, position=position, transport="CLI",
        status=data["status"], routed_to=data["routed_to"], fallbacks_used=data["fallbacks_used"],
        exit=run.returncode,
        log=(lines[0].split("] ", 1)[1].split(" ", 1)[0] if lines else "none")
        + (f" {faulty['error_code']}" if fault.log_kind == "FALLBACK" else ""),
        faulty_ms=faulty["duration_ms"],
        peak_rss_mb=f"{run.maxrss_kb / 1024:.0f} (healthy {healthy_rss_kb / 1024:.0f})",
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
    Envelope.model_validate(data)
    assert (data["status"], data["error_code"], data["fallbacks_used"], data["routed_to"]) == ("error", "ALL_BACKENDS_FAILED", 2, None)
    assert f"Check {state / 'router.log'} for details" in data["error_message"]
    kinds = [LINE.match(line) for line in log_lines(state)]
    assert [(m["fb"], m["fnext"]) if m["fb"] else (m["tb"], m["tnext"]) for m in kinds] == [("a", "b"), ("b", "none")]
    assert "all backends" in run.stderr.decode().lower() or "All backends" in run.stderr.decode()
    assert wait_no_leftovers(piddir) == []
    report("matrix", "all/both/cli", fault="crash then hang (every backend fails)", position="both", transport="CLI",
           status=data["status"], routed_to=None, fallbacks_used=data["fallbacks_used"], exit=run.returncode,
           log="FALLBACK + TIMEOUT", faulty_ms=data["attempts"][1]["duration_ms"], peak_rss_mb=f"{run.maxrss_kb / 1024:.0f}",
           leftovers=0, message=data["error_code"])
