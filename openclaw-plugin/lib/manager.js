// The memory capability: OpenClaw's MemorySearchManager over memory-router.
//
// The host asks `getMemorySearchManager` for a manager on every Gateway `memory.search` and
// closes it afterwards. Managers here are thin views over a RouterClient shared by the plugin
// instance, so getting and closing one costs no connection and no process.
import fs from "node:fs";
import path from "node:path";
import { HitCache, SYNTHETIC_PREFIX, excerpt, routingFacts, toSearchResults } from "./mapping.js";
import { RouterClient, RouterError } from "./router.js";
import { resolveSettings, settingsKey } from "./settings.js";

const DEFAULT_READ_LINES = 200; // a bounded excerpt when the caller gives no line count
const MAX_READ_BYTES = 4 << 20;

/** Per plugin instance: one RouterClient per distinct memory root / settings. */
export class MemoryRouterPlugin {
  constructor(api) {
    this.api = api;
    this.clients = new Map();
    this.cache = new HitCache();
    this.last = null; // routing facts of the latest answer, for status()
  }

  settingsFor(cfg, agentId) {
    return resolveSettings({ api: this.api, pluginConfig: this.api.pluginConfig, cfg: cfg ?? this.api.config, agentId });
  }

  clientFor(settings) {
    const key = settingsKey(settings);
    let client = this.clients.get(key);
    if (!client) {
      client = new RouterClient(settings, this.api.logger);
      this.clients.set(key, client);
    }
    return client;
  }

  manager(cfg, agentId, purpose) {
    const settings = this.settingsFor(cfg, agentId);
    return new MemoryRouterManager(this, settings, this.clientFor(settings), purpose);
  }

  /** Search, with the routing facts: the tools and the CLI show both. */
  async search(settings, query, { maxResults, minScore, timeoutMs } = {}) {
    const text = typeof query === "string" ? query.trim() : "";
    if (!text) throw new RouterError("query must be a non-empty string", "EMPTY_QUERY");
    const max = Number.isInteger(maxResults) && maxResults > 0 ? maxResults : settings.maxResults;
    const { envelope, via } = await this.clientFor(settings).query(text, { limit: max, timeoutMs });
    this.last = { ...routingFacts(envelope), via, at: new Date().toISOString() };
    if (envelope.status === "error") {
      // Every backend failed, or the setup is wrong: say so, with memory-router's own reason.
      throw new RouterError(
        `memory-router: ${envelope.error_message || "all backends failed"} (${envelope.error_code || "error"})`,
        envelope.error_code || "ALL_BACKENDS_FAILED",
      );
    }
    return { results: toSearchResults(envelope, { maxResults: max, minScore, cache: this.cache }), envelope, via };
  }

  /** readFile: a workspace file under the memory root, or a hit this plugin returned. */
  async read(settings, { relPath, from, lines }) {
    if (typeof relPath !== "string" || !relPath) throw new RouterError("path must be a non-empty string", "INVALID_PATH");
    const count = Number.isInteger(lines) && lines > 0 ? lines : DEFAULT_READ_LINES;
    const start = Number.isInteger(from) && from > 0 ? from : 1;
    const cached = this.cache.get(relPath);
    if (relPath.startsWith(SYNTHETIC_PREFIX)) {
      if (cached) return excerpt(cached.text, relPath, start, count);
      return { status: "not_found", text: "", path: relPath };
    }
    const file = await this.#fileUnderRoot(settings.memoryRoot, relPath);
    if (file) {
      const text = await fs.promises.readFile(file, "utf8");
      return excerpt(text, relPath, start, count);
    }
    // A qmd hit whose collection lives outside the memory root: the text the router returned.
    if (cached) return excerpt(cached.text, relPath, start, count);
    return { status: "not_found", text: "", path: relPath };
  }

  async #fileUnderRoot(root, relPath) {
    if (path.isAbsolute(relPath)) throw new RouterError(`${relPath}: give a path relative to the memory root ${root}`, "INVALID_PATH");
    const outside = () => new RouterError(`${relPath} is outside the memory root ${root}; memory_get reads only memory files`, "PATH_OUTSIDE_ROOT");
    const lexical = path.resolve(root, relPath);
    if (lexical !== path.resolve(root) && !lexical.startsWith(path.resolve(root) + path.sep)) throw outside();
    let realRoot;
    try {
      realRoot = await fs.promises.realpath(root);
    } catch {
      return null;
    }
    let real;
    try {
      real = await fs.promises.realpath(path.join(realRoot, relPath));
    } catch {
      return null;
    }
    if (real !== realRoot && !real.startsWith(realRoot + path.sep)) throw outside(); // a symlink out of the root
    const st = await fs.promises.stat(real);
    if (!st.isFile()) return null;
    if (st.size > MAX_READ_BYTES) throw new RouterError(`${relPath} is ${st.size} bytes; memory_get reads files up to ${MAX_READ_BYTES}`, "FILE_TOO_LARGE");
    return real;
  }

  closeAll() {
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }
}

export class MemoryRouterManager {
  constructor(plugin, settings, client, purpose) {
    this.plugin = plugin;
    this.settings = settings;
    this.client = client;
    this.purpose = purpose;
  }

  async search(query, opts = {}) {
    if (opts.signal?.aborted) throw opts.signal.reason ?? new Error("aborted");
    const { results } = await this.plugin.search(this.settings, query, opts);
    return results;
  }

  async readFile(params) {
    return this.plugin.read(this.settings, params ?? {});
  }

  status() {
    const s = this.settings;
    return {
      backend: "builtin", // the only value the SDK's type allows; `custom` says what it is
      provider: "memory-router",
      workspaceDir: s.memoryRoot,
      dirty: false,
      sources: ["memory"],
      fts: { enabled: true, available: true },
      vector: { enabled: false, available: false },
      custom: {
        searchMode: "fts-only",
        memoryRouter: {
          command: s.command,
          stateDir: s.stateDir,
          memoryRoot: s.memoryRoot,
          config: s.config,
          ...this.client.describe(),
          lastQuery: this.plugin.last,
        },
      },
    };
  }

  // memory-router embeds nothing itself (qmd and Cognee do, behind it): no embedding provider here.
  async probeEmbeddingAvailability() {
    return { ok: false, error: "memory-router routes to its backends; it has no embedding provider of its own", checked: true };
  }

  async probeVectorAvailability() {
    return false;
  }

  /** Called by the Gateway after every search: the shared connection and daemon stay. */
  async close() {}
}

/** The `runtime` of registerMemoryCapability. */
export function memoryRuntime(plugin) {
  return {
    async getMemorySearchManager({ cfg, agentId, purpose }) {
      try {
        return { manager: plugin.manager(cfg, agentId, purpose), debug: { backend: "builtin", purpose } };
      } catch (err) {
        return { manager: null, error: `memory-router: ${err.message}` };
      }
    },
    resolveMemoryBackendConfig() {
      return { backend: "builtin" };
    },
    async closeMemorySearchManager() {
      // Per-agent managers hold nothing of their own.
    },
    async closeAllMemorySearchManagers() {
      plugin.closeAll();
    },
  };
}
