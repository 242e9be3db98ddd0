// @ts-check
// `openclaw memory search|status`, answered by memory-router (the plugin provides the `memory`
// command; memory-core must be disabled for a copied install's command to win).
//
// JSON goes out through process.stdout.write: console.log would reach stderr through
// OpenClaw's secret redaction, which rewrites text.
import { routingFacts } from "./mapping.js";
import { errorFacts } from "./router.js";
/** @import { CliContext } from "./host.js" */
/** @import { IndexFacts, MemoryRouterPlugin } from "./manager.js" */

/**
 * Where the command writes: the process's streams (a test gives its own).
 * @typedef {{stdout: {write(text: string): unknown}, stderr: {write(text: string): unknown}}} Streams
 */

/** @param {string} name @returns {(value: string) => number} */
function positiveInt(name) {
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${value}`);
    return n;
  };
}

/** @param {string} name @returns {(value: string) => number} */
function number(name) {
  return (value) => {
    const n = Number(value);
    if (!Number.isFinite(n)) throw new Error(`${name} must be a number, got ${value}`);
    return n;
  };
}


/** The `memory` command and its `search` and `status` subcommands, on OpenClaw's program.
 * @param {MemoryRouterPlugin} plugin
 * @param {CliContext} ctx
 * @param {Streams} [streams] */
export function registerMemoryCli(plugin, { program, config }, streams = process) {
  /** @param {unknown} value */
  const writeJson = (value) => streams.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  /** An error: on stderr (and as JSON with --json), exit code 1.
   * @param {string} message @param {boolean | undefined} json */
  const fail = (message, json) => {
    if (json) writeJson({ results: [], error: message });
    streams.stderr.write(`${message}\n`);
    process.exitCode = 1;
  };

  const memory = program.command("memory").description("Search memory through memory-router, and show its status");

  memory
    .command("search")
    .description("Search memory through memory-router")
    .argument("[query]", "Search query")
    .option("--query <text>", "Search query (alternative to the positional argument)")
    .option("--agent <id>", "Agent id (default: the default agent)")
    .option("--max-results <n>", "Max results", positiveInt("--max-results"))
    .option("--min-score <n>", "Minimum score (relevance 0..1)", number("--min-score"))
    .option("--since <when>", "Only memory written from then on (2026-11-30, yesterday, last week, 3 days ago)")
    .option("--until <when>", "Only memory written up to then (same forms)")
    .option("--json", "Print JSON")
    .action(async (/** @type {string | undefined} */ queryArg, /** @type {{query?: string, agent?: string, maxResults?: number, minScore?: number, since?: string, until?: string, json?: boolean}} */ opts) => {
      const query = (opts.query ?? queryArg ?? "").trim();
      if (!query) return fail("memory search: give a query (openclaw memory search \"what did we decide\")", opts.json);
      try {
        const scope = plugin.scopeFor(config, { agentId: opts.agent });
        const settings = plugin.settingsFor(config, scope.agent);
        const { maxResults, minScore, since, until } = opts;
        const { results, envelope, trim, via } = await plugin.search(settings, query, { maxResults, minScore, since, until, scope });
        if (opts.json) {
          writeJson({ results, routing: { ...routingFacts(envelope), via }, ...trim, ...(envelope.window ? { window: envelope.window } : {}) });
        } else if (!results.length) {
          const why = trim.abstained ? `; the best hit, ${trim.abstained.best.toFixed(3)}, is under the floor ${trim.abstained.min_relevance}` : "";
          streams.stdout.write(`No matches (rule ${envelope.rule?.id ?? "?"}, tried ${(envelope.fallback_chain ?? []).join(" -> ")}${why}).\n`);
        } else {
          const lines = [`rule ${envelope.rule?.number} (${envelope.rule?.id}) -> ${envelope.routed_to}, ${envelope.status}`, ""];
          for (const r of results) lines.push(`${r.score.toFixed(3)} ${r.path}:${r.startLine}-${r.endLine}`, r.snippet, "");
          streams.stdout.write(`${lines.join("\n").trim()}\n`);
        }
      } catch (err) {
        fail(errorFacts(err).message, opts.json);
      } finally {
        plugin.closeAll();
      }
    });

  memory
    .command("status")
    .description("Show memory-router's settings, daemon and latest routing")
    .option("--agent <id>", "Agent id (default: the default agent)")
    .option("--json", "Print JSON")
    .option("--deep", "Also run a probe query through memory-router")
    .action(async (/** @type {{agent?: string, json?: boolean, deep?: boolean}} */ opts) => {
      try {
        const manager = plugin.manager(config, opts.agent, "status");
        if (opts.deep) await manager.search("status probe", { maxResults: 1 }).catch((err) => fail(errorFacts(err).message, false));
        await manager.loadIndexFreshness();
        const status = manager.status();
        if (opts.json) writeJson(status);
        else {
          const m = status.custom.memoryRouter;
          streams.stdout.write(
            [
              `provider:    memory-router (${m.transport}${m.fallbackReason ? `: ${m.fallbackReason}` : ""})`,
              `memory root: ${m.memoryRoot}`,
              `state dir:   ${m.stateDir}`,
              `socket:      ${m.socket}${m.daemonPid ? ` (daemon pid ${m.daemonPid})` : m.socketPresent ? " (present)" : " (no daemon yet: the first search starts one)"}`,
              `command:     ${m.command}`,
              ...indexLines(m.index),
            ].join("\n") + "\n",
          );
        }
      } catch (err) {
        fail(errorFacts(err).message, opts.json);
      } finally {
        plugin.closeAll();
      }
    });
}

/** `index:` lines for `memory status`: per qmd collection, files pending and the last update.
 * @param {IndexFacts | null} index
 * @returns {string[]} */
export function indexLines(index) {
  /** @type {string[]} */
  const lines = [];
  for (const [backend, r] of Object.entries(index?.backends ?? {})) {
    const parts = Object.entries(r?.collections ?? {}).map(([name, c]) =>
      c?.error
        ? `${name}: ${c.error}`
        : `${name}: ${c?.pending ?? "?"} pending, ${c?.last_updated ? `updated ${c.last_updated}` : "never updated by memory-router"}`,
    );
    let text = parts.join("; ") || "no collection to follow";
    if (r?.running) text += `; refresh running (${r.phase ?? "qmd"})`;
    else if (r?.waiting_for_lock) text += "; refresh waiting for the index lock";
    if (r?.failed) text += `; last refresh failed: ${r.error}`;
    lines.push(`index:       ${backend} ${text}`);
  }
  return lines;
}
