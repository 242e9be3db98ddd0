"""How many examples a property test tries: its own budget, scaled by the active hypothesis profile.

A test states its budget as it would run under hypothesis's default profile (100 examples a
test): ``@settings(max_examples=examples(600))``. An explicit ``max_examples`` would otherwise
ignore the profile, so neither the fast tier's short replay nor ``hunt``'s deep search would
reach the tests that need them most. The profiles live in tests/conftest.py, which loads one
before any test module is imported (the budget is read when the decorator runs).
"""

from __future__ import annotations

from hypothesis import settings

DEFAULT_EXAMPLES = 100
"""hypothesis's own default ``max_examples``: the profile that runs a budget as written."""
FLOOR = 5
"""Fewest examples a scaled-down budget keeps (a budget already smaller keeps its own)."""


def examples(budget: int, profile: settings | None = None) -> int:
    """``budget`` scaled by the profile's ``max_examples`` (the active one's unless given) against
    the default's 100: as written under ``default`` and ``ci``, a tenth under ``fast``, twenty
    times under ``hunt``."""
    # settings() is the active profile's values (settings.default is typed Optional, for the moment
    # between two profiles).
    max_examples: int = (profile or settings()).max_examples
    scaled = budget * max_examples // DEFAULT_EXAMPLES
    return max(scaled, min(budget, FLOOR))
