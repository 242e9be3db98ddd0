"""The defaults of router-config.json's optional settings, and the cooldown's.

Their own module, below :mod:`.router_config` (which compiles a config and fills absent keys),
:mod:`.config.schema` (which declares pydantic fields with them) and :mod:`.config.cache`, so
that none of those imports another only to learn a default.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from memory_router.core.frozen import Frozen


class CooldownConfig(Frozen):
    failures: int
    seconds: float


# The defaults of router-config.json's optional settings: config_schema declares its fields with
# them, and the compiled cache (config_cache, which must not import pydantic) fills absent keys.
DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "threshold": 0.4,
        "timeout_ms": 5000,
        "result_limit": 10,
        "max_query_chars": 4096,
        "regex_timeout_ms": 50,
        "table": "extended",
        "strategy": "sequential",
        "calibration": "packaged",
    }
)
COOLDOWN_DEFAULT = CooldownConfig(failures=3, seconds=30.0)
