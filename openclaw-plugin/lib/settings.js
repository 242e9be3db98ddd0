// The plugin's settings, resolved once per memory root: what memory-router is told explicitly.
//
// Inside the Gateway OPENCLAW_STATE_DIR is unset and the working directory is the Gateway's, so a
// memory-router started from here would guess its state dir and memory root wrongly. The plugin
// resolves both itself and passes them as flags and environment that memory-router reads today:
// `--state-dir` (memory_router/config/paths.py) and OPENCLAW_REPO_ROOT plus the working directory (Total
// Recall's root, backends/totalrecall/adapter.py).
import os from "node:os";
import path from "node:path";

export const DEFAULTS = Object.freeze({ command: "memory-router", timeoutMs: 5000, maxResults: 10 });

/** `~` and `~/x` expanded the way Python's os.path.expanduser does for the current user. */
export function expandHome(p, env = process.env) {
  if (p === "~" || p.startsWith("~/")) return path.join(env.HOME || os.homedir(), p.slice(1));
  return p;
}

function absolute(p, env) {
  return path.resolve(expandHome(p, env));
}

/** OpenClaw's own root (`~/.openclaw`, or what OPENCLAW_STATE_DIR / --profile say). */
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
 * agents.defaults.workspace, else <root>/workspace). */
function agentWorkspace(api, cfg, agentId, env) {
  try {
    const dir = api?.runtime?.agent?.resolveAgentWorkspaceDir?.(cfg, agentId ?? "main", env);
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
 * @returns {{command: string, stateDir: string, socket: string|null, memoryRoot: string,
 *   config: string|null, timeoutMs: number, maxResults: number, env: Record<string,string>}}
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
    timeoutMs: Number.isInteger(pc.timeoutMs) ? pc.timeoutMs : DEFAULTS.timeoutMs,
    maxResults: Number.isInteger(pc.maxResults) ? pc.maxResults : DEFAULTS.maxResults,
    env: childEnv,
  };
}

/** A key equal for settings that can share one daemon connection. */
export function settingsKey(s) {
  return JSON.stringify([s.command, s.stateDir, s.socket, s.memoryRoot, s.config]);
}
