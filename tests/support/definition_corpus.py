"""A generated TypeScript + markdown project where callers mention symbols more than definitions.

Shared by ``tests/adapters/test_definitions_qmd.py`` and ``bench/definition_first.py``. Twelve symbols
(functions, classes, methods, an arrow-function const, an interface, a type alias), each defined
once in a long source file, and used - several times each - by short route/service files and
markdown notes, so BM25 ranks a caller above the definition. :data:`QUERIES` are twelve
"find X" queries with the file (and line) that defines X.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    path: str  # the file that defines it
    definition: str  # the defining line, as written in that file
    query: str  # how an agent asks for it


def _filler(topic: str, lines: int) -> list[str]:
    """Plausible code that does not mention any symbol: helpers about ``topic``."""
    out: list[str] = []
    for i in range(lines // 4):
        out += [
            f"function {topic}Helper{i}(value: number, factor = {i + 2}): number {{",
            f"  // {topic} bookkeeping step {i}: scale, clamp and round the value",
            f"  return Math.round(Math.min(value * factor, {1000 + i}) * 100) / 100;",
            "}",
        ]
    return out


SYMBOLS: tuple[Symbol, ...] = (
    Symbol(
        "reconcileManifest",
        "src/manifest/reconcile.ts",
        "export function reconcileManifest(ledger: Ledger, arrivals: Arrival[]): Discrepancy[] {",
        "find the function reconcileManifest",
    ),
    Symbol(
        "ManifestLedger",
        "src/manifest/ledger.ts",
        "export class ManifestLedger {",
        "find class ManifestLedger",
    ),
    Symbol(
        "applyDemurrageFee",
        "src/billing/demurrage.ts",
        "  applyDemurrageFee(container: ContainerId, days: number): Money {",
        "find the method applyDemurrageFee",
    ),
    Symbol("BerthAllocator", "src/berths/allocator.ts", "export class BerthAllocator {", "BerthAllocator"),
    Symbol(
        "parseBillOfLading",
        "src/documents/bill-of-lading.ts",
        "export async function parseBillOfLading(raw: string): Promise<BillOfLading> {",
        "find the function parseBillOfLading",
    ),
    Symbol(
        "computeDwellTime",
        "src/yard/dwell.ts",
        "export const computeDwellTime = (gateIn: Date, gateOut: Date): number => {",
        "computeDwellTime",
    ),
    Symbol(
        "ContainerRecord",
        "src/types/container.ts",
        "export interface ContainerRecord {",
        "find the interface ContainerRecord",
    ),
    Symbol(
        "VesselCallStatus",
        "src/types/vessel.ts",
        "export type VesselCallStatus = 'expected' | 'berthed' | 'working' | 'sailed';",
        "VesselCallStatus",
    ),
    Symbol(
        "scheduleCraneWindow",
        "src/cranes/scheduler.ts",
        "  public async scheduleCraneWindow(berth: BerthId, hours: number): Promise<CraneWindow> {",
        "find the method scheduleCraneWindow",
    ),
    Symbol(
        "normalizePortCode",
        "src/util/ports.ts",
        "export function normalizePortCode(code: string): string {",
        "find function normalizePortCode",
    ),
    Symbol(
        "TariffSchedule",
        "src/billing/tariff.ts",
        "export class TariffSchedule extends Schedule {",
        "find class TariffSchedule",
    ),
    Symbol(
        "releaseHold",
        "src/customs/gate.ts",
        "  releaseHold(container: ContainerId, officer: string): void {",
        "search for releaseHold",
    ),
)
QUERIES: tuple[tuple[str, str], ...] = tuple((s.query, s.path) for s in SYMBOLS)


def _definition_file(symbol: Symbol, index: int) -> str:
    topic = Path(symbol.path).stem.replace("-", "")
    indented = symbol.definition.startswith("  ")
    lines = ["// Part of the port operations service.", "import { Money, ContainerId } from '../types/common';", ""]
    lines += _filler(topic, 12 + index % 3 * 4)
    lines.append("")
    if indented:  # a method: inside a class of its own
        lines += [
            f"export class {topic.capitalize()}Service {{",
            "  private readonly rates = new Map<string, number>();",
            "",
        ]
        lines += [symbol.definition, f"    return this.rates.get('{topic}') as never;", "  }", "}"]
    else:
        lines += [symbol.definition, f"  // {topic}: the core rule of this module", "  return undefined as never;", "}"]
    lines.append("")
    lines += _filler(topic + "Tail", 8)
    return "\n".join(lines) + "\n"


def _caller_file(symbols: list[Symbol], index: int) -> str:
    names = [s.name for s in symbols]
    lines = [f"import {{ {', '.join(names)} }} from '../core';", ""]
    for name in names:
        lines += [
            f"// route {index}: {name} is called for every request, then {name} again for the retry",
            f"router.post('/r{index}/{name.lower()}', (req) => {name}(req.body));",
            f"router.get('/r{index}/{name.lower()}/:id', (req) => handlers.{name}(req.params.id));",
        ]
    return "\n".join(lines) + "\n"


def _note(symbols: list[Symbol], index: int) -> str:
    lines = [f"# Operations note {index}", ""]
    for s in symbols:
        lines += [
            f"## {s.name}",
            "",
            f"We call `{s.name}` from the routes. {s.name} must stay idempotent: "
            f"calling {s.name} twice is safe, and {s.name} logs every call.",
            "",
        ]
    return "\n".join(lines)


def write_corpus(root: Path) -> list[str]:
    """Write the project under ``root``; return the relative paths written (about 30 files)."""
    files: dict[str, str] = {}
    for i, symbol in enumerate(SYMBOLS):
        files[symbol.path] = _definition_file(symbol, i)
    n = len(SYMBOLS)
    for i in range(14):  # each caller uses two symbols, each symbol is used by two or three callers
        files[f"src/routes/route-{i:02d}.ts"] = _caller_file([SYMBOLS[i % n], SYMBOLS[(i * 5 + 3) % n]], i)
    for i in range(5):
        files[f"docs/operations-{i}.md"] = _note([SYMBOLS[(i * 3 + j) % n] for j in range(3)], i)
    files["README.md"] = "# Port operations\n\nBerths, cranes, customs and billing for a container terminal.\n"
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return sorted(files)


def definition_line(root: Path, symbol: Symbol) -> int:
    """The 1-based line of ``symbol.definition`` in the written corpus."""
    lines = (root / symbol.path).read_text(encoding="utf-8").split("\n")
    return lines.index(symbol.definition) + 1


def write_memory(root: Path, today: str) -> None:
    """A Total Recall memory about the same project: working memory and today's log mention each
    symbol several times; one archived note per module quotes its definition in a code block."""
    work = ["# Focus", ""]
    daily: list[str] = []
    for i, s in enumerate(SYMBOLS):
        work.append(f"- Route {i} calls {s.name}; {s.name} is on the hot path.")
        daily += [
            f"[{8 + i % 10:02d}:{i:02d}] {s.name} failed on berth {i}; reran {s.name} and it passed.",
            f"[{9 + i % 10:02d}:{i:02d}] Reviewed the callers of {s.name} in the routes.",
        ]
        note = [
            f"# {Path(s.path).stem} module",
            "",
            f"- Lives in {s.path}; reviewed in the 2025 audit.",
            "",
            "  ```ts",
            f"  {s.definition.strip()}",
            "  ```",
        ]
        target = root / "memory" / "archive" / "2025" / f"{Path(s.path).stem}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(note) + "\n", encoding="utf-8")
    (root / "CLAUDE.local.md").write_text("\n".join(work) + "\n", encoding="utf-8")
    (root / "memory" / "daily").mkdir(parents=True, exist_ok=True)
    (root / "memory" / "daily" / f"{today}.md").write_text("\n".join(daily) + "\n", encoding="utf-8")


def memory_note(symbol: Symbol) -> str:
    """The archived note (relative path) that quotes ``symbol``'s definition."""
    return f"memory/archive/2025/{Path(symbol.path).stem}.md"
