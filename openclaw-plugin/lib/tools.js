// @ts-check
// The agent's memory_search and memory_get tools, answered by memory-router.
//
// Payloads follow memory-core's tools (same parameter names; results, or the unavailable shape
// {results: [], disabled, unavailable, error, warning, action} that OpenClaw's agents are told to
// report), plus `routing`: which rule matched and which backend answered.
import { CODES } from "./codes.js";
import { routingFacts } from "./mapping.js";
import { errorFacts } from "./router.js";
/** @import { HostConfig, Tool, ToolContext, ToolResult } from "./host.js" */
/** @import { MemoryRouterPlugin } from "./manager.js" */

/** @param {Record<string, unknown>} payload @returns {ToolResult} */
function jsonResult(payload) {
  return { content: [{ type: "text", text: JSON.stringify(payload, null, 2) }], details: payload };
}

const SEARCH_PARAMETERS = {
  type: "object",
  properties: {
    query: { type: "string", description: "What to recall: a question, a symbol, a file path, a decision." },
    maxResults: { type: "integer", minimum: 1, description: "Maximum hits (default: the plugin's maxResults)." },
    minScore: {
      type: "number",
      minimum: 0,
      maximum: 1,
      description:
        "Drop each hit whose relevance (0..1) is below this; `floor` says how many were dropped, and with none " +
        "left the answer is empty and `abstained` says why. Without it, the plugin's minRelevance judges the " +
        "answer: when even its best hit is below it the answer is empty (`abstained`), otherwise every hit comes back.",
    },
    maxChars: {
      type: "integer",
      minimum: 1,
      maximum: 10000000,
      description:
        "Budget of the hits' total text (characters): hits are kept whole, best first, while they fit " +
        "(a first hit alone larger is cut to it); `budget` says what was cut (default: the plugin's maxChars, none).",
    },
    since: {
      type: "string",
      description:
        "Only memory written from then on: an ISO date (2026-11-30) or date and time, or today, yesterday, " +
        "last week, last month, N days ago (a date is its whole day). Undated memory is left out; `window` " +
        "says what was applied.",
    },
    until: {
      type: "string",
      description: "Only memory written up to then (same forms; until a date includes that day).",
    },
  },
  required: ["query"],
  additionalProperties: false,
};

const GET_PARAMETERS = {
  type: "object",
  properties: {
    path: { type: "string", description: "A path memory_search returned." },
    from: { type: "integer", minimum: 1, description: "First line (1-based)." },
    lines: { type: "integer", minimum: 1, description: "Number of lines." },
  },
  required: ["path"],
  additionalProperties: false,
};

/** The agent (and session) a tool call is made for: OpenClaw's tool context carries agentId and
 * sessionKey (memory-core reads the same two).
 * @param {MemoryRouterPlugin} plugin
 * @param {ToolContext | undefined} ctx */
function scopeOf(plugin, ctx) {
  return plugin.scopeFor(configOf(ctx), { agentId: ctx?.agentId, sessionKey: ctx?.sessionKey });
}

/** The host's current config, as memory-core reads it from a tool context.
 * @param {ToolContext | undefined} ctx
 * @returns {HostConfig | undefined} */
function configOf(ctx) {
  return ctx?.getRuntimeConfig?.() ?? ctx?.runtimeConfig ?? ctx?.config;
}

/** memory_search for the agent of `ctx`.
 * @param {MemoryRouterPlugin} plugin
 * @param {ToolContext} [ctx]
 * @returns {Tool} */
export function createSearchTool(plugin, ctx) {
  return {
    name: "memory_search",
    label: "Memory Search",
    description:
      "Mandatory recall step: search memory (working memory, decision registers, daily logs, code and docs, " +
      "past conversation summaries, relationships) before answering questions about prior work, decisions, " +
      "dates, people, preferences or todos. memory-router picks the backend for the kind of question. " +
      "Use memory_get on a returned path to read more. If the response has disabled=true, tell the user and " +
      "include the warning and action.",
    parameters: SEARCH_PARAMETERS,
    async execute(_toolCallId, params) {
      const scope = scopeOf(plugin, ctx);
      const settings = plugin.settingsFor(configOf(ctx), scope.agent);
      try {
        const { results, envelope, trim, via } = await plugin.search(settings, params?.query, {
          maxResults: params?.maxResults,
          minScore: params?.minScore,
          maxChars: params?.maxChars,
          since: params?.since,
          until: params?.until,
          scope,
        });
        return jsonResult({
          results,
          provider: "memory-router",
          mode: "routed",
          routing: { ...routingFacts(envelope), via },
          ...trim,
          ...(envelope.window ? { window: envelope.window } : {}),
        });
      } catch (err) {
        const { message, code } = errorFacts(err);
        // A since/until memory-router cannot read is the caller's to fix, not memory being down.
        if (code === CODES.INVALID_TIME_RANGE) return jsonResult({ results: [], error: message, code });
        return jsonResult({
          results: [],
          disabled: true,
          unavailable: true,
          error: message,
          warning: "Memory search through memory-router is unavailable.",
          action: `Run: memory-router query --state-dir ${settings.stateDir} "<query>" to see why, then retry memory_search.`,
          ...(plugin.lastFor(scope.agent) ? { routing: plugin.lastFor(scope.agent) } : {}),
        });
      }
    },
  };
}

/** memory_get for the agent of `ctx`.
 * @param {MemoryRouterPlugin} plugin
 * @param {ToolContext} [ctx]
 * @returns {Tool} */
export function createGetTool(plugin, ctx) {
  return {
    name: "memory_get",
    label: "Memory Get",
    description:
      "Safe exact excerpt read from memory files (MEMORY.md, USER.md, dreams.md, Markdown files under memory/) " +
      "and the paths memory_search returned to this agent (a workspace file, a qmd collection file, or a " +
      "memory-router/<backend>/<id> hit such as a conversation summary). Defaults to a bounded excerpt; " +
      "status=ok means read, status=not_found means no such memory, status=error means the read failed or the path " +
      "is not one memory_get may read (code MEMORY_PATH_NOT_ALLOWED).",
    parameters: GET_PARAMETERS,
    async execute(_toolCallId, params) {
      const scope = scopeOf(plugin, ctx);
      const settings = plugin.settingsFor(configOf(ctx), scope.agent);
      try {
        return jsonResult(await plugin.read(settings, { relPath: params?.path, from: params?.from, lines: params?.lines, scope }));
      } catch (err) {
        const { code, message } = errorFacts(err);
        return jsonResult({ path: params?.path ?? "", text: "", status: "error", code: code ?? CODES.MEMORY_READ_FAILED, error: message });
      }
    },
  };
}
