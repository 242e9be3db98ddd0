"""`memory-router openclaw install` / `uninstall`'s step planner (memory_router.cli.openclaw_plan):
given openclaw.json and what is on disk, which steps run, with which argument lists. What
--dry-run prints is this plan; an installed state plans nothing (a second install changes nothing)."""

from __future__ import annotations

import json
from typing import Any

from memory_router.cli.openclaw_plan import (
    MEMORY_MASK,
    InstallState,
    InstallStep,
    QmdState,
    UninstallState,
    plan_install,
    plan_uninstall,
)

OC = ("/usr/local/bin/openclaw",)
SETTINGS = {"command": "/home/u/.local/bin/memory-router", "stateDir": "/home/u/.openclaw/state"}
QMD_ADD = ("qmd", "collection", "add", "--name", "openclaw-main-memory", "--mask", MEMORY_MASK, "--", "/w")
INSTALLED: dict[str, Any] = {
    "plugins": {
        "slots": {"memory": "memory-router"},
        "entries": {"memory-router": {"enabled": True, "config": dict(SETTINGS)}, "memory-core": {"enabled": False}},
    }
}


def fresh(**changes: Any) -> InstallState:
    state = InstallState(
        openclaw=OC,
        config=None,
        plugin_source="/site-packages/memory_router/openclaw_plugin",
        plugin_current=False,
        plugin_settings=SETTINGS,
        record_path="/home/u/.openclaw/state/openclaw-install.json",
        record=None,
        agent="main",
        workspace="/w",
        workspace_exists=False,
        backends_json="/home/u/.openclaw/state/backends.json",
        backends_json_exists=False,
        qmd=QmdState("openclaw-main-memory", False, QMD_ADD),
        router_config_path="/home/u/.openclaw/state/router-config.json",
        router_config={"rules": []},
    )
    return state.replace(**changes)


def installed(**changes: Any) -> InstallState:
    done = fresh(
        config=INSTALLED,
        plugin_current=True,
        record={"previous": {"slot": None, "memory_core_enabled": None}},
        workspace_exists=True,
        backends_json_exists=True,
        qmd=QmdState("openclaw-main-memory", True, QMD_ADD),
        router_config_path=None,
        router_config=None,
    )
    return done.replace(**changes)


def ids(steps: list[InstallStep]) -> list[str]:
    return [s.id for s in steps]


def batch(step: InstallStep) -> dict[str, Any]:
    """The `config set --batch-json` operations of a step, by path."""
    assert step.argv is not None and step.argv[: len(OC) + 4] == (*OC, "config", "set", "--strict-json", "--batch-json")
    return {op["path"]: op["value"] for op in json.loads(step.argv[-1])}


def test_a_fresh_openclaw_gets_every_step_in_order() -> None:
    steps = plan_install(fresh())
    assert ids(steps) == ["record", "plugin", "configure", "workspace", "router-config", "qmd-collection", "backends"]
    plugin = steps[1]
    assert plugin.argv == (*OC, "plugins", "install", "--force", "--accept-capabilities", fresh().plugin_source)
    # `plugins install` selects the slot and enables the plugin: configure only does the rest.
    assert batch(steps[2]) == {
        "plugins.entries.memory-core.enabled": False,
        "plugins.entries.memory-router.config.command": SETTINGS["command"],
        "plugins.entries.memory-router.config.stateDir": SETTINGS["stateDir"],
    }
    assert steps[0].payload == {"previous": {"slot": None, "memory_core_enabled": None}}
    assert steps[5].argv == QMD_ADD


def test_an_installed_openclaw_plans_nothing() -> None:
    assert plan_install(installed()) == []


def test_a_slot_taken_back_by_hand_is_selected_again_without_reinstalling_the_plugin() -> None:
    config = json.loads(json.dumps(INSTALLED))
    config["plugins"]["slots"]["memory"] = "memory-core"
    config["plugins"]["entries"]["memory-core"]["enabled"] = True
    config["plugins"]["entries"]["memory-router"]["config"]["command"] = "/old/memory-router"
    steps = plan_install(installed(config=config))
    assert ids(steps) == ["configure"]
    assert batch(steps[0]) == {
        "plugins.slots.memory": "memory-router",
        "plugins.entries.memory-core.enabled": False,
        "plugins.entries.memory-router.config.command": SETTINGS["command"],
    }


def test_a_changed_plugin_is_copied_again_and_nothing_else_runs() -> None:
    assert ids(plan_install(installed(plugin_current=False))) == ["plugin"]


def test_the_record_keeps_what_install_found() -> None:
    config = {"plugins": {"slots": {"memory": "other-memory"}, "entries": {"memory-core": {"enabled": True}}}}
    (record, *_) = plan_install(fresh(config=config))
    assert record.payload == {"previous": {"slot": "other-memory", "memory_core_enabled": True}}
    # Installed by hand before (the slot is already ours): uninstall gives OpenClaw's defaults back.
    (record, *_) = plan_install(installed(record=None))
    assert record.id == "record" and record.payload == {"previous": {"slot": None, "memory_core_enabled": None}}


def test_backends_json_is_kept_unless_forced_and_qmd_is_skipped_when_absent() -> None:
    assert ids(plan_install(installed(force=True))) == ["backends"]
    assert "qmd-collection" not in ids(plan_install(fresh(qmd=None, router_config_path=None, router_config=None)))


def uninstall(**changes: Any) -> UninstallState:
    state = UninstallState(
        openclaw=OC,
        config=INSTALLED,
        plugin_present=True,
        record_path="/home/u/.openclaw/state/openclaw-install.json",
        record={"previous": {"slot": None, "memory_core_enabled": None}},
    )
    return state.replace(**changes)


def test_uninstall_removes_the_plugin_and_gives_memory_core_back() -> None:
    steps = plan_uninstall(uninstall())
    assert ids(steps) == ["plugin", "forget", "memory-core", "record"]
    assert steps[0].argv == (*OC, "plugins", "uninstall", "memory-router", "--force")
    assert steps[1].argv == (*OC, "config", "unset", "plugins.entries.memory-router")
    assert steps[2].argv == (*OC, "config", "unset", "plugins.entries.memory-core.enabled")
    assert steps[1].unset and steps[2].unset  # skipped at run time when already gone
    assert steps[3].path and steps[3].payload is None


def test_uninstall_restores_a_recorded_slot_and_memory_core_setting() -> None:
    record = {"previous": {"slot": "other-memory", "memory_core_enabled": False}}
    steps = plan_uninstall(uninstall(record=record))
    assert ids(steps) == ["plugin", "forget", "slot", "record"]  # memory-core was off before: it stays off
    assert batch(steps[2]) == {"plugins.slots.memory": "other-memory"}
    record = {"previous": {"slot": None, "memory_core_enabled": True}}
    steps = plan_uninstall(uninstall(record=record))
    assert batch(steps[2]) == {"plugins.entries.memory-core.enabled": True}


def test_uninstall_where_it_was_never_installed_plans_nothing() -> None:
    config = {"plugins": {"entries": {"memory-core": {"enabled": False}}}}  # the user's own choice
    assert plan_uninstall(uninstall(config=config, plugin_present=False, record=None)) == []
    assert plan_uninstall(uninstall(config=None, plugin_present=False, record=None)) == []


def test_every_program_step_is_an_argument_list() -> None:
    for steps in (plan_install(fresh()), plan_uninstall(uninstall())):
        for step in steps:
            assert (step.argv is None) != (step.path is None) or step.id == "record"
            if step.argv is not None:
                assert all(isinstance(a, str) for a in step.argv)
                assert step.as_dict()["argv"] == list(step.argv)
