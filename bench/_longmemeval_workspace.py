"""One LongMemEval question's chat history laid out the way an OpenClaw agent holds it (for
``bench/longmemeval.py``).

Under ``<work>/<question_id>/`` (the folder name is the bench's own; nothing under ``workspace/``
or ``state/`` names the question or a session):

* ``state/lcm.db`` - every turn of every session as a message in lossless-claw's real schema,
  written by the project's own writer (:mod:`memory_router.backends.lossless.schema`, as
  ``_locomo_workspace`` does for LoCoMo). One conversation per session, all under the session key
  ``agent:main:main``: a ``/new`` archives the previous one (``active = 0``, ``archive_cause
  'manual-reset'``, lossless-claw's cause for a reset), so exactly one is active, as the schema's
  partial unique index wants. Role and content are the turn's own; ``created_at`` is the session's
  start (``haystack_dates``, read as UTC) plus one minute per turn. No summaries: lossless-claw
  writes them with an LLM, which the bench has not got.
* ``workspace/memory/YYYY-MM-DD-HHMM.md`` - each session as OpenClaw's bundled ``session-memory``
  hook saves it when the user types ``/new`` after it (openclaw 2026.9.6, the version
  ``.ci/setup.d/50-openclaw.sh`` installs). Reproduced from the installed
  ``.tools/openclaw/node_modules/openclaw/dist/``:

  - ``bundled/session-memory/handler.js`` (``saveSessionMemoryNow``): the file name
    ``<date>-<HHMM>.md`` from the event's time in the user's time zone (here UTC; ``llmSlug`` is
    off by default, so no LLM slug), ``-2``, ``-3``... when that name is taken
    (``resolveAvailableMemoryFilename``); the text ``# Session: <date> <HH:MM:SS> <tz>``, a blank
    line, ``- **Session Key**: agent:main:main``, ``- **Session ID**: <uuid>``, ``- **Source**:
    webchat``, a blank line, ``## Conversation Summary``, a blank line, the transcript, a blank
    line (the parts joined by newlines).
  - ``capture-E5hs6gBi.mjs`` (``captureSessionMemoryTranscript``,
    ``getRecentSessionProjectionFromEvents``, ``renderSessionMemoryMessage``): only the LAST 15
    user/assistant messages (the ``messages`` default), each text sanitised
    (``sanitizeSessionMemoryTranscriptText``: model special tokens replaced by
    ``[REMOVED_SPECIAL_TOKEN]`` as ``external-content-CLufk6dK.mjs`` does, tool-call and role
    directive blocks dropped, a trailing ``NO_REPLY`` dropped, trimmed), a message that is then
    empty or starts with ``/`` left out, and each written as ONE line ``<role>: <JSON string>``
    (``quoteSessionMemoryText``: ``JSON.stringify``, so newlines are ``\\n``, with U+0085, U+2028
    and U+2029 escaped too).

  The ``/new`` comes one minute after the session's last turn. The session id is a UUID made from
  a hash of the question and the session's position: never LongMemEval's session id (the evidence
  sessions' ids start ``answer_``, README's leakage trap), and nothing of ``has_answer``.
* ``bm25.db`` - the plain baseline: an SQLite FTS5 table ``turns(content, dia_id)`` of the same
  turns, the layout ``bench/locomo.py``'s ``ask_bm25`` reads.
* ``manifest.json`` - message_id -> turn label and each note's lines, for labelling results.

Turns are labelled by position, ``s<session>:t<turn>`` (0-based, in ``haystack_sessions``
order). qmd is not installed in this scenario (no index is built).

Everything is rebuilt only when its inputs change: the manifest records a key made of the
question's history checksum and this module's source.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import re
import shutil
import sqlite3
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from memory_router.backends.lossless.schema import LcmWriter, create_lcm_db, sqlite_time
from memory_router.core.frozen import Frozen

SESSION_KEY = "agent:main:main"
SOURCE = "webchat"
TIMEZONE = "UTC"
HOOK_MESSAGES = 15
SUBSET_SALT = "longmemeval-bench-subset-v1:"
NOTE_MIN_SHARED = 200
"""A note result that shows at least this many characters of a turn's line (cut off inside it)
holds that turn."""

_WHEN = re.compile(r"^(\d{4})/(\d{2})/(\d{2}) \(\w+\) (\d{2}):(\d{2})$")

# --- the hook's sanitising (capture-E5hs6gBi.mjs, external-content-CLufk6dK.mjs), verbatim regexes
_SPECIAL_TOKENS = (
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>",
    "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|python_tag|>", "<|eom_id|>",
    "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>", "<s>", "</s>", "<|channel|>", "<|message|>",
    "<|return|>", "<|call|>", "<start_of_turn>", "<end_of_turn>",
)  # fmt: skip
_SPECIAL = re.compile("|".join([*map(re.escape, _SPECIAL_TOKENS), r"<\|reserved_special_token_\d+\|>"]))
_PREFIX = r"(?:(?:\|DSML\|)|(?:\uFF5CDSML\uFF5C))?"
_KIND = r"(?:tool_calls?|function_calls?|tool_use_error)"
_DROP_BLOCK = re.compile(rf"<{_PREFIX}{_KIND}\b[^>]*>[\s\S]*?(?:</{_PREFIX}{_KIND}>|\Z)", re.IGNORECASE)
_ROLE_BLOCK = re.compile(r"<(system|assistant|user)\b[^>]*>[\s\S]*?</\1>", re.IGNORECASE)
_ROLE_TAG = re.compile(r"</?(?:system|assistant|user)\b[^>]*>", re.IGNORECASE)
_TRAILING_NO_REPLY = re.compile(r"(?:^|\n)\s*NO_REPLY\s*\Z", re.IGNORECASE)
_NO_REPLY = re.compile(r'^NO_REPLY$|^\{\s*"action"\s*:\s*"NO_REPLY"\s*\}$', re.IGNORECASE)
_LINE_SEPARATORS = re.compile("[\u0085\u2028\u2029]")
_JS_WHITESPACE = " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"  # noqa: E501


class Turn(Frozen):
    label: str
    """``s<session>:t<turn>``, by position."""
    role: str
    content: str


class Session(Frozen):
    position: int
    when: datetime
    turns: tuple[Turn, ...]


class Question(Frozen):
    qid: str
    category: str
    """LongMemEval's question_type."""
    question: str
    answer: str
    evidence: tuple[str, ...]
    """The labels of the turns marked has_answer (turn-level gold)."""
    evidence_sessions: tuple[int, ...]
    """The positions of the sessions named in answer_session_ids (session-level gold)."""
    sessions: tuple[Session, ...]
    checksum: str


class Workspace(Frozen):
    conv: str
    root: Path
    """The agent's workspace (what Total Recall reads): ``memory/`` is in it."""
    memory: Path
    lcm_db: Path
    bm25_db: Path
    qmd: dict[str, Any]
    """Empty: qmd is not installed in this scenario."""
    message_dia: dict[int, str]
    note_lines: dict[str, dict[int, tuple[str, ...]]]
    """note file name -> 1-based line -> the turn labels written on it (one per transcript line)."""
    note_session: dict[str, int]
    """note file name -> the position of the session it saves."""
    reused: bool


# --------------------------------------------------------------------------- reading


def parse_when(text: str) -> datetime:
    """``"2023/05/30 (Tue) 23:40"`` -> an aware UTC datetime (LongMemEval gives no zone)."""
    m = _WHEN.match(text.strip())
    if not m:
        raise ValueError(f"unreadable date {text!r}; expected e.g. '2023/05/30 (Tue) 23:40'")
    year, month, day, hour, minute = map(int, m.groups())
    return datetime(year, month, day, hour, minute, tzinfo=timezone.utc)


def read_question(data: dict[str, Any]) -> Question:
    """One line of questions.jsonl -> a Question. Session ids are read only to map the
    session-level gold to positions; they go nowhere else."""
    ids = list(data["haystack_session_ids"])
    position = {sid: i for i, sid in enumerate(ids)}
    sessions, evidence = [], []
    for i, (raw, when) in enumerate(zip(data["haystack_sessions"], data["haystack_dates"], strict=True)):
        turns = []
        for j, t in enumerate(raw):
            label = f"s{i}:t{j}"
            turns.append(Turn(label, str(t["role"]), str(t["content"])))
            if t.get("has_answer"):
                evidence.append(label)
        sessions.append(Session(i, parse_when(when), tuple(turns)))
    history = json.dumps([data["haystack_sessions"], data["haystack_dates"]], sort_keys=True).encode()
    return Question(
        qid=str(data["question_id"]),
        category=str(data["question_type"]),
        question=str(data["question"]),
        answer=str(data.get("answer", "")),
        evidence=tuple(evidence),
        evidence_sessions=tuple(sorted(position[s] for s in data.get("answer_session_ids", []) if s in position)),
        sessions=tuple(sessions),
        checksum=hashlib.sha256(history).hexdigest(),
    )


def load_questions(path: Path) -> Iterator[Question]:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield read_question(json.loads(line))


def subset_order(qid: str) -> str:
    return hashlib.sha256((SUBSET_SALT + qid).encode()).hexdigest()


def stratified(questions: Sequence[Question], size: int) -> list[Question]:
    """``size`` questions, each question_type in proportion to its share (largest remainder, ties
    by type name), within a type the first by ``sha256(SUBSET_SALT + question_id)``; returned in
    that order, type by type (types sorted by name)."""
    if size >= len(questions):
        return sorted(questions, key=lambda q: (q.category, subset_order(q.qid)))
    counts = Counter(q.category for q in questions)
    exact = {c: size * n / len(questions) for c, n in counts.items()}
    quota = {c: int(v) for c, v in exact.items()}
    for c in sorted(counts, key=lambda c: (-(exact[c] - quota[c]), c))[: size - sum(quota.values())]:
        quota[c] += 1
    out: list[Question] = []
    for c in sorted(counts):
        out += sorted((q for q in questions if q.category == c), key=lambda q: subset_order(q.qid))[: quota[c]]
    return out


# --------------------------------------------------------------------------- the session-memory hook


def js_trim(text: str) -> str:
    return text.strip(_JS_WHITESPACE)


def sanitize_transcript_text(text: str) -> str | None:
    """The hook's ``sanitizeSessionMemoryTranscriptText``: None when nothing is left."""
    if _NO_REPLY.match(js_trim(text)):
        return None
    text = _SPECIAL.sub("[REMOVED_SPECIAL_TOKEN]", text)
    for pattern in (_DROP_BLOCK, _ROLE_BLOCK, _ROLE_TAG, _TRAILING_NO_REPLY):
        text = pattern.sub("", text)
    return js_trim(text) or None


def quote(text: str) -> str:
    """``JSON.stringify`` (Python's json.dumps escapes the same characters when ensure_ascii is
    off), then the hook's escape of the JSON line separators."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _LINE_SEPARATORS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", quoted)


def transcript_lines(turns: Sequence[Turn], count: int = HOOK_MESSAGES) -> list[tuple[str, str]]:
    """(turn label, line) for the messages the hook keeps: the last ``count`` rendered ones."""
    rendered = []
    for turn in turns:
        if turn.role not in ("user", "assistant"):
            continue
        text = sanitize_transcript_text(turn.content) if turn.content else None
        if not text or text.startswith("/"):
            continue
        rendered.append((turn.label, f"{turn.role}: {quote(text)}"))
    return rendered[-count:] if count > 0 else []


def session_uuid(qid: str, position: int) -> str:
    digest = hashlib.sha256(f"longmemeval-bench-session:{qid}:{position}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def note_text(when: datetime, session_id: str, lines: Sequence[str]) -> str:
    parts = [
        f"# Session: {when.strftime('%Y-%m-%d')} {when.strftime('%H:%M:%S')} {TIMEZONE}",
        "",
        f"- **Session Key**: {SESSION_KEY}",
        f"- **Session ID**: {session_id}",
        f"- **Source**: {SOURCE}",
        "",
    ]
    if lines:
        parts += ["## Conversation Summary", "", "\n".join(lines), ""]
    return "\n".join(parts)


def available_name(taken: set[str], when: datetime) -> str:
    base = f"{when.strftime('%Y-%m-%d')}-{when.strftime('%H%M')}"
    suffix = 1
    while (name := f"{base}.md" if suffix == 1 else f"{base}-{suffix}.md") in taken:
        suffix += 1
    return name


def chronological(q: Question) -> list[Session]:
    """The order the agent lived the sessions in: by start, then by position."""
    return sorted(q.sessions, key=lambda s: (s.when, s.position))


def ended(session: Session) -> datetime:
    """When the user typed ``/new``: a minute after the session's last turn."""
    return session.when + timedelta(minutes=len(session.turns))


# --------------------------------------------------------------------------- building


def build(q: Question, work: Path, log: Any = print) -> Workspace:
    """The workspace of ``q`` under ``work/<question_id>``, reused when its key is unchanged."""
    base = work / q.qid
    key = hashlib.sha256(f"{q.checksum}\n{hashlib.sha256(Path(__file__).read_bytes()).hexdigest()}".encode())
    manifest_path = base / "manifest.json"
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError:
            manifest = {}
        if manifest.get("key") == key.hexdigest():
            return from_manifest(q.qid, base, manifest, reused=True)
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    log(f"ingesting {q.qid} ({len(q.sessions)} sessions) into {base}")
    message_dia = write_lcm(q, base / "state" / "lcm.db")
    note_lines, note_session = write_notes(q, base / "workspace" / "memory")
    write_bm25(q, base / "bm25.db")
    manifest = {
        "key": key.hexdigest(),
        "message_dia": {str(k): v for k, v in message_dia.items()},
        "note_lines": {name: {str(n): list(ids) for n, ids in lines.items()} for name, lines in note_lines.items()},
        "note_session": note_session,
    }
    # Written last: a build that failed half-way has no manifest and is redone next time.
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    return from_manifest(q.qid, base, manifest, reused=False)


def from_manifest(qid: str, base: Path, manifest: dict[str, Any], *, reused: bool) -> Workspace:
    return Workspace(
        conv=qid,
        root=base / "workspace",
        memory=base / "workspace" / "memory",
        lcm_db=base / "state" / "lcm.db",
        bm25_db=base / "bm25.db",
        qmd={},
        message_dia={int(k): v for k, v in manifest["message_dia"].items()},
        note_lines={
            name: {int(n): tuple(ids) for n, ids in lines.items()} for name, lines in manifest["note_lines"].items()
        },
        note_session={name: int(p) for name, p in manifest["note_session"].items()},
        reused=reused,
    )


def write_lcm(q: Question, path: Path) -> dict[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = create_lcm_db(path, "current")
    message_dia: dict[int, str] = {}
    try:
        writer = LcmWriter(conn)
        conn.execute("BEGIN")
        previous: int | None = None
        for session in chronological(q):
            if previous is not None and "archive_cause" in writer.conv_cols:
                # The /new that ended the previous session archived its conversation.
                conn.execute(
                    "UPDATE conversations SET active = 0, archived_at = ?, archive_cause = 'manual-reset' "
                    "WHERE conversation_id = ?",
                    (sqlite_time(session.when), previous),
                )
            previous = writer.conversation(
                session_uuid(q.qid, session.position), session_key=SESSION_KEY, created=session.when
            )
            for k, turn in enumerate(session.turns):
                mid = writer.message(previous, turn.role, turn.content, at=session.when + timedelta(minutes=k))
                message_dia[mid] = turn.label
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return message_dia


def write_notes(q: Question, memory: Path) -> tuple[dict[str, dict[int, tuple[str, ...]]], dict[str, int]]:
    memory.mkdir(parents=True, exist_ok=True)
    note_lines: dict[str, dict[int, tuple[str, ...]]] = defaultdict(dict)
    note_session: dict[str, int] = {}
    for session in chronological(q):
        at = ended(session)
        name = available_name(set(note_session), at)
        lines = transcript_lines(session.turns)
        text = note_text(at, session_uuid(q.qid, session.position), [line for _, line in lines])
        (memory / name).write_text(text, encoding="utf-8")
        note_session[name] = session.position
        written = text.split("\n")
        first = written.index("## Conversation Summary") + 3 if lines else 0  # 1-based, after a blank line
        for n, (label, line) in enumerate(lines):
            assert written[first + n - 1] == line, "a transcript line is one note line"
            note_lines[name][first + n] = (label,)
    return dict(note_lines), note_session


def write_bm25(q: Question, path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE VIRTUAL TABLE turns USING fts5(content, dia_id UNINDEXED, tokenize='porter unicode61')")
        conn.executemany(
            "INSERT INTO turns (content, dia_id) VALUES (?, ?)",
            [(t.content, t.label) for s in q.sessions for t in s.turns],
        )
        conn.commit()
    finally:
        conn.close()


# --------------------------------------------------------------------------- labelling


def note_labels(ws: Workspace, name: str, content: str) -> list[str]:
    """The turns a memory-note result shows: a transcript line of that note that the content
    holds whole, or of which it holds at least NOTE_MIN_SHARED characters where the content is cut
    off inside the line (its last line a prefix of it, or its first line a suffix of it)."""
    lines = ws.note_lines.get(name)
    if not lines or not content:
        return []
    note = read_note(str(ws.memory / name))
    shown = [t.strip() for t in content.splitlines() if t.strip()]
    whole = set(shown)
    out: list[str] = []
    for n, ids in sorted(lines.items()):
        if n > len(note):
            continue
        line = note[n - 1].strip()
        cut = (
            line in whole
            or (len(shown[-1]) >= NOTE_MIN_SHARED and line.startswith(shown[-1]))
            or (len(shown[0]) >= NOTE_MIN_SHARED and line.endswith(shown[0]))
        )
        if cut:
            out += ids
    return out


_NOTES: dict[str, tuple[str, ...]] = {}


def read_note(path: str) -> tuple[str, ...]:
    if path not in _NOTES:
        try:
            _NOTES[path] = tuple(Path(path).read_text(encoding="utf-8").split("\n"))
        except OSError:
            _NOTES[path] = ()
    return _NOTES[path]


def label(result: dict[str, Any], ws: Workspace) -> tuple[list[str], list[int]]:
    """(turn labels, session positions) a result holds. A Lossless message -> its turn (by
    message_id, through the manifest); the BM25 baseline -> its ``dia_id``; a memory note (a
    ``path`` ending ``.md`` whose file name is one of the notes) -> the turns :func:`note_labels`
    finds, and the note's session whatever it shows."""
    ids: list[str] = []
    mid = result.get("message_id")
    if isinstance(mid, int) and mid in ws.message_dia:
        ids.append(ws.message_dia[mid])
    if isinstance(result.get("dia_id"), str):
        ids.append(result["dia_id"])
    sessions = [session_of(i) for i in ids]
    path = result.get("path")
    if isinstance(path, str) and path.endswith(".md"):
        name = PurePosixPath(path).name
        if name in ws.note_session:
            raw = result.get("content")
            ids += note_labels(ws, name, raw if isinstance(raw, str) else "")
            sessions.append(ws.note_session[name])
    return list(dict.fromkeys(ids)), list(dict.fromkeys(sessions))


def session_of(turn_label: str) -> int:
    return int(turn_label.split(":")[0][1:])


def labelled_results(results: Sequence[dict[str, Any]], ws: Workspace, evidence: Iterable[str]) -> list[dict[str, Any]]:
    """Envelope results -> the records' results: rank, relevance, source, content, dia_ids (turn
    labels), hit, sessions, then every other key the result carried."""
    wanted = set(evidence)
    out = []
    for rank, r in enumerate(results, 1):
        ids, sessions = label(r, ws)
        first = {
            "rank": rank,
            "relevance": r.get("relevance"),
            "source": r.get("source"),
            "content": r.get("content"),
            "dia_ids": ids,
            "hit": bool(wanted.intersection(ids)),
            "sessions": sessions,
        }
        out.append({**first, **{k: v for k, v in r.items() if k not in first}})
    return out
