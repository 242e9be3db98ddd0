"""Which files under a memory root are memory, and in which tier: one ``os.scandir`` walk in Total
Recall's search order (the layout is in :mod:`.adapter`'s docstring), and why a file or a root
gives nothing to search."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

TOTAL_RECALL_FOLDERS = frozenset({"registers", "daily", "archive"})  # memory/<these>: Total Recall's tiers
OPENCLAW_LONG_TERM = ("MEMORY.md", "memory.md")  # memory-core's long-term files, at the root
# A daily note's name: Total Recall's memory/daily/YYYY-MM-DD.md, OpenClaw's memory/YYYY-MM-DD.md
# and its session notes memory/YYYY-MM-DD-<slug>.md.
DAILY_NAME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:-[^/]*)?\.md$")


def memory_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(tier, path) for every memory file under ``root``, in Total Recall's search order."""
    for tier, rel, _ in scan_tree(root):
        yield tier, root.joinpath(*rel.split("/"))


def scan_tree(root: Path) -> list[tuple[str, str, os.stat_result]]:
    """(tier, relative posix path, stat) of every memory file, in :func:`memory_files` order.

    Total Recall's tiers first (``CLAUDE.local.md``, ``memory/registers/*.md``,
    ``memory/daily/*.md``, ``memory/archive/**/*.md``), then what OpenClaw's memory-core indexes
    by default: ``MEMORY.md`` and ``memory.md`` (``longterm``), then every other ``memory/**/*.md``
    (``daily`` when named ``YYYY-MM-DD[-slug].md`` directly under ``memory/``, else ``notes``).
    One file reached by several paths (a symlink, a hard link, ``memory.md`` on a case-insensitive
    disk) is listed once, under the path that is not a symlink (else the first one).

    One ``os.scandir`` walk instead of pathlib's glob + is_file + stat: the daemon runs this on
    every query to notice changed files, and with 10,000 files pathlib's per-path objects cost
    more than the system calls. Same selection as ``folder.glob("*.md")`` /
    ``folder.rglob("*.md")`` + ``is_file()`` (symlinked files count, symlinked directories are
    not descended into, unreadable directories are skipped), sorted as pathlib sorts paths
    (by path components).
    """
    out: list[tuple[str, str, os.stat_result]] = []
    links: set[str] = set()  # the relative paths that are symlinks
    base = os.fspath(root)
    _scan_top_file(base, "CLAUDE.local.md", "working", out, links)
    memory = os.path.join(base, "memory")
    has_memory = os.path.isdir(memory)
    if has_memory:
        for tier, folder, recursive in (
            ("registers", "registers", False),
            ("daily", "daily", False),
            ("archive", "archive", True),
        ):
            top = os.path.join(memory, folder)
            if not os.path.isdir(top):
                continue
            found: list[tuple[tuple[str, ...], os.stat_result]] = []
            _scan_dir(top, ("memory", folder), recursive, found, links)
            found.sort(key=lambda item: item[0])
            out.extend((tier, "/".join(parts), st) for parts, st in found)
    for name in OPENCLAW_LONG_TERM:
        _scan_top_file(base, name, "longterm", out, links)
    if has_memory:
        found = []
        _scan_dir(memory, ("memory",), True, found, links, skip=TOTAL_RECALL_FOLDERS)
        found.sort(key=lambda item: item[0])
        for parts, st in found:
            tier = "daily" if len(parts) == 2 and DAILY_NAME.match(parts[1]) else "notes"
            out.append((tier, "/".join(parts), st))
    return _distinct_files(out, links)


def _scan_top_file(
    base: str, name: str, tier: str, out: list[tuple[str, str, os.stat_result]], links: set[str]
) -> None:
    path = os.path.join(base, name)
    try:
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode):
            out.append((tier, name, st))
            if os.path.islink(path):
                links.add(name)
    except OSError:
        pass


def _distinct_files(
    found: list[tuple[str, str, os.stat_result]], links: set[str]
) -> list[tuple[str, str, os.stat_result]]:
    """``found`` without the second and later paths to one file (same device and inode): the
    path that is not a symlink stays, in its place (``memory/2026-05-01.md`` rather than the
    ``memory/daily/2026-05-01.md`` link to it), else the first one."""
    longterm = sum(1 for tier, _, _ in found if tier == "longterm")  # MEMORY.md, memory.md: one file?
    if not links and longterm < 2 and not any(st.st_nlink > 1 for _, _, st in found):
        return found  # no second path to any file: the usual case, and the cheap one
    chosen: dict[tuple[int, int], int] = {}
    for i, (_, rel, st) in enumerate(found):
        key = (st.st_dev, st.st_ino)
        first = chosen.get(key)
        if first is None or (found[first][1] in links and rel not in links):
            chosen[key] = i
    if len(chosen) == len(found):
        return found
    keep = set(chosen.values())
    return [item for i, item in enumerate(found) if i in keep]


def _scan_dir(
    directory: str,
    parts: tuple[str, ...],
    recursive: bool,
    found: list[tuple[tuple[str, ...], os.stat_result]],
    links: set[str],
    skip: frozenset[str] = frozenset(),
) -> None:
    """Append ``(path parts, stat)`` of the ``*.md`` files under ``directory`` (and add the
    relative path of each symlink to ``links``); ``skip``: subfolders not to enter, at this
    level only."""
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError:  # unreadable (EACCES) or gone: skipped, as pathlib's glob skips it
        return
    for entry in entries:
        name = entry.name
        if name.endswith(".md") and name != "_index.md":
            try:
                if entry.is_file():
                    found.append(((*parts, name), entry.stat()))
                    if entry.is_symlink():
                        links.add("/".join((*parts, name)))
            except OSError:
                pass  # vanished or unreadable between the listing and the stat: not a file now
        if recursive and name not in skip:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                _scan_dir(entry.path, (*parts, name), True, found, links)


LAYOUT_OF_TIER = {
    "working": "Total Recall",
    "registers": "Total Recall",
    "archive": "Total Recall",
    "daily": "daily notes",
    "longterm": "OpenClaw",
    "notes": "OpenClaw",
}


def no_memory_files(root: Path, skipped: dict[str, str], name: str) -> str:
    """Why a root answers no query: it holds no memory file, or none that could be read."""
    if skipped:
        rel, why = next(iter(skipped.items()))
        more = f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""
        return (
            f"no readable memory files under {root}: {len(skipped)} skipped ({rel}: {why}{more}); "
            "see `memory-router backends`"
        )
    return (
        f"no memory files under {root}: expected OpenClaw's MEMORY.md or memory/*.md "
        "(daily notes memory/YYYY-MM-DD.md), or Total Recall's CLAUDE.local.md or "
        f"memory/{{registers,daily,archive}}/*.md. If the memory lives elsewhere, set backends.{name}.root "
        "in router-config.json or OPENCLAW_REPO_ROOT"
    )


def too_big(size: int, limit: int) -> str | None:
    return f"{size} bytes, larger than the {limit}-byte limit (max_file_bytes)" if size > limit else None


def unreadable(path: Path) -> str | None:
    """Why a memory file cannot be read (one byte is tried), or ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            os.read(fd, 1)
        finally:
            os.close(fd)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return None
