"""Total Recall over its real on-disk layout: entries, scoring, superseded claims, caching."""

from __future__ import annotations

import asyncio
from datetime import date, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest, BackendResponse
from memory_router.backends.totalrecall.adapter import (
    Settings,
    TotalRecallBackend,
    create,
    iter_entries,
    resolve_root,
)
from memory_router.backends.totalrecall.parse import parse_file, query_terms

from ..support.budget import examples

TODAY = date.today()


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    write(tmp_path, "CLAUDE.local.md", "# Focus\n- Shipping the billing export this week.\n")
    write(
        tmp_path,
        "memory/registers/decisions.md",
        (
            "# Decisions\n\n"
            "## [superseded: 2026-01-10] Queue\n- **claim**: We use RabbitMQ for the job queue.\n"
            "- **confidence**: medium\n\n"
            "## [current] Queue\n- **claim**: We use Redis streams for the job queue.\n- **confidence**: high\n"
            "- **last_verified**: 2026-02-01\n"
        ),
    )
    write(
        tmp_path,
        f"memory/daily/{TODAY.isoformat()}.md",
        "[09:15] Fixed the flaky login test.\n[17:30] Paired on the job queue retry logic.\n",
    )
    write(
        tmp_path,
        f"memory/daily/{(TODAY - timedelta(days=60)).isoformat()}.md",
        "[10:00] Fixed the flaky login test in CI.\n",
    )
    write(tmp_path, "memory/archive/old.md", "- The billing export used CSV in 2024.\n")
    write(tmp_path, "memory/registers/_index.md", "- job queue index entry that must be ignored\n")
    return tmp_path


def search(backend: TotalRecallBackend, query: str, limit: int = 10) -> BackendResponse:
    return asyncio.run(backend.search(BackendRequest(query=query, limit=limit)))


def test_entries_follow_the_layout(memory):
    entries = iter_entries(memory)
    tiers = {e.tier for e in entries}
    assert tiers == {"working", "registers", "daily", "archive"}
    assert not any(e.path.endswith("_index.md") for e in entries)
    claims = [e for e in entries if "claim" in e.text]
    assert len(claims) == 2  # one entry per claim block, not per line
    assert [c.superseded for c in claims] == [True, False]
    daily = [e for e in entries if e.tier == "daily" and "retry" in e.text]
    stamp = daily[0].timestamp
    assert stamp is not None and stamp.hour == 17 and stamp.minute == 30


def test_current_claim_outranks_superseded_one(memory):
    response = search(TotalRecallBackend("totalrecall", memory), "job queue")
    texts = [r.content for r in response.results]
    current = next(i for i, t in enumerate(texts) if "Redis streams" in t)
    old = next(i for i, t in enumerate(texts) if "RabbitMQ" in t)
    assert current < old
    assert response.results[old].extra["superseded"] is True


def test_recent_daily_entry_outranks_old_identical_one(memory):
    response = search(TotalRecallBackend("totalrecall", memory), "flaky login test")
    assert response.status == "success"
    first, second = response.results[:2]
    assert first.timestamp is not None
    assert first.timestamp.startswith(TODAY.isoformat()) and first.relevance > second.relevance


def test_full_match_is_strong_and_half_match_is_about_the_threshold(memory):
    backend = TotalRecallBackend("totalrecall", memory)
    assert search(backend, "billing export").normalized_relevance >= 0.8
    partial = search(backend, "billing pipeline kubernetes")  # 1 of 3 terms, the others unknown
    assert 0 < partial.normalized_relevance < 0.4


def test_no_match_is_empty(memory):
    response = search(TotalRecallBackend("totalrecall", memory), "kubernetes helm chart")
    assert (response.status, response.result_count, response.normalized_relevance) == ("empty", 0, 0.0)


def test_query_of_only_stopwords_returns_recent_entries_as_weak(memory):
    response = search(TotalRecallBackend("totalrecall", memory), "what was the last thing", limit=2)
    assert response.status == "success" and response.normalized_relevance < 0.4
    assert all((r.timestamp or "").startswith(TODAY.isoformat()) for r in response.results)


def test_results_carry_path_line_and_timestamp(memory):
    (hit, *_) = search(TotalRecallBackend("totalrecall", memory), "Redis streams").results
    assert hit.source == "totalrecall" and hit.extra["path"] == "memory/registers/decisions.md"
    assert hit.extra["line"] == 8 and hit.timestamp == "2026-02-01T00:00:00Z"


def test_identifier_parts_match(tmp_path):
    write(tmp_path, "CLAUDE.local.md", "- `parseAuthToken` verifies the JWT.\n")
    backend = TotalRecallBackend("totalrecall", tmp_path)
    assert search(backend, "parseAuthToken").normalized_relevance > 0.9
    assert search(backend, "auth token").normalized_relevance > 0.9


def test_cache_rereads_only_changed_files(memory):
    backend = TotalRecallBackend("totalrecall", memory)
    assert search(backend, "kubernetes").status == "empty"
    path = write(memory, "memory/archive/new.md", "- Moved the cluster to kubernetes.\n")
    assert search(backend, "kubernetes").status == "success"
    path.unlink()
    assert search(backend, "kubernetes").status == "empty"


def test_missing_root_is_unavailable_with_the_fix(tmp_path):
    response = search(TotalRecallBackend("totalrecall", tmp_path / "nope"), "x")
    assert response.error_message is not None
    assert response.error_code == "BACKEND_UNAVAILABLE" and "OPENCLAW_REPO_ROOT" in response.error_message


def test_root_resolution_order(tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    sub = tmp_path / "repo" / "src"
    sub.mkdir()
    ctx = BackendContext(state_dir=tmp_path, environ={}, cwd=sub)
    assert resolve_root(Settings(), ctx) == tmp_path / "repo"
    ctx_env = BackendContext(state_dir=tmp_path, environ={"OPENCLAW_REPO_ROOT": "/env/root"}, cwd=sub)
    assert resolve_root(Settings(), ctx_env) == Path("/env/root")
    assert resolve_root(Settings(root="/cfg/root"), ctx_env) == Path("/cfg/root")
    no_workspace = {"HOME": str(tmp_path)}
    assert (
        create("tr", Settings(), BackendContext(state_dir=tmp_path, environ=no_workspace, cwd=Path("/"))).root is None
    )


def test_query_terms_drop_stopwords_and_meta_words():
    assert query_terms("what did we decide about the database schema in the morning session") == [
        "decid",
        "databas",
        "schema",
        "session",
    ]
    assert query_terms("recently") == []


@settings(max_examples=examples(150), deadline=None)
@given(st.text(max_size=400))
def test_any_markdown_parses_and_any_query_scores_in_range(text):
    entries = parse_file("daily", "memory/daily/2026-01-01.md", text, 0.0)
    assert all(e.text.strip() for e in entries)
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        write(Path(root), "CLAUDE.local.md", text)
        response = search(TotalRecallBackend("t", Path(root)), text[:50] or "x")
        assert response.status in ("success", "empty")
        assert all(0 <= r.relevance <= 1 for r in response.results)


def test_no_term_query_prefers_written_dates_over_file_mtimes(tmp_path):
    # An undated archive file touched just now must not pass for the latest memory.
    write(tmp_path, f"memory/daily/{(TODAY - timedelta(days=1)).isoformat()}.md", "[08:00] Rotated the signing keys.\n")
    write(tmp_path, "memory/archive/notes.md", "- An old note with no date at all.\n")
    response = search(TotalRecallBackend("totalrecall", tmp_path), "why did we do it that way", limit=1)
    assert [r.content for r in response.results] == ["[08:00] Rotated the signing keys."]


# --------------------------------------------------------------------------- OpenClaw's layout


def openclaw_workspace(root: Path) -> Path:
    """A workspace as OpenClaw keeps it (~/.openclaw/workspace): its bootstrap files, which
    memory-core does not index, MEMORY.md, daily notes memory/YYYY-MM-DD.md (one bullet per fact,
    as the LoCoMo ingest writes them), a session-memory hook note memory/YYYY-MM-DD-<slug>.md and
    a topic note. No CLAUDE.local.md, no memory/registers."""
    for name, text in {
        "AGENTS.md": "# AGENTS.md\n- Read SOUL.md and USER.md first; the deployment pipeline runs from here.\n",
        "SOUL.md": "# SOUL.md\n- Be concise.\n",
        "USER.md": "# USER.md\n- Name: Caroline\n",
        "TOOLS.md": "# TOOLS.md\n- camera names, ssh hosts\n",
        "HEARTBEAT.md": "# HEARTBEAT.md\n",
    }.items():
        write(root, name, text)
    write(root, "MEMORY.md", "# Long-term memory\n\n- Caroline prefers the staging cluster for demos.\n")
    write(
        root,
        f"memory/{(TODAY - timedelta(days=2)).isoformat()}.md",
        "# Session 3\n\n- Melanie went to a Matt Patterson concert with her kids. [D3:4]\n"
        "- Caroline is researching adoption agencies. [D3:9]\n",
    )
    write(root, f"memory/{TODAY.isoformat()}-release-plan.md", "- Agreed to cut the release on Friday.\n")
    write(root, "memory/people/melanie.md", "# Melanie\n- Plays the violin in a community orchestra.\n")
    return root


def test_openclaw_workspace_alone_is_a_valid_memory_root(tmp_path):
    root = openclaw_workspace(tmp_path)
    backend = TotalRecallBackend("totalrecall", root)
    probe = backend.probe()
    assert probe.ok and probe.facts["files"] == 4 and "OpenClaw" in probe.detail
    assert probe.facts["tiers"] == {"daily": 2, "longterm": 1, "notes": 1}
    concert = search(backend, "Matt Patterson concert")
    hit = concert.results[0]
    assert concert.normalized_relevance >= 0.4 and "[D3:4]" in hit.content
    assert hit.extra["tier"] == "daily" and hit.extra["path"].startswith("memory/")
    # a daily note is dated by its file name, whatever its mtime
    assert hit.timestamp == f"{(TODAY - timedelta(days=2)).isoformat()}T00:00:00Z"
    assert search(backend, "staging cluster demos").results[0].extra["tier"] == "longterm"
    assert search(backend, "violin orchestra").results[0].extra["tier"] == "notes"
    slug = search(backend, "release Friday").results[0]
    assert slug.timestamp is not None
    assert slug.extra["tier"] == "daily" and slug.timestamp.startswith(TODAY.isoformat())
    # OpenClaw's bootstrap files are not memory (memory-core does not index them either)
    assert search(backend, "deployment pipeline").status == "empty"
    assert not any(e.path in ("AGENTS.md", "USER.md") for e in iter_entries(root))


def test_long_term_memory_outranks_the_same_fact_in_an_old_daily_note(tmp_path):
    write(tmp_path, "MEMORY.md", "- We deploy with blue green switching.\n")
    write(tmp_path, f"memory/{(TODAY - timedelta(days=90)).isoformat()}.md", "- We deploy with blue green switching.\n")
    first, second = search(TotalRecallBackend("totalrecall", tmp_path), "blue green deploy").results
    assert (first.extra["tier"], second.extra["tier"]) == ("longterm", "daily")
    assert first.relevance > second.relevance


def test_a_note_linked_into_memory_daily_is_read_once(tmp_path):
    # How the LoCoMo ingest exposes OpenClaw's daily notes to Total Recall: memory/daily/ symlinks.
    root = openclaw_workspace(tmp_path)
    note = f"{(TODAY - timedelta(days=2)).isoformat()}.md"
    (root / "memory" / "daily").mkdir()
    (root / "memory" / "daily" / note).symlink_to(Path("..") / note)
    response = search(TotalRecallBackend("totalrecall", root), "adoption agencies")
    assert [r.extra["path"] for r in response.results] == [f"memory/{note}"]
    assert TotalRecallBackend("totalrecall", root).probe().facts["files"] == 4


def test_a_root_without_memory_files_says_so_instead_of_empty(tmp_path):
    write(tmp_path, "AGENTS.md", "- not memory\n")
    backend = TotalRecallBackend("totalrecall", tmp_path)
    response = search(backend, "anything at all")
    assert (response.status, response.error_code) == ("error", "BACKEND_UNAVAILABLE")
    assert response.error_message is not None
    assert response.error_message.startswith(f"no memory files under {tmp_path}: ")
    message = response.error_message or ""
    assert "MEMORY.md" in message and "backends.totalrecall.root" in message
    probe = backend.probe()
    assert not probe.ok and probe.detail.startswith(f"no memory files under {tmp_path}: ")
    # the first memory written makes it answer
    write(tmp_path, "MEMORY.md", "- The first fact.\n")
    assert search(backend, "first fact").status == "success"
    # an empty memory file is memory that holds nothing: empty, not an error
    write(tmp_path, "MEMORY.md", "")
    assert search(backend, "first fact").status == "empty"


@pytest.mark.slow
def test_query_attempt_and_backends_command_agree_on_a_root_without_memory(tmp_path):
    import subprocess

    import orjson

    from ..conftest import cli, write_json

    workspace = tmp_path / "workspace"
    write(workspace, "AGENTS.md", "- bootstrap only\n")
    config = orjson.loads((Path(__file__).parents[2] / "router-config.json").read_bytes())
    config["backends"]["totalrecall"]["root"] = str(workspace)
    write_json(tmp_path / "cfg.json", config)
    write_json(tmp_path / "backends.json", {"backends": ["totalrecall"]})
    args = ["--state-dir", str(tmp_path), "--config", str(tmp_path / "cfg.json")]
    query = subprocess.run(cli("query", "what did Melanie paint", *args), capture_output=True, timeout=60)
    envelope = orjson.loads(query.stdout)
    assert query.returncode == 1 and envelope["status"] == "error"
    (attempt,) = [a for a in envelope["attempts"] if a["backend"] == "totalrecall"]
    assert attempt["error_code"] == "BACKEND_UNAVAILABLE"
    assert attempt["error_message"].startswith(f"no memory files under {workspace}: ")
    listed = subprocess.run(cli("backends", "--json", *args), capture_output=True, timeout=60)
    row = next(r for r in orjson.loads(listed.stdout)["backends"] if r["backend"] == "totalrecall")
    assert row["runs_here"] is False and row["detail"].startswith(f"no memory files under {workspace}: ")


def test_a_big_index_is_rebuilt_in_the_background_and_the_old_one_answers_meanwhile(tmp_path, monkeypatch):
    """Rebuilding the inverted index of a big memory (a 4 MiB daily note: ~500k entries, seconds)
    must not time out the query that notices a change: the previous index answers, the note names
    the changed file, and a later query searches the rebuilt index (issue 30, item 13)."""
    import threading

    from memory_router.backends.totalrecall import index

    monkeypatch.setattr(index, "BIG_INDEX_ENTRIES", 3)  # "big": more than 3 entries
    write(tmp_path, "MEMORY.md", "- auth tokens rotate every 30 days\n- the deploy runs on Fridays\n")
    write(tmp_path, "memory/2026-11-30.md", "- [09:00] standup moved to ten\n- [10:00] lunch\n")
    backend = TotalRecallBackend("tr", tmp_path)

    def ask(query: str) -> BackendResponse:
        return asyncio.run(backend.search(BackendRequest(query, timeout_s=1.0)))

    assert [r.content for r in ask("auth tokens").results] == ["- auth tokens rotate every 30 days"]
    release = threading.Event()
    built = index._built
    monkeypatch.setattr(index, "_built", lambda files, stop=None: (release.wait(10), built(files, stop))[1])
    write(tmp_path, "MEMORY.md", "- auth tokens are revoked on logout\n- the deploy runs on Fridays\n")
    backend.invalidate()
    meanwhile = ask("auth tokens")  # the rebuild waits for `release`: half the budget, then this answer
    assert meanwhile.status == "success" and "rotate every 30 days" in meanwhile.results[0].content
    assert meanwhile.note and "MEMORY.md (parsed; the index is being rebuilt)" in meanwhile.note
    assert "a later query includes it" not in meanwhile.note  # one-shot: says what indexes it instead
    release.set()
    for _ in range(100):
        after = ask("auth tokens")
        if not after.note:
            break
    assert [r.content for r in after.results] == ["- auth tokens are revoked on logout"] and not after.note
