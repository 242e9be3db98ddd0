"""The command adapter's wire contract as pydantic models: what a program prints on stdout.

Imported by :func:`memory_router.backends.command.adapter.parse_contract` when a command backend has
answered, so importing the adapter (config loading, a query that does not call it) needs no pydantic.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class WireResult(BaseModel):
    """One result as a command prints it. Strict types: "0.9" is not a relevance."""

    model_config = ConfigDict(extra="allow", strict=True)

    content: str
    relevance: float = Field(ge=0.0, le=1.0)
    source: str | None = None
    timestamp: str | None = None


class WireContract(BaseModel):
    """The nine-field contract as printed on stdout; extra top-level keys are ignored."""

    model_config = ConfigDict(extra="ignore", strict=True)

    status: Literal["success", "empty", "error"]
    results: list[WireResult]
    query_echo: str | None = None
    result_count: int | None = Field(default=None, ge=0)
    error_message: str | None = None
    error_code: str | None = None
    backend_duration_ms: int | float | None = None
    normalized_relevance: float | None = Field(default=None, ge=0.0, le=1.0)
    backend: str | None = None
