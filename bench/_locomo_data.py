"""Reading LoCoMo conversation files (``locomo10_v2/<id>.json``) for ``bench/locomo.py``.

LoCoMo (Maharana et al., ACL 2024) is licensed CC BY-NC 4.0; the data itself is never copied
into this repository. A file is checked as it is read: anything the benchmark cannot use is
reported with the file, the field and what was done, and skipped; the rest is still used.

Evidence ids are ``D<session>:<turn>``. A few are malformed in the release; :func:`repair_ids`
repairs what has one clear reading and drops the rest:

* ``"D8:6; D9:17"`` (two ids in one string) -> ``D8:6``, ``D9:17``
* ``"D:11:26"`` (stray colon) -> ``D11:26``
* ``"D30:05"`` (leading zero) -> ``D30:5``
* ``"D"``, or an id naming no turn of this conversation (``D10:19`` in a 9-turn session) -> dropped
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from memory_router.core.frozen import Frozen

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""The categories scored for retrieval; 5 (adversarial: no answer in the conversation) is skipped."""

_SESSION_KEY = re.compile(r"^session_(\d+)$")
# Lenient on purpose: one or more ids with stray colons, spaces and leading zeros.
_ID_PIECE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_CANONICAL = re.compile(r"^D[1-9]\d*:[1-9]\d*$")
_WHEN = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.IGNORECASE)


class LocomoFileError(ValueError):
    """The file cannot be used at all (not JSON, no sessions, no qa list)."""


class Turn(Frozen):
    dia_id: str
    speaker: str
    text: str
    caption: str | None

    def content(self) -> str:
        """What the agent's transcript holds for this turn: who said it, the text, and the caption
        of a shared image (the model saw a description, not pixels)."""
        image = f" [image: {self.caption}]" if self.caption else ""
        return f"{self.speaker}: {self.text}{image}"


class Session(Frozen):
    number: int
    when: datetime
    turns: tuple[Turn, ...]
    observations: tuple[tuple[str, tuple[str, ...]], ...]
    """(fact, its dia_ids) in the order LoCoMo lists them."""


class Question(Frozen):
    qid: str
    category: int
    question: str
    answer: str
    evidence: tuple[str, ...]


class Asked(Protocol):
    """What the runner and the scorer read of a question: LoCoMo's :class:`Question`, and
    LongMemEval's (bench/_longmemeval_workspace.py), whose category is a name."""

    @property
    def qid(self) -> str: ...
    @property
    def category(self) -> int | str: ...
    @property
    def question(self) -> str: ...
    @property
    def evidence(self) -> tuple[str, ...]: ...


@dataclass
class Conversation:
    conv: str
    path: Path
    speakers: tuple[str, str]
    sessions: list[Session]
    questions: list[Question]
    checksum: str
    problems: list[str] = field(default_factory=list)
    """Human-readable notes about what was repaired or skipped (file, field, action)."""
    repaired: int = 0
    dropped: int = 0
    skipped_questions: int = 0


def repair_ids(raw: Any, known: set[str]) -> tuple[list[str], int, int]:
    """``raw`` (an evidence value: a string or a list of them) -> (ids, repaired, dropped).

    A value is *repaired* when its text was not one canonical id but reads as ids naming turns of
    the conversation; an id is *dropped* when it names no turn (or a value cannot be read)."""
    values = raw if isinstance(raw, list) else [raw]
    ids: list[str] = []
    repaired = dropped = 0
    for value in values:
        text = value if isinstance(value, str) else ""
        pieces = [f"D{int(s)}:{int(t)}" for s, t in _ID_PIECE.findall(text)]
        if not pieces:
            dropped += 1
            continue
        if pieces != [text] and any(p in known for p in pieces):
            repaired += 1
        for piece in pieces:
            if piece not in known:
                dropped += 1
            elif piece not in ids:
                ids.append(piece)
    return ids, repaired, dropped


def parse_when(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> an aware UTC datetime (LoCoMo gives no zone)."""
    m = _WHEN.match(text)
    if not m:
        raise ValueError(f"unreadable date {text!r}; expected e.g. '1:56 pm on 8 May, 2023'")
    hour, minute, ampm, day, month, year = m.groups()
    stamp = f"{int(hour)}:{minute} {ampm.upper()} {int(day)} {month[:3].title()} {year}"
    return datetime.strptime(stamp, "%I:%M %p %d %b %Y").replace(tzinfo=timezone.utc)


def load_conversation(path: Path, *, adversarial: bool = False) -> Conversation:
    """Read and check one LoCoMo file. Raises :class:`LocomoFileError` when nothing is usable.
    ``adversarial``: the questions are category 5's instead (no answer in the conversation), for
    measuring abstention (bench/abstention.py); their evidence ids are kept as LoCoMo gives them."""
    try:
        raw_bytes = path.read_bytes()
        data = json.loads(raw_bytes)
    except (OSError, ValueError) as exc:
        raise LocomoFileError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise LocomoFileError(f"{path}: the top level must be an object, got {type(data).__name__}")
    conv = Conversation(
        conv=path.stem,
        path=path,
        speakers=(str(data.get("speaker_a", "A")), str(data.get("speaker_b", "B"))),
        sessions=[],
        questions=[],
        checksum=hashlib.sha256(raw_bytes).hexdigest(),
    )
    known: set[str] = set()
    numbers = sorted(int(m.group(1)) for k in data if (m := _SESSION_KEY.match(k)))
    for n in numbers:
        session = _read_session(conv, data, n)
        if session is not None:
            conv.sessions.append(session)
            known.update(t.dia_id for t in session.turns)
    if not conv.sessions:
        raise LocomoFileError(f"{path}: no readable session_N turns")
    # Observations are read after every turn is known: a fact's ids are checked like evidence.
    conv.sessions = [_with_observations(conv, data, s, known) for s in conv.sessions]
    qa = data.get("qa")
    if not isinstance(qa, list):
        raise LocomoFileError(f"{path}: field 'qa' must be a list of questions")
    for i, item in enumerate(qa):
        question = _read_adversarial(conv, item, i, known) if adversarial else _read_question(conv, item, i, known)
        if question is not None:
            conv.questions.append(question)
    return conv


def _read_session(conv: Conversation, data: dict[str, Any], n: int) -> Session | None:
    where = f"{conv.path}: session_{n}"
    turns_raw = data.get(f"session_{n}")
    if not isinstance(turns_raw, list) or not turns_raw:
        conv.problems.append(f"{where}: not a list of turns; session skipped")
        return None
    try:
        when = parse_when(str(data.get(f"session_{n}_date_time", "")))
    except ValueError as exc:
        conv.problems.append(f"{where}_date_time: {exc}; session skipped")
        return None
    turns: list[Turn] = []
    for k, t in enumerate(turns_raw):
        dia = t.get("dia_id") if isinstance(t, dict) else None
        text = t.get("text") if isinstance(t, dict) else None
        if not isinstance(dia, str) or not _CANONICAL.match(dia) or not isinstance(text, str):
            conv.problems.append(f"{where}[{k}]: a turn needs 'dia_id' (D<n>:<k>) and 'text'; turn skipped")
            continue
        caption = t.get("blip_caption")
        turns.append(
            Turn(dia, str(t.get("speaker", "?")), text, caption if isinstance(caption, str) and caption else None)
        )
    return Session(n, when, tuple(turns), ())


def _with_observations(conv: Conversation, data: dict[str, Any], session: Session, known: set[str]) -> Session:
    key = f"session_{session.number}_observation"
    raw = data.get(key)
    if raw is None:
        return session
    facts: list[tuple[str, tuple[str, ...]]] = []
    if not isinstance(raw, dict):
        conv.problems.append(f"{conv.path}: {key}: must be an object of speaker -> facts; skipped")
        return session
    for speaker, items in raw.items():
        for i, item in enumerate(items if isinstance(items, list) else []):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                conv.problems.append(f"{conv.path}: {key}.{speaker}[{i}]: expected [fact, dia_id]; skipped")
                continue
            ids, _, dropped = repair_ids(item[1], known)
            if dropped:
                conv.problems.append(f"{conv.path}: {key}.{speaker}[{i}]: dia_id {item[1]!r} names no turn")
            facts.append((item[0], tuple(ids)))
    # Chronological within the day: by the first turn each fact comes from.
    facts.sort(key=lambda f: _turn_order(f[1][0]) if f[1] else (10**9, 0))
    return Session(session.number, session.when, session.turns, tuple(facts))


def _turn_order(dia_id: str) -> tuple[int, int]:
    s, t = dia_id[1:].split(":")
    return int(s), int(t)


def _read_adversarial(conv: Conversation, item: Any, i: int, known: set[str]) -> Question | None:
    """A category-5 question (the conversation does not hold its answer), else ``None``."""
    if not isinstance(item, dict) or item.get("category") != 5 or not isinstance(item.get("question"), str):
        return None
    ids, _, _ = repair_ids(item.get("evidence", []), known)
    answer = str(item.get("adversarial_answer", item.get("answer", "")))
    return Question(f"{conv.conv}-q{i}", 5, item["question"], answer, tuple(ids))


def _read_question(conv: Conversation, item: Any, i: int, known: set[str]) -> Question | None:
    where = f"{conv.path}: qa[{i}]"
    if not isinstance(item, dict) or not isinstance(item.get("question"), str):
        conv.problems.append(f"{where}: needs a 'question' string; skipped")
        conv.skipped_questions += 1
        return None
    category = item.get("category")
    if category == 5:
        return None  # adversarial: nothing to retrieve, not scored (not a problem either)
    if category not in CATEGORIES:
        conv.problems.append(f"{where} ({item['question']!r}): unknown category {category!r}; skipped")
        conv.skipped_questions += 1
        return None
    ids, repaired, dropped = repair_ids(item.get("evidence", []), known)
    conv.repaired += repaired
    conv.dropped += dropped
    if repaired or dropped:
        conv.problems.append(
            f"{where} ({item['question']!r}): evidence {item.get('evidence')!r} -> {ids} "
            f"({repaired} repaired, {dropped} dropped)"
        )
    if not ids:
        conv.problems.append(f"{where} ({item['question']!r}): no usable evidence id; question skipped")
        conv.skipped_questions += 1
        return None
    return Question(f"{conv.conv}-q{i}", int(category), item["question"], str(item.get("answer", "")), tuple(ids))
