"""Placeholder for the lossless adapter (it lands with its own issue): every call answers
BACKEND_UNAVAILABLE so the router falls back."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from . import BackendContext
from ._unavailable import UnavailableBackend


class Settings(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


def create(name: str, settings: Settings, context: BackendContext) -> UnavailableBackend:
    return UnavailableBackend(name, "the lossless adapter is not part of this build yet")


def demo_setup(workspace, state_dir):  # noqa: ANN001 - placeholder
    from . import DemoUnavailable

    raise DemoUnavailable("the lossless adapter is not part of this build yet")
