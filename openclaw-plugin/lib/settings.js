// @ts-check
// The plugin's settings, resolved once per memory root: what memory-router is told explicitly.
//
// Inside the Gateway OPENCLAW_STATE_DIR is unset and the working directory is the Gateway's, so a
// memory-router started from here would guess its state dir and memory root wrongly. The plugin
// resolves both itself and passes them as flags and environment that memory-router reads today:
// `--state-dir` (memory_router/config/paths.py) and OPENCLAW_REPO_ROOT plus the working directory (Total
// Recall's root, backends/totalrecall/adapter.py).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
/** @import { HostApi, HostConfig } from "./host.js" */

/**
 * The plugin's config as the host hands it over (api.pluginConfig), validated by the host against
 * openclaw.plugin.json's configSchema.
 * @typedef {object} PluginConfig
 * @property {string} [command]
 * @property {string} [socket]
 * @property {string} [stateDir]
 * @property {string} [memoryRoot]
 * @property {string} [config]
 * @property {number} [timeoutMs]
 * @property {number} [maxResults]
 * @property {number} [minRelevance]
 * @property {number} [maxChars]
 */

/**
 * Everything a query needs: what memory-router is told, resolved once per memory root.
 * @typedef {object} Settings
 * @property {string} command the memory-router executable
 * @property {string} stateDir --state-dir
 * @property {string | null} socket the daemon's socket when configured (else <stateDir>/router.sock)
 * @property {string} memoryRoot OPENCLAW_REPO_ROOT and the working directory
 * @property {string | null} config --config when configured
 * @property {number} timeoutMs per-backend timeout
 * @property {number} maxResults results when the caller gives none
 * @property {number} minRelevance the floor on the answer when the caller gives no minScore
 * @property {number | null} maxChars the text budget when the caller gives none
 * @property {Record<string, string | undefined>} env the environment of every memory-router started
 */

/**
 * Whose memory a query reads (memory-router's `scope`).
 * @typedef {{agent: string, session_key?: string}} Scope
 */

// minRelevance 0.18, memory-router's floor on the answer (one whose best hit is under it abstains):
// the highest that keeps the answerable questions' evidence recall@10 within a point of no floor's
// on both development benches (bench/abstention.py; docs/abstention.md: 0.14 until Total Recall's
// note excerpts raised the notes' relevance). maxChars null: no budget unless asked.
export const DEFAULTS = Object.freeze({
  command: "memory-router",
  timeoutMs: 5000,
  maxResults: 10,
  minRelevance: 0.18,
  maxChars: null,
});

/** Whether `value` is a whole number of at least `min` (the settings, a caller's arguments and an
 * envelope are JSON: any value may come).
 * @param {unknown} value
 * @param {number} [min]
 * @returns {value is number} */
export function isInteger(value, min = -Infinity) {
  return Number.isInteger(value) && /** @type {number} */ (value) >= min;
}

/** `~` and `~/x` expanded the way Python's os.path.expanduser does for the current user.
 * @param {string} p
 * @param {Record<string, string | undefined>} [env]
 * @returns {string} */
export function expandHome(p, env = process.env) {
  if (p === "~" || p.startsWith("~/")) return path.join(env.HOME || os.homedir(), p.slice(1));
  return p;
}

/** @param {string} p @param {Record<string, string | undefined>} env */
function absolute(p, env) {
  return path.resolve(expandHome(p, env));
}

/** OpenClaw's own root (`~/.openclaw`, or what OPENCLAW_STATE_DIR / --profile say).
 * @param {HostApi | undefined} api
 * @param {Record<string, string | undefined>} env */
function openclawRoot(api, env) {
  try {
    const dir = api?.runtime?.state?.resolveStateDir?.(env);
    if (typeof dir === "string" && dir) return dir;
  } catch {
    // an older host without the helper: fall through to OpenClaw's documented default
  }
  return env.OPENCLAW_STATE_DIR ? absolute(env.OPENCLAW_STATE_DIR, env) : path.join(env.HOME || os.homedir(), ".openclaw");
}

/** The agent workspace, resolved as OpenClaw resolves it (agents.list[].workspace,
 * agents.defaults.workspace, else <root>/workspace).
 * @param {HostApi | undefined} api
 * @param {HostConfig | undefined} cfg
 * @param {string | undefined} agentId
 * @param {Record<string, string | undefined>} env */
function agentWorkspace(api, cfg, agentId, env) {
  try {
    const dir = cfg && api?.runtime?.agent?.resolveAgentWorkspaceDir?.(cfg, agentId ?? "main", env);
    if (typeof dir === "string" && dir) return absolute(dir, env);
  } catch {
    // fall through
  }
  const configured = cfg?.agents?.defaults?.workspace;
  if (typeof configured === "string" && configured) return absolute(configured, env);
  return path.join(openclawRoot(api, env), "workspace");
}

/**
 * Everything a query needs, from the plugin config (api.pluginConfig, validated by the host
 * against openclaw.plugin.json's configSchema) and OpenClaw's config.
 * @param {{api?: HostApi, pluginConfig?: PluginConfig, cfg?: HostConfig, agentId?: string,
 *   env?: Record<string, string | undefined>}} params
 * @returns {Settings}
 */
export function resolveSettings({ api, pluginConfig, cfg, agentId, env = process.env }) {
  const pc = pluginConfig ?? {};
  const stateDir = pc.stateDir ? absolute(pc.stateDir, env) : path.join(openclawRoot(api, env), "state");
  const memoryRoot = pc.memoryRoot ? absolute(pc.memoryRoot, env) : agentWorkspace(api, cfg, agentId, env);
  // The environment of every memory-router this plugin starts (daemon or exec fallback): the
  // host's, plus the memory root. OPENCLAW_STATE_DIR, when the host has it (a --profile), is
  // OpenClaw's root and is left as it is: lossless reads lcm.db from there.
  const childEnv = { ...env, OPENCLAW_REPO_ROOT: memoryRoot };
  return {
    command: pc.command ? expandHome(pc.command, env) : DEFAULTS.command,
    stateDir,
    socket: pc.socket ? absolute(pc.socket, env) : null,
    memoryRoot,
    config: pc.config ? absolute(pc.config, env) : null,
    timeoutMs: isInteger(pc.timeoutMs) ? pc.timeoutMs : DEFAULTS.timeoutMs,
    maxResults: isInteger(pc.maxResults) ? pc.maxResults : DEFAULTS.maxResults,
    minRelevance: typeof pc.minRelevance === "number" ? pc.minRelevance : DEFAULTS.minRelevance,
    maxChars: isInteger(pc.maxChars) ? pc.maxChars : DEFAULTS.maxChars,
    env: childEnv,
  };
}

/** A key equal for settings that can share one daemon connection.
 * @param {Settings} s */
export function settingsKey(s) {
  return JSON.stringify([s.command, s.stateDir, s.socket, s.memoryRoot, s.config]);
}

const AGENT_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/i; // OpenClaw's VALID_ID_RE

/** The agent of an OpenClaw session key (`agent:<id>:...`), or null.
 * @param {unknown} key
 * @returns {string | null} */
export function agentOfSessionKey(key) {
  if (typeof key !== "string") return null;
  const m = /^agent:([^:]+):/i.exec(key.trim());
  return m && AGENT_ID.test(m[1]) ? m[1].toLowerCase() : null;
}

/** OpenClaw's default agent: the `default: true` entry of the roster, else its first, else "main".
 * The roster is `agents.list[]`, or `agents.entries` (keyed by id) as OpenClaw 2026.9 stores it.
 * @param {HostConfig | undefined} cfg
 * @returns {string} */
export function defaultAgentId(cfg) {
  const agents = cfg?.agents;
  let list = Array.isArray(agents?.list) ? agents.list : [];
  if (!list.length && agents?.entries && typeof agents.entries === "object") {
    list = Object.entries(agents.entries).map(([id, entry]) => ({ ...(entry ?? {}), id }));
  }
  list = list.filter((a) => a && typeof a.id === "string" && a.id.trim());
  const chosen = (list.find((a) => a.default) ?? (list.length === 1 ? list[0] : list.find((a) => a.id === "main")) ?? list[0])?.id;
  return typeof chosen === "string" ? chosen.trim().toLowerCase() : "main";
}

/**
 * Who asks: the tool context's agentId, else the agent its session key names, else the default
 * agent; with the session key when there is one. Every query carries it to memory-router as its
 * `scope`, and the hit cache memory_get reads from is this agent's own.
 * @param {{agentId?: unknown, sessionKey?: unknown, cfg?: HostConfig}} who
 * @returns {Scope}
 */
export function resolveScope({ agentId, sessionKey, cfg }) {
  const given = typeof agentId === "string" && agentId.trim() ? agentId.trim().toLowerCase() : null;
  const agent = given ?? agentOfSessionKey(sessionKey) ?? defaultAgentId(cfg);
  const key = typeof sessionKey === "string" && sessionKey.trim() ? sessionKey.trim() : null;
  return key ? { agent, session_key: key } : { agent };
}

/** The router-config.json a memory-router started with `settings` reads (docs/configuration.md):
 * `--config`, $MEMORY_ROUTER_CONFIG, `<state dir>/router-config.json` when it exists, else the
 * packaged one (null here: only the Python package knows its path).
 * @param {Settings} settings
 * @param {(file: string) => boolean} [exists]
 * @returns {string | null} */
export function effectiveConfig(settings, exists = (p) => fs.statSync(p, { throwIfNoEntry: false })?.isFile() === true) {
  if (settings.config) return settings.config;
  const fromEnv = settings.env.MEMORY_ROUTER_CONFIG?.trim();
  if (fromEnv) return path.resolve(settings.memoryRoot, expandHome(fromEnv, settings.env));
  const inState = path.join(settings.stateDir, "router-config.json");
  return exists(inState) ? inState : null;
}
