"""router-config.json and backends.json: every malformed input is refused with file, field and value."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory_router.config.installed import load_installed, parse_installed
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import load_config, parse_config, read_json
from memory_router.core.errors import BackendsFileMissing, InvalidBackendsFile, InvalidConfig

REPO = Path(__file__).resolve().parents[2]
BASE = read_json(packaged_config())


def test_packaged_default_is_the_repository_file():
    assert packaged_config().read_bytes() == (REPO / "router-config.json").read_bytes()
    config = load_config()
    assert (config.threshold, config.timeout_ms) == (0.4, 5000)
    assert [r.number for r in config.rules.rules] == [1, 2, 3, 4, 5, 6, 7]
    assert set(config.backends) == {"qmd", "totalrecall", "cognee", "lossless"}


def broken(mutate: Callable[[dict[str, Any]], object]) -> str:
    data = copy.deepcopy(BASE)
    mutate(data)
    with pytest.raises(InvalidConfig) as info:
        parse_config(data, Path("/cfg/router-config.json"))
    return str(info.value)


def test_invalid_regex_names_rule_field_and_pattern():
    msg = broken(lambda d: d["rules"][1]["strong"].__setitem__(2, "depends(on"))
    assert msg.startswith("/cfg/router-config.json: rules[1] (relationship).strong[2]: invalid regex 'depends(on'")


def test_regex_matching_everything_is_refused():
    msg = broken(lambda d: d["rules"][0]["weak"].append("x*"))
    assert "rules[0] (exact_symbol).weak[3]" in msg and "matches the empty string" in msg


def test_rule_naming_unknown_backend():
    msg = broken(lambda d: d["rules"][1]["chain"][0].__setitem__("backend", "cogne"))
    assert "rules[1] (relationship).chain[0].backend: names unknown backend 'cogne'" in msg
    assert "defined: cognee, lossless, qmd, totalrecall" in msg


def test_a_default_chain_with_a_typo_names_the_typo_not_the_extension_that_now_misses_its_step():
    # The packaged rule 7 extends its chain before totalrecall: a user who replaces that chain with
    # a typo must hear about the typo, the real mistake.
    msg = broken(lambda d: d["rules"][6].__setitem__("chain", [{"backend": "cogne"}]))
    assert "rules[6] (default).chain[0].backend: names unknown backend 'cogne'" in msg


def test_an_extension_placed_before_a_step_the_chain_lacks_is_refused():
    msg = broken(lambda d: d["rules"][6]["extend"][0].__setitem__("before", "totalrecal"))
    assert "rules[6] (default).extend[0].before: names no step of the rule's chain: 'totalrecal'" in msg
    assert "qmd/query, totalrecall" in msg


def test_an_extension_goes_before_the_step_it_names_and_last_without_one():
    def chain(extend: list) -> list[tuple[str, bool]]:
        data = copy.deepcopy(BASE)
        data["rules"][6]["extend"] = extend
        rule = parse_config(data, Path("/cfg/router-config.json")).rules.rules[6]
        return [(s.health_key, s.extension) for s in rule.chain]

    assert chain([{"backend": "lossless", "before": "totalrecall"}]) == [
        ("qmd/query", False),
        ("lossless", True),
        ("totalrecall", False),
    ]
    assert chain([{"backend": "lossless", "before": "qmd/query"}])[0] == ("lossless", True)
    assert chain([{"backend": "lossless"}])[-1] == ("lossless", True)
    spec = parse_config({**copy.deepcopy(BASE), "table": "spec"}, Path("/cfg/router-config.json")).rules.rules[6]
    assert [s.health_key for s in spec.chain] == ["qmd/query", "totalrecall"]


def test_unknown_key_is_a_typo_not_ignored():
    msg = broken(lambda d: d.__setitem__("treshold", 0.5))
    assert "treshold: unknown key" in msg


def test_negative_timeout_quotes_the_value():
    msg = broken(lambda d: d.__setitem__("timeout_ms", -5))
    assert "timeout_ms: Input should be greater than 0 (got -5)" in msg


def test_threshold_outside_unit_interval():
    msg = broken(lambda d: d.__setitem__("threshold", 1.5))
    assert "threshold: Input should be less than or equal to 1 (got 1.5)" in msg


def test_unknown_backend_type():
    msg = broken(lambda d: d["backends"].__setitem__("vertex", {"type": "vertexai"}))
    assert "backends.vertex.type: unknown backend type 'vertexai'" in msg and "command" in msg


def test_adapter_settings_are_validated_by_the_adapter():
    msg = broken(lambda d: d["backends"]["totalrecall"].__setitem__("rooot", "/x"))
    assert "backends.totalrecall.rooot: unknown key" in msg


def test_default_rule_must_have_no_signals():
    msg = broken(lambda d: d["rules"][6].__setitem__("strong", ["zzz"]))
    assert "rules[6] (default)" in msg and "must have no signals" in msg


def test_duplicate_rule_number():
    msg = broken(lambda d: d["rules"][2].__setitem__("number", 2))
    assert "rules[2] (decision_recall).number: rule number 2 is used twice" in msg


def test_not_json_gives_line_and_column(tmp_path):
    path = tmp_path / "router-config.json"
    path.write_text('{"version": 1,\n  "rules": [,]}')
    with pytest.raises(InvalidConfig) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: not valid JSON") and "line 2" in str(info.value)


def test_missing_config_file(tmp_path):
    with pytest.raises(InvalidConfig, match="file not found"):
        load_config(tmp_path / "nope.json")


# ---------------------------------------------------------------- backends.json

P = Path("/s/backends.json")


def test_stack_shape_with_statuses():
    inst = parse_installed(
        {
            "tier": "pro",
            "backends": {
                "qmd": {"status": "ready"},
                "cognee": {"status": "degraded"},
                "lossless": {"status": "failed"},
                "totalrecall": {},
            },
        },
        P,
    )
    assert inst.tier == "pro"
    assert inst.usable == ["qmd", "cognee", "totalrecall"]
    assert inst.unusable_reason("lossless") == "status 'failed' in backends.json (usable: ready, degraded)"
    assert inst.unusable_reason("vertex") == "not listed in backends.json"


def test_plain_list_shapes_mean_ready():
    assert parse_installed({"backends": ["qmd", "totalrecall"]}, P).usable == ["qmd", "totalrecall"]
    assert parse_installed(["qmd"], P).usable == ["qmd"]


def test_unknown_status_is_unusable_and_says_so():
    inst = parse_installed({"backends": {"qmd": "purple"}}, P)
    assert inst.usable == [] and "unknown status 'purple'" in (inst.unusable_reason("qmd") or "")


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ("nope", "the top level must be an object or a list"),
        ({"tier": "pro"}, 'no "backends" key'),
        ({"backends": 3}, "backends: must be an object or a list"),
        ({"backends": [1]}, "backends[0]: must be a backend name"),
        ({"backends": {"qmd": 7}}, "backends.qmd: must be an object"),
        ({"backends": {"qmd": {"status": 1}}}, "backends.qmd.status: must be a string"),
    ],
)
def test_malformed_backends_json(data, where):
    with pytest.raises(InvalidBackendsFile) as info:
        parse_installed(data, P)
    assert where in str(info.value) and str(info.value).startswith("/s/backends.json")


def test_missing_backends_json_says_how_to_fix(tmp_path):
    with pytest.raises(BackendsFileMissing) as info:
        load_installed(tmp_path / "backends.json")
    assert "does not exist" in str(info.value) and "OPENCLAW_STATE_DIR" in str(info.value)


def test_backends_json_not_json(tmp_path):
    path = tmp_path / "backends.json"
    path.write_bytes(b"{\xff")
    with pytest.raises(InvalidBackendsFile, match="not valid JSON"):
        load_installed(path)


@pytest.mark.parametrize("name", ["backends.starter.json", "backends.pro.json"])
def test_shipped_examples_parse(name):
    inst = load_installed(REPO / "examples" / name)
    assert inst.tier in ("starter", "pro") and "qmd" in inst.usable and "totalrecall" in inst.usable
