"""No module of memory_router/ over 600 lines (issue 32): a module a reader can hold in mind, whose
name says what it does. A module that grows past the limit is split by what its parts do (Total
Recall: scan, parse, index, score, adapter; qmd: its transports apart from its adapter)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memory_router"
MAX_LINES = 600

# Over the limit for now, each with the issue that splits it. An entry whose module is split (or
# gone) fails the last test below: delete it then, so the list never outlives its reason.
NOT_YET_SPLIT: dict[str, str] = {}


def line_count(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def oversized() -> dict[str, int]:
    """``relative path -> lines`` of every Python module over :data:`MAX_LINES`."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = line_count(path)
        if lines > MAX_LINES:
            found[path.relative_to(ROOT).as_posix()] = lines
    return found


def test_no_module_of_memory_router_is_over_600_lines() -> None:
    over = {path: lines for path, lines in oversized().items() if path not in NOT_YET_SPLIT}
    assert not over, (
        f"modules over {MAX_LINES} lines: "
        + ", ".join(f"{path} ({lines})" for path, lines in over.items())
        + ". Split each by what its parts do (docs/development.md maps the code)."
    )


def test_the_modules_not_yet_split_are_still_over_the_limit() -> None:
    over = oversized()
    done = [path for path in NOT_YET_SPLIT if path not in over]
    assert not done, f"under {MAX_LINES} lines now (or gone): delete {done} from NOT_YET_SPLIT in {__file__}"


def test_the_count_is_of_lines_as_an_editor_shows_them(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("a = 1\n" * MAX_LINES)
    assert line_count(module) == MAX_LINES
    module.write_text("a = 1\n" * MAX_LINES + "b = 2")  # a last line without a newline counts too
    assert line_count(module) == MAX_LINES + 1


def test_what_qmd_s_adapter_offered_before_its_split_still_imports_from_it() -> None:
    """``adapter.QmdBackend``, ``adapter.build_collection``, the transports: an importer of the old
    names gets the moved objects themselves (the tests import them from their new modules)."""
    import importlib

    from memory_router.backends.qmd import adapter

    for name, module in adapter._MOVED.items():
        home = importlib.import_module(f"memory_router.backends.qmd.{module}")
        assert getattr(adapter, name) is getattr(home, name), name
