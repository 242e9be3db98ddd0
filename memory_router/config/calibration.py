"""Loading the relevance calibration a config names: the packaged maps, none, or a file.

The maps and what they mean are :mod:`memory_router.core.calibration` (pure: parsing and applying
them); this module reads the file. A problem never fails a query: the router then keeps the
backends' native relevance and ``memory-router backends`` says why.
"""

from __future__ import annotations

from pathlib import Path

import memory_router.core
from memory_router.core.calibration import NATIVE, Calibration, parse

DATA_NAME = "calibration.json"


def packaged_path() -> Path:
    """The packaged maps, shipped beside the code that applies them (``memory_router/core/``)."""
    return Path(memory_router.core.__file__).with_name(DATA_NAME)


def load(setting: str, config_path: Path | None = None) -> Calibration:
    """The calibration a config's ``"calibration"`` names: ``"packaged"``, ``"off"``, or a file
    (relative to the config file). Never raises: a problem is reported on the result."""
    if setting == "off":
        return NATIVE
    if setting == "packaged":
        path = packaged_path()
    else:
        path = Path(setting)
        if not path.is_absolute() and config_path is not None:
            path = config_path.parent / path
    try:
        from memory_router.output.jsonout import loads_as_orjson  # no orjson on a cold query

        data = loads_as_orjson(path.read_bytes())
        return Calibration(parse(data), str(path))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Calibration({}, str(path), f"cannot use {path}: {reason}; using the backends' native relevance")
