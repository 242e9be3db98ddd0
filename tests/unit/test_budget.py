"""The property tests' example budgets follow the tier: a tenth in the fast one, all in CI's slow one."""

from __future__ import annotations

from hypothesis import settings

from ..conftest import hypothesis_profile
from ..support.budget import FLOOR, examples


def test_a_budget_runs_as_written_by_default_and_in_ci_a_tenth_in_the_fast_tier_more_when_hunting() -> None:
    assert examples(600, settings.get_profile("default")) == 600
    assert examples(600, settings.get_profile("ci")) == 600
    assert examples(600, settings.get_profile("fast")) == 60
    assert examples(150, settings.get_profile("hunt")) == 3000


def test_a_scaled_down_budget_keeps_a_few_examples_and_a_small_one_keeps_its_own() -> None:
    fast = settings.get_profile("fast")
    assert examples(20, fast) == FLOOR
    assert examples(3, fast) == 3


def test_the_fast_tiers_selection_gets_the_fast_profile_unless_the_environment_names_one() -> None:
    assert hypothesis_profile({}, "not slow") == "fast"
    assert hypothesis_profile({}, " not slow ") == "fast"
    assert hypothesis_profile({}, "slow or hypothesis") == "default"
    assert hypothesis_profile({}, "") == "default"
    assert hypothesis_profile({"HYPOTHESIS_PROFILE": "ci"}, "not slow") == "ci"
    assert hypothesis_profile({"HYPOTHESIS_PROFILE": ""}, "not slow") == "fast"
