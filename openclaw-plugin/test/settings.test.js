// @ts-check
// lib/settings.js: what memory-router is told (state dir, memory root, config), resolved as
// OpenClaw resolves its own paths, and who asks (the scope).
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import {
  DEFAULTS,
  agentOfSessionKey,
  defaultAgentId,
  effectiveConfig,
  expandHome,
  isInteger,
  resolveScope,
  resolveSettings,
  settingsKey,
} from "../lib/settings.js";
/** @import { HostApi } from "../lib/host.js" */

const ENV = { HOME: "/home/u", PATH: "/usr/bin" };

/**
 * A host API with OpenClaw's two path helpers (an older host may lack them).
 * @param {{stateDir?: string, workspace?: (agentId: string) => string}} helpers
 * @returns {HostApi}
 */
function host({ stateDir, workspace }) {
  const noop = () => {};
  return {
    runtime: {
      state: stateDir ? { resolveStateDir: () => stateDir } : {},
      agent: workspace ? { resolveAgentWorkspaceDir: (_cfg, agentId) => workspace(agentId) } : {},
    },
    registerMemoryCapability: noop,
    registerTool: noop,
    registerCli: noop,
  };
}

describe("resolveSettings", () => {
  test("defaults: OpenClaw's root/state and the agent's workspace as OpenClaw resolves them", () => {
    const api = host({ stateDir: "/srv/oc", workspace: (id) => `/srv/oc/workspace-${id}` });
    const s = resolveSettings({ api, cfg: {}, agentId: "alice", env: ENV });
    assert.deepEqual(s, {
      command: "memory-router",
      stateDir: "/srv/oc/state",
      socket: null,
      memoryRoot: "/srv/oc/workspace-alice",
      config: null,
      timeoutMs: DEFAULTS.timeoutMs,
      maxResults: DEFAULTS.maxResults,
      minRelevance: DEFAULTS.minRelevance,
      maxChars: null,
      env: { ...ENV, OPENCLAW_REPO_ROOT: "/srv/oc/workspace-alice" },
    });
  });

  test("an older host: OPENCLAW_STATE_DIR, else ~/.openclaw; agents.defaults.workspace, else <root>/workspace", () => {
    const api = host({});
    assert.equal(resolveSettings({ api, env: ENV }).stateDir, "/home/u/.openclaw/state");
    assert.equal(resolveSettings({ api, env: ENV }).memoryRoot, "/home/u/.openclaw/workspace");
    const env = { ...ENV, OPENCLAW_STATE_DIR: "~/profiles/dev" };
    assert.equal(resolveSettings({ api, env }).stateDir, "/home/u/profiles/dev/state");
    const cfg = { agents: { defaults: { workspace: "~/notes" } } };
    assert.equal(resolveSettings({ api, cfg, env: ENV }).memoryRoot, "/home/u/notes");
  });

  test("the plugin's config wins, `~` expanded, paths made absolute", () => {
    const pluginConfig = { command: "~/bin/memory-router", stateDir: "~/mr", memoryRoot: "/ws", config: "~/mr/rc.json", socket: "~/s.sock" };
    const s = resolveSettings({ api: host({ stateDir: "/srv/oc" }), pluginConfig, env: ENV });
    assert.deepEqual(
      [s.command, s.stateDir, s.memoryRoot, s.config, s.socket],
      ["/home/u/bin/memory-router", "/home/u/mr", "/ws", "/home/u/mr/rc.json", "/home/u/s.sock"],
    );
    assert.equal(s.env.OPENCLAW_REPO_ROOT, "/ws");
  });

  test("numbers the schema would refuse fall back to the defaults", () => {
    const pluginConfig = /** @type {any} */ ({ timeoutMs: 2.5, maxResults: "7", minRelevance: "0.4", maxChars: 300 });
    const s = resolveSettings({ api: host({}), pluginConfig, env: ENV });
    assert.deepEqual([s.timeoutMs, s.maxResults, s.minRelevance, s.maxChars], [5000, 10, DEFAULTS.minRelevance, 300]);
    const off = resolveSettings({ api: host({}), pluginConfig: { minRelevance: 0 }, env: ENV });
    assert.equal(off.minRelevance, 0); // 0 turns the floor off; it is not "unset"
  });

  test("the manifest's config schema gives the host the same defaults the plugin applies", () => {
    const manifest = JSON.parse(fs.readFileSync(new URL("../openclaw.plugin.json", import.meta.url), "utf8"));
    const schema = manifest.configSchema.properties;
    for (const key of /** @type {const} */ (["timeoutMs", "maxResults", "minRelevance"])) {
      assert.equal(schema[key].default, DEFAULTS[key], `openclaw.plugin.json's ${key} default`);
    }
    assert.equal(schema.maxChars.default, undefined); // no budget unless asked
    assert.match(manifest.uiHints.minRelevance.help, new RegExp(`Default ${DEFAULTS.minRelevance};`));
  });

  test("settings that can share a daemon have one key", () => {
    const api = host({ stateDir: "/srv/oc", workspace: (id) => `/ws/${id}` });
    const a = resolveSettings({ api, cfg: {}, agentId: "a", env: ENV });
    assert.equal(settingsKey(a), settingsKey(resolveSettings({ api, cfg: {}, agentId: "a", env: { ...ENV, X: "1" } })));
    assert.notEqual(settingsKey(a), settingsKey(resolveSettings({ api, cfg: {}, agentId: "b", env: ENV })));
  });
});

describe("the router-config.json a daemon reads (memory-router's precedence)", () => {
  const base = { ...resolveSettings({ api: host({}), pluginConfig: { stateDir: "/st", memoryRoot: "/ws" }, env: ENV }) };

  test("the plugin's config, else $MEMORY_ROUTER_CONFIG (relative to the memory root), else the state dir's, else the packaged one", () => {
    assert.equal(effectiveConfig({ ...base, config: "/etc/rc.json" }, () => true), "/etc/rc.json");
    assert.equal(effectiveConfig({ ...base, env: { ...base.env, MEMORY_ROUTER_CONFIG: "rc/x.json" } }, () => true), "/ws/rc/x.json");
    assert.equal(effectiveConfig({ ...base, env: { ...base.env, MEMORY_ROUTER_CONFIG: "  " } }, () => true), "/st/router-config.json");
    assert.equal(effectiveConfig(base, () => false), null);
  });

  test("the state dir's file counts only when it is a file", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mr-settings-"));
    try {
      const s = { ...base, stateDir: dir };
      assert.equal(effectiveConfig(s), null);
      fs.mkdirSync(path.join(dir, "router-config.json"));
      assert.equal(effectiveConfig(s), null);
      fs.rmdirSync(path.join(dir, "router-config.json"));
      fs.writeFileSync(path.join(dir, "router-config.json"), "{}");
      assert.equal(effectiveConfig(s), path.join(dir, "router-config.json"));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("who asks", () => {
  test("the tool context's agent, else its session key's, else the default agent", () => {
    assert.deepEqual(resolveScope({ agentId: " Alice ", sessionKey: "agent:alice:main" }), { agent: "alice", session_key: "agent:alice:main" });
    assert.deepEqual(resolveScope({ sessionKey: "agent:bob:telegram:42" }), { agent: "bob", session_key: "agent:bob:telegram:42" });
    assert.deepEqual(resolveScope({ cfg: { agents: { list: [{ id: "x" }, { id: "Ops", default: true }] } } }), { agent: "ops" });
  });

  test("a session key names an agent only in OpenClaw's form", () => {
    assert.equal(agentOfSessionKey("agent:alice:main"), "alice");
    assert.equal(agentOfSessionKey("agent:../x:main"), null);
    assert.equal(agentOfSessionKey("main"), null);
    assert.equal(agentOfSessionKey(7), null);
  });

  test("the default agent: the one marked default, the only one, main, the first; main when none", () => {
    assert.equal(defaultAgentId({ agents: { list: [{ id: "a" }, { id: "b", default: true }] } }), "b");
    assert.equal(defaultAgentId({ agents: { list: [{ id: "Solo" }] } }), "solo");
    assert.equal(defaultAgentId({ agents: { list: [{ id: "a" }, { id: "main" }] } }), "main");
    assert.equal(defaultAgentId({ agents: { list: [{ id: "a" }, { id: "b" }] } }), "a");
    assert.equal(defaultAgentId({ agents: { entries: { ops: { default: true }, dev: null } } }), "ops");
    assert.equal(defaultAgentId(undefined), "main");
  });
});

test("`~` is expanded as Python's expanduser does, nothing else", () => {
  assert.equal(expandHome("~", ENV), "/home/u");
  assert.equal(expandHome("~/x", ENV), "/home/u/x");
  assert.equal(expandHome("~other/x", ENV), "~other/x");
  assert.equal(expandHome("a/~/b", ENV), "a/~/b");
});

test("an integer is a whole number, at least the minimum given", () => {
  assert.deepEqual(
    [3, 0, -1, 2.5, "3", null, undefined, Number.NaN].map((v) => isInteger(v, 1)),
    [true, false, false, false, false, false, false, false],
  );
  assert.equal(isInteger(-1), true);
});
