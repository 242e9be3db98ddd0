"""One LoCoMo conversation laid out the way an OpenClaw agent holds it (for ``bench/locomo.py``).

Under ``<work>/<conv>/``:

* ``state/lcm.db`` - every raw turn as a message in lossless-claw's real schema, written by the
  project's own writer (:mod:`memory_router.backends.lossless.schema`). ``created_at`` is the
  session's date plus one minute per turn. The speakers alternate roles (speaker_a ``user``,
  speaker_b ``assistant``); the content is ``"<speaker>: <text>"`` plus ``[image: <caption>]``
  for a shared image. No dia_id is written into the database: the map message_id -> dia_id is
  kept in ``manifest.json``.
* ``memory/YYYY-MM-DD.md`` - each session's observations as an OpenClaw daily note, one bullet
  per fact ending with its dia_id(s): ``- Caroline went to a support group. [D1:3]``. Two
  sessions on one day share the file (a ``## Session N`` heading each).
* ``memory/daily/YYYY-MM-DD.md`` - symlinks to those notes (``--tr-layout daily``): Total
  Recall's own tier layout, for a Total Recall that does not read OpenClaw's.
* ``qmd/`` - a real qmd index of ``memory/*.md`` (collection ``notes``), embedded with the
  MiniLM GGUF that ``.ci/setup.d/30-qmd-models.sh`` builds (unless ``embed`` is off).
* ``bm25.db`` - the plain baseline: an SQLite FTS5 table of the raw turns.

Everything is rebuilt only when its inputs change: ``manifest.json`` records a key made of the
LoCoMo file's checksum, this module's source, the layout, whether it is embedded and the model's
checksum marker.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
from collections import defaultdict
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from _locomo_data import Conversation

from memory_router.backends import BackendContext
from memory_router.backends.common import settings as _settings
from memory_router.backends.lossless.schema import LcmWriter, create_lcm_db
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection
from memory_router.core.frozen import Frozen

COLLECTION = "notes"
LAYOUTS = ("daily", "openclaw")
_LABEL = re.compile(r"\bD\d+:\d+\b")


class Stores(Protocol):
    """What the runner and the scorer read of a conversation's workspace: LoCoMo's
    :class:`Workspace`, and LongMemEval's (bench/_longmemeval_workspace.py)."""

    @property
    def conv(self) -> str: ...
    @property
    def root(self) -> Path: ...
    @property
    def memory(self) -> Path: ...
    @property
    def lcm_db(self) -> Path: ...
    @property
    def bm25_db(self) -> Path: ...
    @property
    def qmd(self) -> Mapping[str, Any]: ...
    @property
    def message_dia(self) -> Mapping[int, str]: ...
    @property
    def note_lines(self) -> Mapping[str, Mapping[int, tuple[str, ...]]]: ...


class Workspace(Frozen):
    conv: str
    root: Path
    memory: Path
    lcm_db: Path
    bm25_db: Path
    qmd: dict[str, Any]
    """The qmd backend settings that point at this conversation's index."""
    message_dia: dict[int, str]
    note_lines: dict[str, dict[int, tuple[str, ...]]]
    """note file name (``2023-05-08.md``) -> 1-based line -> the dia_ids of the bullet on it."""
    embedded: bool
    reused: bool


def tool_env() -> dict[str, str]:
    """The environment for qmd and the daemons: the caller's, minus what would point them
    elsewhere (``CI`` makes qmd refuse model work; the router's and OpenClaw's own variables
    would replace the bench's configuration)."""
    drop = ("MEMORY_ROUTER_", "OPENCLAW_", "LCM_DATABASE_PATH", "QMD_")
    return {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith(drop)}


def build(conv: Conversation, work: Path, *, layout: str, embed: bool, model: Path, log: Any = print) -> Workspace:
    """The workspace of ``conv`` under ``work/<conv>``, reused when its key is unchanged."""
    root = work / conv.conv
    key = _key(conv, layout, embed, model)
    manifest_path = root / "manifest.json"
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError:
            manifest = {}
        if manifest.get("key") == key:
            return _from_manifest(conv.conv, root, manifest, reused=True)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    log(f"ingesting conversation {conv.conv} into {root} (layout {layout}, embed {embed})")
    message_dia = _write_lcm(conv, root / "state" / "lcm.db")
    note_lines = _write_notes(conv, root / "memory", layout)
    _write_bm25(conv, root / "bm25.db")
    qmd_settings = _index_qmd(root, embed, model)
    manifest = {
        "key": key,
        "conv": conv.conv,
        "embedded": embed,
        "qmd": qmd_settings,
        "message_dia": {str(k): v for k, v in message_dia.items()},
        "note_lines": {name: {str(n): list(ids) for n, ids in lines.items()} for name, lines in note_lines.items()},
    }
    # Written last: a build that failed half-way has no manifest and is redone next time.
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    return _from_manifest(conv.conv, root, manifest, reused=False)


def _key(conv: Conversation, layout: str, embed: bool, model: Path) -> str:
    marker = Path(str(model) + ".sha256")
    parts = [
        conv.checksum,
        hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        layout,
        str(embed),
        marker.read_text(encoding="utf-8") if embed and marker.is_file() else "",
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _from_manifest(conv: str, root: Path, manifest: dict[str, Any], *, reused: bool) -> Workspace:
    return Workspace(
        conv=conv,
        root=root,
        memory=root / "memory",
        lcm_db=root / "state" / "lcm.db",
        bm25_db=root / "bm25.db",
        qmd=manifest["qmd"],
        message_dia={int(k): v for k, v in manifest["message_dia"].items()},
        note_lines={
            name: {int(n): tuple(ids) for n, ids in lines.items()} for name, lines in manifest["note_lines"].items()
        },
        embedded=bool(manifest["embedded"]),
        reused=reused,
    )


def _write_lcm(conv: Conversation, path: Path) -> dict[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = create_lcm_db(path, "current")
    message_dia: dict[int, str] = {}
    try:
        writer = LcmWriter(conn)
        conn.execute("BEGIN")
        first = conv.sessions[0].when
        conversation = writer.conversation(
            f"locomo-{conv.conv}", session_key="agent:main:main", title=" & ".join(conv.speakers), created=first
        )
        for session in conv.sessions:
            for k, turn in enumerate(session.turns):
                role = "user" if turn.speaker == conv.speakers[0] else "assistant"
                at = session.when + timedelta(minutes=k)
                message_dia[writer.message(conversation, role, turn.content(), at=at)] = turn.dia_id
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return message_dia


def note_bullet(fact: str, ids: tuple[str, ...]) -> str:
    label = f" [{', '.join(ids)}]" if ids else ""
    return f"- {' '.join(fact.split())}{label}"


def _write_notes(conv: Conversation, memory: Path, layout: str) -> dict[str, dict[int, tuple[str, ...]]]:
    by_day: dict[str, list[str]] = defaultdict(list)
    line_ids: dict[str, dict[int, tuple[str, ...]]] = defaultdict(dict)
    for session in conv.sessions:
        if not session.observations:
            continue
        day = session.when.strftime("%Y-%m-%d")
        name = f"{day}.md"
        lines = by_day[name]
        if not lines:
            lines += [f"# {day}", ""]
        lines += [f"## Session {session.number}, {session.when.strftime('%H:%M')}", ""]
        for fact, ids in session.observations:
            lines.append(note_bullet(fact, ids))
            line_ids[name][len(lines)] = ids  # 1-based: the line just appended
        lines.append("")
    memory.mkdir(parents=True, exist_ok=True)
    for name, lines in by_day.items():
        (memory / name).write_text("\n".join(lines), encoding="utf-8")
    if layout == "daily":
        daily = memory / "daily"
        daily.mkdir()
        for name in by_day:
            (daily / name).symlink_to(Path("..") / name)
    return dict(line_ids)


def _write_bm25(conv: Conversation, path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE VIRTUAL TABLE turns USING fts5(content, dia_id UNINDEXED, tokenize='porter unicode61')")
        conn.executemany(
            "INSERT INTO turns (content, dia_id) VALUES (?, ?)",
            [(turn.content(), turn.dia_id) for s in conv.sessions for turn in s.turns],
        )
        conn.commit()
    finally:
        conn.close()


def _index_qmd(root: Path, embed: bool, model: Path) -> dict[str, Any]:
    home = root / "qmd"
    settings: dict[str, Any] = {
        "index_path": str(home / "index.sqlite"),
        "config_dir": str(home / "config"),
        "cache_dir": str(home / "cache"),
        "collections": [COLLECTION],
    }
    context = BackendContext(state_dir=root / "qmd-build", environ=tool_env())
    cli = QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, settings), context).transport()
    if embed:
        # qmd writes the embedding model into index.yml's models block on this first run, so
        # every later qmd process (the daemons' engines too) embeds queries with the same model.
        cli.env["QMD_EMBED_MODEL"] = str(model)
        cli.env["QMD_EMBED_CONTEXT_SIZE"] = "512"
    # "*.md" keeps qmd to the notes themselves: the memory/daily/ symlinks would be duplicates.
    build_collection(cli, root / "memory", COLLECTION, "*.md", home / "index.lock")
    if embed:
        done = subprocess.run(
            cli.argv("embed", []), cwd=cli.cwd, env=cli.env, capture_output=True, timeout=1800, start_new_session=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"qmd embed failed in {home}: {done.stderr.decode('utf-8', 'replace')[-600:]}")
    return settings


def labels_in(text: str) -> list[str]:
    """dia_ids written in a note's text (``[D1:3, D1:5]``), in order, without repeats."""
    return list(dict.fromkeys(_LABEL.findall(text)))
