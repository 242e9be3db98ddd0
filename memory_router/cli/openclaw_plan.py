"""The steps of ``memory-router openclaw install`` / ``uninstall``, decided from what is there.

Pure: given OpenClaw's ``openclaw.json`` (parsed), whether the copied plugin matches the bundled
one, memory-router's state dir and the agent's qmd collection, :func:`plan_install` and
:func:`plan_uninstall` say which steps are needed, each with the argument list it runs. Nothing
here reads a file or starts a program (:mod:`.openclaw_setup` gathers the state and runs the
steps), so the same plan is what ``--dry-run`` prints and what a real run does; a state that is
already installed plans no step, which is what makes a second install change nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from memory_router.core.frozen import Frozen

PLUGIN_ID = "memory-router"
MEMORY_CORE = "memory-core"
SLOT = "plugins.slots.memory"
RECORD_NAME = "openclaw-install.json"  # in memory-router's state dir: what install found, for uninstall
# The agent's memory files as memory-core reads them (and the plugin's memory_get allows).
MEMORY_MASK = "{MEMORY.md,memory.md,USER.md,dreams.md,memory/**/*.md}"


class InstallStep(Frozen):
    """One change. ``argv``: the program it runs (an argument list, never a shell line), ``None``
    for a file memory-router writes itself (``path``); ``payload``: what is written."""

    id: str
    what: str
    argv: tuple[str, ...] | None = None
    path: str | None = None
    payload: Any = None
    # For `config unset`: skipped at run time when the key is already gone (OpenClaw exits 1 then).
    unset: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "what": self.what}
        if self.argv is not None:
            out["argv"] = list(self.argv)
        if self.path is not None:
            out["path"] = self.path
        return out


class QmdState(Frozen):
    """The agent's qmd collection: ``argv`` creates it (shown by --dry-run)."""

    collection: str
    exists: bool
    argv: tuple[str, ...]


class InstallState(Frozen):
    openclaw: tuple[str, ...]  # how to run OpenClaw's CLI
    config: Mapping[str, Any] | None  # openclaw.json, None when there is none yet
    plugin_source: str  # the bundled plugin folder
    plugin_current: bool  # OpenClaw's copy holds exactly the bundled files
    plugin_settings: Mapping[str, Any]  # plugins.entries.memory-router.config keys install sets
    record_path: str
    record: Mapping[str, Any] | None  # a previous install's record
    agent: str
    workspace: str
    workspace_exists: bool
    backends_json: str
    backends_json_exists: bool
    force: bool = False
    qmd: QmdState | None = None  # None: qmd is not installed (or not configured)
    router_config_path: str | None = None  # where install may write router-config.json (none there yet)
    router_config: Mapping[str, Any] | None = None  # its content (the packaged one plus the collection)
    notes: tuple[str, ...] = ()


class UninstallState(Frozen):
    openclaw: tuple[str, ...]
    config: Mapping[str, Any] | None
    plugin_present: bool  # OpenClaw's extensions folder holds the plugin
    record_path: str
    record: Mapping[str, Any] | None


def _get(data: Mapping[str, Any] | None, dotted: str) -> Any:
    node: Any = data
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def entry(config: Mapping[str, Any] | None, plugin: str, key: str) -> Any:
    """``plugins.entries.<plugin>.<key>`` (plugin ids hold dashes, not dots)."""
    entries = _get(config, "plugins.entries")
    node = entries.get(plugin) if isinstance(entries, Mapping) else None
    return node.get(key) if isinstance(node, Mapping) else None


def previous(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """What install changes, as it was before: the memory slot and memory-core's ``enabled``
    (``None``: not set, OpenClaw's default, i.e. memory-core holds the slot and is enabled). A slot
    already ours (installed by hand) counts as unset, so uninstall gives memory-core back."""
    slot = _get(config, SLOT)
    if slot == PLUGIN_ID:
        return {"slot": None, "memory_core_enabled": None}
    core = entry(config, MEMORY_CORE, "enabled")
    return {"slot": slot if isinstance(slot, str) else None, "memory_core_enabled": core}


def _config_set(openclaw: tuple[str, ...], ops: list[dict[str, Any]]) -> tuple[str, ...]:
    return (*openclaw, "config", "set", "--strict-json", "--batch-json", json.dumps(ops))


def _settings_ops(s: InstallState, after_plugin_install: bool) -> list[dict[str, Any]]:
    """The openclaw.json keys that differ from an installed state (after `plugins install`, which
    selects the slot and enables the plugin itself)."""
    ops: list[dict[str, Any]] = []
    slot = PLUGIN_ID if after_plugin_install else _get(s.config, SLOT)
    enabled = True if after_plugin_install else entry(s.config, PLUGIN_ID, "enabled")
    if slot != PLUGIN_ID:
        ops.append({"path": SLOT, "value": PLUGIN_ID})
    if enabled is not True:
        ops.append({"path": f"plugins.entries.{PLUGIN_ID}.enabled", "value": True})
    # memory-core stays loaded without the slot and registers memory_search first: off.
    if entry(s.config, MEMORY_CORE, "enabled") is not False:
        ops.append({"path": f"plugins.entries.{MEMORY_CORE}.enabled", "value": False})
    current = entry(s.config, PLUGIN_ID, "config")
    current = current if isinstance(current, Mapping) else {}
    for key, value in s.plugin_settings.items():
        if current.get(key) != value:
            ops.append({"path": f"plugins.entries.{PLUGIN_ID}.config.{key}", "value": value})
    return ops


def plan_install(s: InstallState) -> list[InstallStep]:
    """The steps that bring ``s`` to an installed state, in order; ``[]`` when it is installed."""
    steps: list[InstallStep] = []
    if s.record is None:
        before = previous(s.config)
        steps.append(
            InstallStep(
                "record",
                f"remember the memory slot ({before['slot'] or 'unset: memory-core'}) and memory-core's "
                f"enabled ({'unset' if before['memory_core_enabled'] is None else before['memory_core_enabled']}) "
                "for uninstall",
                path=s.record_path,
                payload={"previous": before},
            )
        )
    if not s.plugin_current:
        argv = (*s.openclaw, "plugins", "install", "--force", "--accept-capabilities", s.plugin_source)
        steps.append(InstallStep("plugin", "copy the plugin into OpenClaw (selects the memory slot)", argv=argv))
    ops = _settings_ops(s, after_plugin_install=not s.plugin_current)
    if ops:
        keys = ", ".join(f"{op['path']}={json.dumps(op['value'])}" for op in ops)
        steps.append(InstallStep("configure", f"set {keys}", argv=_config_set(s.openclaw, ops)))
    if not s.workspace_exists:
        steps.append(
            InstallStep("workspace", f"create agent {s.agent}'s workspace (the plugin's memory root)", path=s.workspace)
        )
    if s.router_config_path is not None and s.router_config is not None:
        steps.append(
            InstallStep(
                "router-config",
                "write router-config.json: the packaged rules, qmd searching the agent's collection",
                path=s.router_config_path,
                payload=s.router_config,
            )
        )
    if s.qmd is not None and not s.qmd.exists:
        steps.append(
            InstallStep(
                "qmd-collection",
                f"index agent {s.agent}'s memory files as qmd collection {s.qmd.collection}",
                argv=s.qmd.argv,
            )
        )
    if s.force or not s.backends_json_exists:
        steps.append(
            InstallStep(
                "backends", "write backends.json from the probes (as `memory-router init`)", path=s.backends_json
            )
        )
    return steps


def plan_uninstall(s: UninstallState) -> list[InstallStep]:
    """The steps that give OpenClaw's memory back to what install found (memory-core when it
    found OpenClaw's defaults); ``[]`` when memory-router is not installed."""
    steps: list[InstallStep] = []
    ours = _get(s.config, SLOT) == PLUGIN_ID or entry(s.config, PLUGIN_ID, "enabled") is not None
    if not (s.plugin_present or ours or s.record is not None):
        return steps  # never installed here: memory-core's settings are the user's own
    if s.plugin_present or ours:
        # OpenClaw's own uninstall removes the copy, its install record and settings, and resets
        # the slot to memory-core; it leaves `plugins.entries.memory-router.enabled: false` behind.
        argv = (*s.openclaw, "plugins", "uninstall", PLUGIN_ID, "--force")
        steps.append(
            InstallStep("plugin", "remove the plugin from OpenClaw (the slot goes back to memory-core)", argv=argv)
        )
        unset = f"plugins.entries.{PLUGIN_ID}"
        steps.append(
            InstallStep(
                "forget", f"drop what is left of {unset}", argv=(*s.openclaw, "config", "unset", unset), unset=unset
            )
        )
    before = _mapping(_mapping(s.record).get("previous"))
    slot = before.get("slot")
    if isinstance(slot, str) and slot not in (PLUGIN_ID, MEMORY_CORE):
        steps.append(
            InstallStep("slot", f"give the memory slot back to {slot}", argv=_config_set(s.openclaw, [_op(SLOT, slot)]))
        )
    core_was = before.get("memory_core_enabled")
    core_now = entry(s.config, MEMORY_CORE, "enabled")
    core_key = f"plugins.entries.{MEMORY_CORE}.enabled"
    if isinstance(core_was, bool) and core_now != core_was:
        steps.append(
            InstallStep(
                "memory-core",
                f"set {core_key}={json.dumps(core_was)} again",
                argv=_config_set(s.openclaw, [_op(core_key, core_was)]),
            )
        )
    elif core_was is None and core_now is not None:
        steps.append(
            InstallStep(
                "memory-core",
                f"unset {core_key} (memory-core enabled, OpenClaw's default)",
                argv=(*s.openclaw, "config", "unset", core_key),
                unset=core_key,
            )
        )
    if s.record is not None:
        steps.append(InstallStep("record", "delete install's record", path=s.record_path))
    return steps


def _op(path: str, value: Any) -> dict[str, Any]:
    return {"path": path, "value": value}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
