"""What a qmd index's collections hold: each collection's folder and glob as index.yml names them
(:func:`collection_specs`), the files ``qmd update`` would index there (:func:`scan`: qmd's own
walk, its glob, no hidden files, no symlinked directories, its excluded folders) and how many
changed since the last update (:func:`pending_files`). Read by the daemon's refresh
(:mod:`.refresh`) and by ``memory-router backends``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from memory_router.core.frozen import Frozen

MAX_FILES = 20_000  # a collection bigger than this is counted in its first MAX_FILES files
# The folders qmd's reindexCollection never enters (store.js), besides hidden ones.
QMD_EXCLUDED_DIRS = frozenset({"node_modules", ".git", ".cache", "vendor", "dist", "build"})


class CollectionSpec(Frozen):
    """One collection of qmd's index.yml: its folder and glob."""

    name: str
    root: Path
    pattern: str


_BLOCK = re.compile(r"^collections:[ \t]*\r?\n((?:[ \t]+\S.*(?:\r?\n|$)|[ \t]*\r?\n)*)", re.MULTILINE)
_KEY = re.compile(r"^([ \t]+)(\"[^\"]*\"|'[^']*'|[^:#\s][^:#]*?)[ \t]*:[ \t]*(.*?)[ \t]*$")


def collection_specs(config_file: Path) -> dict[str, CollectionSpec]:
    """``name -> CollectionSpec`` from index.yml's ``collections:`` block, in the shape qmd writes
    it (``NAME: path: DIR, pattern: GLOB``); {} when the file is missing or not in that shape."""
    try:
        text = config_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    block = _BLOCK.search(text)
    if block is None:
        return {}
    fields: dict[str, dict[str, str]] = {}
    name_indent: int | None = None
    current: str | None = None
    for line in block.group(1).splitlines():
        m = _KEY.match(line)
        if m is None:
            continue
        indent, key, value = len(m.group(1)), m.group(2).strip("\"'"), m.group(3).strip("\"'")
        if name_indent is None or indent <= name_indent:
            name_indent, current = indent, key
            fields[key] = {}
        elif current is not None and value:
            fields[current][key] = value
    return {
        name: CollectionSpec(name, Path(os.path.expanduser(f["path"])), f.get("pattern") or "**/*.md")
        for name, f in fields.items()
        if f.get("path")
    }


def _split_mask(mask: str) -> list[str]:
    """qmd's splitGlobMask: commas outside ``{}``/``[]`` separate alternatives."""
    parts, current, braces, brackets = [], "", 0, 0
    for ch in mask:
        if ch == "," and braces == 0 and brackets == 0:
            parts.append(current)
            current = ""
            continue
        braces += (ch == "{") - (ch == "}" and braces > 0)
        brackets += (ch == "[") - (ch == "]" and brackets > 0)
        current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _glob_body(glob: str) -> str:  # noqa: C901 - one branch per glob token
    out, i = [], 0
    while i < len(glob):
        ch = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "{":
            depth, j = 1, i + 1
            while j < len(glob) and depth:
                depth += (glob[j] == "{") - (glob[j] == "}")
                j += 1
            inner = glob[i + 1 : j - 1]
            out.append("(?:" + "|".join(_glob_body(alt) for alt in _split_mask(inner) or [""]) + ")")
            i = j
            continue
        elif ch == "[":
            j = glob.find("]", i + 1)
            if j < 0:
                out.append(re.escape(ch))
            else:
                body = glob[i + 1 : j]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = j + 1
                continue
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def mask_regex(mask: str) -> re.Pattern[str]:
    """A regex for a collection's glob (the fast-glob forms qmd masks use: ``**``, ``*``, ``?``,
    ``{a,b}``, ``[...]``, comma-separated alternatives) over a path relative to its folder."""
    return re.compile("(?:" + "|".join(_glob_body(p) for p in _split_mask(mask) or ["**/*.md"]) + r")\Z")


Signatures = dict[str, tuple[int, int]]


def scan(spec: CollectionSpec, limit: int = MAX_FILES) -> Signatures:
    """``relative path -> (mtime_ns, size)`` of the files qmd's update would index: matching the
    glob, no hidden file or folder, no symlinked directory, none of qmd's excluded folders."""
    match = mask_regex(spec.pattern).match
    found: Signatures = {}
    for directory, subdirs, files in os.walk(spec.root, followlinks=False):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in QMD_EXCLUDED_DIRS)
        base = Path(directory)
        rel_dir = base.relative_to(spec.root).as_posix()
        for name in sorted(files):
            if name.startswith("."):
                continue
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if not match(rel):
                continue
            try:
                st = (base / name).stat(follow_symlinks=False)
            except OSError:
                continue
            found[rel] = (st.st_mtime_ns, st.st_size)
            if len(found) >= limit:
                return found
    return found


def pending_files(current: Mapping[str, Sequence[int]], baseline: Mapping[str, Sequence[int]]) -> int:
    """Files added, changed or removed since ``baseline`` (the files as the last update saw them)."""
    changed = sum(1 for rel, sig in current.items() if tuple(baseline.get(rel, ())) != tuple(sig))
    return changed + sum(1 for rel in baseline if rel not in current)
