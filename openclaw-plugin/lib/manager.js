// @ts-check
// The memory capability: OpenClaw's MemorySearchManager over memory-router.
//
// The host asks `getMemorySearchManager` for a manager on every Gateway `memory.search` and
// closes it afterwards. Managers here are thin views over a RouterClient shared by the plugin
// instance, so getting and closing one costs no connection and no process.
import path from "node:path";
import { fileUnder, isMemoryPath, notAllowed, readRegular } from "./access.js";
import { CODES } from "./codes.js";
import { collectionRoot } from "./collections.js";
import { HitCache, SYNTHETIC_PREFIX, excerpt, routingFacts, toSearchResults, trimFacts } from "./mapping.js";
import { RouterClient, RouterError, errorFacts } from "./router.js";
import { effectiveConfig, isInteger, resolveScope, resolveSettings, settingsKey } from "./settings.js";
import { budgetHits, dropUnder } from "./trim.js";
/** @import { HostApi, HostConfig } from "./host.js" */
/** @import { CachedHit, Envelope, Excerpt, RoutingFacts, SearchResult } from "./mapping.js" */
/** @import { Scope, Settings } from "./settings.js" */
/** @import { Budget, HitFloor } from "./trim.js" */

/**
 * Why the host asks for a manager.
 * @typedef {"default" | "status" | "cli"} Purpose
 */

/**
 * OpenClaw's MemoryProviderStatus, as this plugin fills it: `custom` says what it is.
 * @typedef {object} MemoryStatus
 * @property {"builtin"} backend
 * @property {string} provider
 * @property {string} workspaceDir
 * @property {boolean} dirty
 * @property {"memory"[]} sources
 * @property {{enabled: boolean, available: boolean}} fts
 * @property {{enabled: boolean, available: boolean}} vector
 * @property {{searchMode: string, memoryRouter: Record<string, unknown> & ReturnType<RouterClient["describe"]> &
 *   {agent: string, lastQuery: LastQuery | null, index: IndexFacts | null}}} custom
 */

/**
 * The daemon's index freshness for one set of settings, when it was asked (null: no daemon).
 * @typedef {{at: string, backends: Record<string, Record<string, any>> | null}} IndexFacts
 */

/**
 * A search's options: memory-core's names (maxResults, minScore), the text budget, whose memory.
 * @typedef {object} SearchOptions
 * @property {number} [maxResults]
 * @property {number} [minScore]
 * @property {number} [maxChars]
 * @property {unknown} [since] only memory written from then on (memory_router/core/window.py's forms)
 * @property {unknown} [until] only memory written up to then
 * @property {number} [timeoutMs]
 * @property {Scope} [scope]
 * @property {AbortSignal} [signal]
 */

/**
 * What the floors and the budget left out of an answer, when they did: `abstained` (memory-router:
 * the best hit was under the floor), `floor` (the caller's minScore dropped hits one by one),
 * `budget` (the text budget cut hits).
 * @typedef {{abstained?: Envelope["abstained"], floor?: HitFloor, budget?: Budget}} TrimFacts
 */

/**
 * The latest routing facts of an agent, and how it was answered.
 * @typedef {RoutingFacts & {via: "daemon" | "exec", at: string}} LastQuery
 */

/**
 * readFile's answer: lines of a file or hit, or that there is none.
 * @typedef {Excerpt | {status: "not_found", text: "", path: string}} ReadResult
 */

const DEFAULT_READ_LINES = 200; // a bounded excerpt when the caller gives no line count
const INDEX_FACTS_MS = 10000; // a search refreshes status()'s index freshness at most this often

/** Per plugin instance: one RouterClient per distinct memory root / settings, and one hit cache
 * per agent (what memory_get may read back is what that agent was shown, never another's). */
export class MemoryRouterPlugin {
  /** @param {HostApi} api */
  constructor(api) {
    this.api = api;
    /** @type {Map<string, RouterClient>} */
    this.clients = new Map();
    /** @type {Map<string, HitCache>} agent id -> what it was shown */
    this.caches = new Map();
    /** @type {Map<string, LastQuery>} agent id -> routing facts of its latest answer, for status() */
    this.lastByAgent = new Map();
    /** @type {Map<string, IndexFacts>} settings key -> the daemon's index freshness, for status() */
    this.indexFacts = new Map();
  }

  /** Ask the daemon how fresh its indexes are (qmd: files pending, last update) and keep the
   * answer for status(), which the host calls synchronously. Never starts a daemon.
   * @param {Settings} settings
   * @returns {Promise<IndexFacts>} */
  async loadIndexFreshness(settings) {
    const backends = await this.clientFor(settings).indexFreshness();
    const facts = { at: new Date().toISOString(), backends };
    this.indexFacts.set(settingsKey(settings), facts);
    return facts;
  }

  /** The latest index freshness seen for `settings` (null before any).
   * @param {Settings} settings */
  indexFor(settings) {
    return this.indexFacts.get(settingsKey(settings)) ?? null;
  }

  /** The routing facts of `agent`'s latest answer (another agent's are not shown).
   * @param {string} agent */
  lastFor(agent) {
    return this.lastByAgent.get(agent) ?? null;
  }

  /** The asking agent and session (tool context, manager params or CLI --agent).
   * @param {HostConfig | undefined} cfg
   * @param {{agentId?: string, sessionKey?: string}} [who]
   * @returns {Scope} */
  scopeFor(cfg, { agentId, sessionKey } = {}) {
    return resolveScope({ agentId, sessionKey, cfg: cfg ?? this.api.config });
  }

  /** @param {string} agent */
  cacheFor(agent) {
    let cache = this.caches.get(agent);
    if (!cache) {
      cache = new HitCache();
      this.caches.set(agent, cache);
    }
    return cache;
  }

  /** @param {HostConfig | undefined} cfg @param {string} agentId @returns {Settings} */
  settingsFor(cfg, agentId) {
    return resolveSettings({ api: this.api, pluginConfig: this.api.pluginConfig, cfg: cfg ?? this.api.config, agentId });
  }

  /** @param {Settings} settings @returns {RouterClient} */
  clientFor(settings) {
    const key = settingsKey(settings);
    let client = this.clients.get(key);
    if (!client) {
      client = new RouterClient(settings, this.api.logger);
      this.clients.set(key, client);
    }
    return client;
  }

  /**
   * @param {HostConfig | undefined} cfg
   * @param {string} [agentId]
   * @param {Purpose} [purpose]
   * @param {string} [sessionKey]
   */
  manager(cfg, agentId, purpose, sessionKey) {
    const scope = this.scopeFor(cfg, { agentId, sessionKey });
    const settings = this.settingsFor(cfg, scope.agent);
    return new MemoryRouterManager(this, settings, this.clientFor(settings), purpose, scope);
  }

  /** Search as `scope`'s agent, with the routing facts: the tools and the CLI show both.
   * @param {Settings} settings
   * @param {unknown} query
   * @param {SearchOptions} [options]
   * @returns {Promise<{results: SearchResult[], envelope: Envelope, trim: TrimFacts, via: "daemon" | "exec"}>} */
  async search(settings, query, { maxResults, minScore, maxChars, since, until, timeoutMs, scope } = {}) {
    const text = typeof query === "string" ? query.trim() : "";
    if (!text) throw new RouterError("query must be a non-empty string", CODES.EMPTY_QUERY);
    const who = scope ?? this.scopeFor(undefined);
    const max = isInteger(maxResults, 1) ? maxResults : settings.maxResults;
    // Without minScore, the plugin's minRelevance is memory-router's floor on the answer: one whose
    // best hit is under it abstains, one that reaches it comes back whole. minScore keeps
    // memory-core's meaning, a floor on each hit: memory-router abstains when no hit reaches it,
    // then the hits under it are dropped here and the budget (maxChars) counts those left.
    const perHit = typeof minScore === "number";
    const floor = perHit ? minScore : settings.minRelevance;
    const budget = isInteger(maxChars, 1) ? maxChars : settings.maxChars;
    const { envelope: answer, via } = await this.clientFor(settings).query(text, {
      limit: max,
      timeoutMs,
      scope: who,
      minRelevance: floor,
      maxChars: perHit ? null : budget,
      // memory-router reads and checks them (INVALID_TIME_RANGE), relative to the query's time.
      since: typeof since === "string" && since.trim() ? since.trim() : undefined,
      until: typeof until === "string" && until.trim() ? until.trim() : undefined,
    });
    this.lastByAgent.set(who.agent, { ...routingFacts(answer), via, at: new Date().toISOString() });
    const seen = this.indexFor(settings);
    if (via === "daemon" && (!seen || Date.now() - Date.parse(seen.at) > INDEX_FACTS_MS)) {
      this.loadIndexFreshness(settings).catch(() => {}); // for the Gateway's status(): in the background
    }
    if (answer.status === "error") {
      // Every backend failed, or the setup is wrong: say so, with memory-router's own reason.
      throw new RouterError(
        `memory-router: ${answer.error_message || "all backends failed"} (${answer.error_code || "error"})`,
        answer.error_code || CODES.ALL_BACKENDS_FAILED,
      );
    }
    /** @type {TrimFacts} */
    const trim = trimFacts(answer);
    let envelope = answer;
    if (perHit) {
      const dropped = dropUnder(envelope, minScore);
      envelope = dropped.envelope;
      if (dropped.floor) trim.floor = dropped.floor;
      if (budget !== null) {
        const budgeted = budgetHits(envelope, budget);
        envelope = budgeted.envelope;
        if (budgeted.budget) trim.budget = budgeted.budget;
      }
    }
    return { results: toSearchResults(envelope, { maxResults: max, cache: this.cacheFor(who.agent) }), envelope, trim, via };
  }

  /**
   * readFile / memory_get as `scope`'s agent: memory-core's memory files under the agent's memory
   * root (MEMORY.md, USER.md, dreams.md, memory/**\/*.md), and the paths a search returned to this
   * agent: a Total Recall file (under the memory root), a qmd file (under its collection's
   * folder), a synthetic hit (its text). Anything else: MEMORY_PATH_NOT_ALLOWED.
   * @param {Settings} settings
   * @param {{relPath?: unknown, from?: unknown, lines?: unknown, scope?: Scope}} request
   * @returns {Promise<ReadResult>}
   */
  async read(settings, { relPath, from, lines, scope }) {
    if (typeof relPath !== "string" || !relPath) throw new RouterError("path must be a non-empty string", CODES.INVALID_PATH);
    const count = isInteger(lines, 1) ? lines : DEFAULT_READ_LINES;
    const start = isInteger(from, 1) ? from : 1;
    const who = scope ?? this.scopeFor(undefined);
    const cached = this.cacheFor(who.agent).get(relPath);
    /** @type {ReadResult} */
    const notFound = { status: "not_found", text: "", path: relPath };
    if (relPath.startsWith(SYNTHETIC_PREFIX)) {
      if (!cached) return notFound; // never shown to this agent (or older than its cache)
      if (cached.kind === "collection") return this.#readCollectionFile(settings, cached, relPath, start, count);
      return excerpt(cached.text, relPath, start, count);
    }
    const shown = cached?.kind === "workspace";
    // An absolute path or `..` out of the root: refused as such (fileUnder throws), first.
    const lexical = path.resolve(settings.memoryRoot, relPath);
    if (path.isAbsolute(relPath) || !lexical.startsWith(path.resolve(settings.memoryRoot) + path.sep)) {
      await fileUnder(settings.memoryRoot, relPath);
    }
    // Before the file is touched: whether a non-memory file exists, or how large, is not told.
    if (!isMemoryPath(relPath) && !shown) throw notAllowed(relPath, "not a memory file, and no search returned it to this agent");
    const file = await fileUnder(settings.memoryRoot, relPath);
    if (!file) return notFound;
    const text = await readRegular(file);
    return text === null ? notFound : excerpt(text, relPath, start, count);
  }

  /** A qmd hit: the file in its collection's folder; the hit's own text when that folder is not
   * known here (qmd's index.yml unreadable) or the file is gone.
   * @param {Settings} settings
   * @param {CachedHit} cached
   * @param {string} relPath
   * @param {number} start
   * @param {number} count
   * @returns {Promise<Excerpt>} */
  async #readCollectionFile(settings, cached, relPath, start, count) {
    const client = this.clientFor(settings);
    const configFile = client.daemon?.context?.config ?? effectiveConfig(settings);
    const root = cached.collection ? collectionRoot(configFile, cached.backend, cached.collection, settings.env) : null;
    if (root && cached.relPath) {
      const file = await fileUnder(root, cached.relPath, `qmd collection ${cached.collection}`);
      const text = file ? await readRegular(file) : null;
      if (text !== null) return excerpt(text, relPath, start, count);
    }
    return excerpt(cached.text, relPath, start, count);
  }

  closeAll() {
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }
}

/** OpenClaw's MemorySearchManager for one agent: a view over the plugin's shared RouterClient. */
export class MemoryRouterManager {
  /**
   * @param {MemoryRouterPlugin} plugin
   * @param {Settings} settings
   * @param {RouterClient} client
   * @param {Purpose | undefined} purpose
   * @param {Scope} scope
   */
  constructor(plugin, settings, client, purpose, scope) {
    this.plugin = plugin;
    this.settings = settings;
    this.client = client;
    this.purpose = purpose;
    this.scope = scope; // the agent the host asked this manager for
  }

  /** @param {unknown} query @param {SearchOptions} [opts] @returns {Promise<SearchResult[]>} */
  async search(query, opts = {}) {
    if (opts.signal?.aborted) throw opts.signal.reason ?? new Error("aborted");
    const { results } = await this.plugin.search(this.settings, query, { ...opts, scope: this.scope });
    return results;
  }

  /** @param {{relPath?: unknown, from?: unknown, lines?: unknown}} [params] */
  async readFile(params) {
    return this.plugin.read(this.settings, { ...(params ?? {}), scope: this.scope });
  }

  /** Load the daemon's index freshness for status() (the `memory status` command awaits it). */
  async loadIndexFreshness() {
    return this.plugin.loadIndexFreshness(this.settings);
  }

  /** @returns {MemoryStatus} */
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
          agent: this.scope.agent,
          lastQuery: this.plugin.lastFor(this.scope.agent),
          index: this.plugin.indexFor(s), // per backend: qmd's files pending and last update, per collection
        },
      },
    };
  }

  // memory-router embeds nothing itself (qmd and Cognee do, behind it): no embedding provider here.
  /** @returns {Promise<{ok: boolean, error?: string, checked?: boolean}>} */
  async probeEmbeddingAvailability() {
    return { ok: false, error: "memory-router routes to its backends; it has no embedding provider of its own", checked: true };
  }

  async probeVectorAvailability() {
    return false;
  }

  /** Called by the Gateway after every search: the shared connection and daemon stay. */
  async close() {}
}

/**
 * The `runtime` of registerMemoryCapability (OpenClaw's MemoryPluginRuntime).
 * @typedef {object} MemoryRuntime
 * @property {(params: {cfg?: HostConfig, agentId?: string, purpose?: Purpose, sessionKey?: string}) =>
 *   Promise<{manager: MemoryRouterManager, debug: {backend: "builtin", purpose?: Purpose}} | {manager: null, error: string}>} getMemorySearchManager
 * @property {() => {backend: "builtin"}} resolveMemoryBackendConfig
 * @property {() => Promise<void>} closeMemorySearchManager
 * @property {() => Promise<void>} closeAllMemorySearchManagers
 */

/** The `runtime` of registerMemoryCapability.
 * @param {MemoryRouterPlugin} plugin
 * @returns {MemoryRuntime} */
export function memoryRuntime(plugin) {
  return {
    async getMemorySearchManager({ cfg, agentId, purpose, sessionKey }) {
      try {
        return { manager: plugin.manager(cfg, agentId, purpose, sessionKey), debug: { backend: "builtin", purpose } };
      } catch (err) {
        return { manager: null, error: `memory-router: ${errorFacts(err).message}` };
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
