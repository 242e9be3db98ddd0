"""The JSON shape of router-config.json, as pydantic models: the validating half of :mod:`.config`.

Imported only when a config file is actually validated (``config check``, the daemon, a first
run or a changed file); a query answered from the compiled config cache never imports pydantic
for its config. Unknown keys are errors, so a typo never silently disables a setting.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memory_router.config.defaults import COOLDOWN_DEFAULT, DEFAULTS
from memory_router.core.errors import InvalidConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StepSpec(_Strict):
    backend: str
    mode: str | None = None


class ExtendSpec(StepSpec):
    # The step of the rule's chain this extension is tried before ("totalrecall", "qmd/search");
    # None: after the whole chain.
    before: str | None = None


class RuleSpec(_Strict):
    number: int = Field(ge=1)
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = ""
    strong: tuple[str, ...] = ()
    weak: tuple[str, ...] = ()
    chain: tuple[StepSpec, ...] = Field(min_length=1)
    # Extension steps (not in the spec's table), appended to the chain unless "table" is "spec".
    extend: tuple[ExtendSpec, ...] = ()
    # This rule's strategy; None: the config's global "strategy".
    strategy: Literal["sequential", "fuse", "fill"] | None = None


class CooldownSpec(_Strict):
    """Dead-backend cooldown (used by the daemon): ``"cooldown": null`` or ``enabled: false`` turns it off."""

    enabled: bool = True
    failures: int = Field(default=COOLDOWN_DEFAULT.failures, ge=1, le=1000)
    seconds: float = Field(default=COOLDOWN_DEFAULT.seconds, gt=0, le=86_400)


class ConfigSpec(_Strict):
    version: Literal[1] = 1
    threshold: float = Field(default=DEFAULTS["threshold"], ge=0.0, le=1.0)
    timeout_ms: int = Field(default=DEFAULTS["timeout_ms"], gt=0, le=600_000)
    result_limit: int = Field(default=DEFAULTS["result_limit"], ge=1, le=1000)
    max_query_chars: int = Field(default=DEFAULTS["max_query_chars"], ge=1, le=1_000_000)
    regex_timeout_ms: int = Field(default=DEFAULTS["regex_timeout_ms"], gt=0, le=10_000)
    deadline_ms: int | None = Field(default=None, gt=0, le=3_600_000)
    cooldown: CooldownSpec | None = CooldownSpec()
    # "extended": each rule's chain plus its measured "extend" steps; "spec": the spec's table exactly.
    table: Literal["extended", "spec"] = DEFAULTS["table"]
    # "sequential": the spec's fallback; "fuse": ask every step at once and merge (docs/strategies.md).
    strategy: Literal["sequential", "fuse", "fill"] = DEFAULTS["strategy"]
    # "packaged", "off", or a calibration file (relative to this config): see calibration.py.
    calibration: str = Field(default=DEFAULTS["calibration"], min_length=1)
    file_extensions: tuple[str, ...] = ()
    rules: tuple[RuleSpec, ...] = Field(min_length=1)
    backends: dict[str, dict[str, Any]] = Field(min_length=1)


def _loc(loc: tuple[Any, ...], data: Any) -> str:
    """('rules', 1, 'chain', 0, 'backend') -> 'rules[1] (relationship).chain[0].backend'."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            if isinstance(node, list) and 0 <= part < len(node):
                node = node[part]
                if isinstance(node, dict) and isinstance(node.get("id"), str) and "chain" in node:
                    out += f" ({node['id']})"
            else:
                node = None
        else:
            out += f".{part}" if out else str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return out


def first_error(
    path: Path, exc: ValidationError, data: Any, prefix: str = "", known: Iterable[str] | None = None
) -> InvalidConfig:
    """The first of pydantic's errors as an :class:`InvalidConfig` naming the file, the field path
    and the bad value; ``known``: the keys allowed where an unknown key was found."""
    err = exc.errors(include_url=False)[0]
    where = _loc(tuple(err["loc"]), data)
    where = f"{prefix}.{where}" if prefix and where else (prefix or where)
    # A Check(...) or validator's own message, without pydantic's "Value error, " in front.
    problem = err["msg"].removeprefix("Value error, ") if err["type"] == "value_error" else err["msg"]
    hints = []
    # extra_forbidden: a model's unknown key; unexpected_keyword_argument: a dataclass's (Settings)
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        problem = "unknown key (misspelt, or not supported by this version)"
        if known is not None:
            hints.append(f"Known keys: {', '.join(known)}.")
    elif "input" in err and err["type"] != "missing":
        problem += f" (got {orjson.dumps(err['input'], default=str).decode()[:120]})"
    more = len(exc.errors()) - 1
    if more > 0:
        hints.append(f"({more} more problem{'s' if more > 1 else ''} after this one.)")
    return InvalidConfig(path, where, problem, " ".join(hints))
