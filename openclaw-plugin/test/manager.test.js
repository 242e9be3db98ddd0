// @ts-check
// lib/manager.js and lib/tools.js: the memory capability's search manager and the agent's tools,
// over a RouterClient talking to a fake daemon (support/daemon.js) on the plugin's own socket.
// What each agent may read back, what a failure looks like to the Gateway and to the model.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { CODES } from "../lib/codes.js";
import { MemoryRouterPlugin, memoryRuntime } from "../lib/manager.js";
import { RouterError } from "../lib/router.js";
import { DEFAULTS } from "../lib/settings.js";
import { createGetTool, createSearchTool } from "../lib/tools.js";
import { contextOf, envelope, fakeDaemon } from "./support/daemon.js";
/** @import { HostApi } from "../lib/host.js" */
/** @import { FakeDaemon } from "./support/daemon.js" */

/** @type {string} */
let dir;
/** @type {string} */
let root;
/** @type {MemoryRouterPlugin} */
let plugin;
/** @type {FakeDaemon} */
let daemon;

// What the fake daemon answers, by query.
const HITS = {
  decision: [
    { content: "we chose Postgres", relevance: 0.9, source: "totalrecall", timestamp: null, path: "CLAUDE.local.md", line: 2 },
    { content: "the schema summary", relevance: 0.7, source: "lossless", timestamp: "t", summary_id: "sum_1" },
    { content: "deploy with make", relevance: 0.6, source: "qmd", timestamp: null, collection: "docs", path: "deploy.md" },
  ],
  // Calibrated relevance falls with rank: the evidence (0.08) sits under a strong first hit.
  tail: [
    { content: "we moved in May", relevance: 0.45, source: "lossless", timestamp: null, message_id: 1 },
    { content: "the evidence", relevance: 0.08, source: "lossless", timestamp: null, message_id: 2 },
    { content: "a neighbour", relevance: 0.3, source: "lossless", timestamp: null, message_id: 3 },
    { content: "small talk", relevance: 0.02, source: "lossless", timestamp: null, message_id: 4 },
  ],
};

/** What memory-router answers (memory_router/core/trim.py): an answer whose best hit is under
 * min_relevance abstains; one that reaches it is whole; max_chars is left to the real one.
 * @param {Record<string, any>} request @param {any[]} hits */
function answerOf(request, hits) {
  const best = Math.max(...hits.map((h) => h.relevance));
  if (hits.length && typeof request.min_relevance === "number" && best < request.min_relevance) {
    const abstained = { min_relevance: request.min_relevance, best, dropped: hits.length };
    return envelope({ query_echo: request.query, results: [], result_count: 0, status: "empty", normalized_relevance: 0, abstained });
  }
  return envelope({ query_echo: request.query, results: hits, result_count: hits.length });
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "mr-manager-"));
  root = path.join(dir, "ws");
  const state = path.join(dir, "state");
  const docs = path.join(dir, "docs");
  for (const d of [path.join(root, "memory"), state, path.join(dir, "qmd"), docs]) fs.mkdirSync(d, { recursive: true });
  fs.writeFileSync(path.join(root, "MEMORY.md"), "# memory\nline 2\nline 3\n");
  fs.writeFileSync(path.join(root, "CLAUDE.local.md"), "# local\nwe chose Postgres\n");
  fs.writeFileSync(path.join(root, ".env"), "SECRET=1\n");
  fs.writeFileSync(path.join(root, "deploy.md"), "the workspace's own deploy.md\n");
  fs.writeFileSync(path.join(docs, "deploy.md"), "# deploy\ndeploy with make\n");
  // qmd's collections as memory-router's config and qmd's index.yml say (lib/collections.js).
  const config = path.join(state, "router-config.json");
  fs.writeFileSync(config, JSON.stringify({ backends: { qmd: { type: "qmd", config_dir: path.join(dir, "qmd") } } }));
  fs.writeFileSync(path.join(dir, "qmd", "index.yml"), `collections:\n  docs:\n    path: ${docs}\n`);
  /** @type {HostApi} */
  const api = {
    pluginConfig: { stateDir: state, memoryRoot: root, socket: path.join(state, "test.sock"), config },
    config: { agents: { list: [{ id: "alice", default: true }, { id: "bob" }] } },
    logger: {},
    registerMemoryCapability() {},
    registerTool() {},
    registerCli() {},
  };
  plugin = new MemoryRouterPlugin(api);
  const settings = plugin.settingsFor(undefined, "alice");
  daemon = await fakeDaemon(/** @type {string} */ (settings.socket), {
    context: contextOf(settings),
    answer: (r) => {
      if (r.op === "stats") return { op: "stats", stats: { runtime: { qmd: { refresh: { collections: { docs: { pending: 0 } } } } } } };
      if (r.query === "broken") return envelope({ status: "error", error_code: CODES.BACKENDS_JSON_MISSING, error_message: "no backends.json; run the installer", results: [] });
      if (r.since === "someday") return envelope({ status: "error", error_code: CODES.INVALID_TIME_RANGE, error_message: "since 'someday' cannot be read", results: [] });
      if (r.since) return envelope({ query_echo: r.query, results: HITS.decision.slice(0, 1), window: { since: `${r.since}T00:00:00+00:00` } });
      if (r.query === "nothing") return envelope({ query_echo: r.query, results: [], abstained: { min_relevance: 0.2, best: 0.1, dropped: 2 } });
      return answerOf(r, HITS[/** @type {keyof HITS} */ (r.query)] ?? []);
    },
  });
});

after(async () => {
  plugin.closeAll();
  await daemon.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const settingsOf = (/** @type {string} */ agent) => plugin.settingsFor(undefined, agent);

describe("search", () => {
  test("asks as the agent, with the plugin's floor unless the caller gives one, and maps the answer", async () => {
    const s = settingsOf("alice");
    const { results, via } = await plugin.search(s, "  decision ", { scope: { agent: "alice" }, maxChars: 500 });
    assert.equal(via, "daemon");
    assert.deepEqual(
      results.map((r) => r.path),
      ["CLAUDE.local.md", "memory-router/lossless/sum_1", "memory-router/qmd/docs/deploy.md"],
    );
    const request = daemon.requests.at(-1);
    assert.deepEqual([request?.query, request?.scope, request?.min_relevance, request?.max_chars, request?.limit], ["decision", { agent: "alice" }, DEFAULTS.minRelevance, 500, 10]);
    await plugin.search(s, "decision", { scope: { agent: "alice" }, minScore: 0.65, maxResults: 2 });
    assert.deepEqual([daemon.requests.at(-1)?.min_relevance, daemon.requests.at(-1)?.limit], [0.65, 2]);
    assert.equal(plugin.lastFor("alice")?.via, "daemon");
    assert.equal(plugin.lastFor("bob"), null);
  });

  test("without minScore the plugin's minRelevance judges the answer: every hit of one that reaches it", async () => {
    const s = settingsOf("alice");
    const { results, trim } = await plugin.search(s, "tail", { scope: { agent: "alice" } });
    assert.equal(daemon.requests.at(-1)?.min_relevance, DEFAULTS.minRelevance);
    assert.deepEqual(results.map((r) => r.score), [0.45, 0.08, 0.3, 0.02]); // the evidence at 0.08 stays
    assert.deepEqual(trim, {});
    const strict = { ...s, minRelevance: 0.5 }; // a configured floor above the best hit: abstain
    const none = await plugin.search(strict, "tail", { scope: { agent: "alice" } });
    assert.deepEqual([none.results, none.trim], [[], { abstained: { min_relevance: 0.5, best: 0.45, dropped: 4 } }]);
  });

  test("minScore keeps memory-core's meaning: each hit under it dropped, and what was dropped is said", async () => {
    const s = settingsOf("alice");
    const { results, trim } = await plugin.search(s, "tail", { scope: { agent: "alice" }, minScore: 0.25 });
    assert.equal(daemon.requests.at(-1)?.min_relevance, 0.25); // memory-router abstains when none reaches it
    assert.deepEqual(results.map((r) => r.score), [0.45, 0.3]); // the router's order, the weak ones gone
    assert.deepEqual(trim, { floor: { min_score: 0.25, dropped: 2 } });
    const none = await plugin.search(s, "tail", { scope: { agent: "alice" }, minScore: 0.6 });
    assert.deepEqual([none.results, none.trim], [[], { abstained: { min_relevance: 0.6, best: 0.45, dropped: 4 } }]);
    const all = await plugin.search(s, "tail", { scope: { agent: "alice" }, minScore: 0 });
    assert.deepEqual([all.results.length, all.trim], [4, {}]); // minScore 0: every hit, nothing said
  });

  test("with minScore the budget counts only the hits that passed it", async () => {
    const s = settingsOf("alice");
    // "we moved in May" (15) + "a neighbour" (11) = 26; the dropped "the evidence" (12) would have taken the room.
    const { results, trim } = await plugin.search(s, "tail", { scope: { agent: "alice" }, minScore: 0.25, maxChars: 26 });
    assert.equal("max_chars" in (daemon.requests.at(-1) ?? {}), false); // the plugin budgets after its own floor
    assert.deepEqual(results.map((r) => r.snippet), ["we moved in May", "a neighbour"]);
    assert.deepEqual(trim, { floor: { min_score: 0.25, dropped: 2 } }); // everything fit: no budget report
    const tight = await plugin.search(s, "tail", { scope: { agent: "alice" }, minScore: 0.25, maxChars: 20 });
    assert.deepEqual(tight.results.map((r) => r.snippet), ["we moved in May"]);
    assert.deepEqual(tight.trim.budget, { max_chars: 20, kept: 1, cut: 1, chars: 15, truncated: false });
  });

  test("an empty query is refused before anything is asked", async () => {
    const before = daemon.requests.length;
    await assert.rejects(plugin.search(settingsOf("alice"), "   "), { code: CODES.EMPTY_QUERY });
    await assert.rejects(plugin.search(settingsOf("alice"), undefined), { code: CODES.EMPTY_QUERY });
    assert.equal(daemon.requests.length, before);
  });

  test("memory-router's error is the rejection, with its code and message", async () => {
    await assert.rejects(plugin.search(settingsOf("alice"), "broken"), (err) => {
      assert.ok(err instanceof RouterError);
      assert.equal(err.code, CODES.BACKENDS_JSON_MISSING);
      assert.equal(err.message, "memory-router: no backends.json; run the installer (BACKENDS_JSON_MISSING)");
      return true;
    });
  });
});

describe("memory_get / readFile", () => {
  test("memory files are read, paged; other workspace files are refused before they are touched", async () => {
    const s = settingsOf("alice");
    const alice = { agent: "alice" };
    assert.deepEqual(await plugin.read(s, { relPath: "MEMORY.md", from: 2, lines: 1, scope: alice }), {
      status: "ok",
      path: "MEMORY.md",
      text: "line 2",
      from: 2,
      lines: 1,
      truncated: true,
      nextFrom: 3,
    });
    await assert.rejects(plugin.read(s, { relPath: ".env", scope: alice }), { code: CODES.MEMORY_PATH_NOT_ALLOWED });
    await assert.rejects(plugin.read(s, { relPath: "nothing-here.txt", scope: alice }), { code: CODES.MEMORY_PATH_NOT_ALLOWED });
    await assert.rejects(plugin.read(s, { relPath: "../state/router-config.json", scope: alice }), { code: CODES.PATH_OUTSIDE_ROOT });
    await assert.rejects(plugin.read(s, { relPath: path.join(root, "MEMORY.md"), scope: alice }), { code: CODES.INVALID_PATH });
    await assert.rejects(plugin.read(s, { relPath: "", scope: alice }), { code: CODES.INVALID_PATH });
    assert.deepEqual(await plugin.read(s, { relPath: "memory/none.md", scope: alice }), { status: "not_found", text: "", path: "memory/none.md" });
  });

  test("what a search returned is readable by the agent it was returned to, and by nobody else", async () => {
    const alice = { agent: "alice" };
    const bob = { agent: "bob" };
    await plugin.search(settingsOf("alice"), "decision", { scope: alice });
    const a = settingsOf("alice");
    const b = settingsOf("bob");
    assert.equal((await plugin.read(a, { relPath: "CLAUDE.local.md", scope: alice })).text, "# local\nwe chose Postgres\n");
    assert.equal((await plugin.read(a, { relPath: "memory-router/lossless/sum_1", scope: alice })).text, "the schema summary");
    await assert.rejects(plugin.read(b, { relPath: "CLAUDE.local.md", scope: bob }), { code: CODES.MEMORY_PATH_NOT_ALLOWED });
    assert.equal((await plugin.read(b, { relPath: "memory-router/lossless/sum_1", scope: bob })).status, "not_found");
  });

  test("a qmd hit is read from its collection's folder, not the workspace file of the same name", async () => {
    const alice = { agent: "alice" };
    await plugin.search(settingsOf("alice"), "decision", { scope: alice });
    const got = await plugin.read(settingsOf("alice"), { relPath: "memory-router/qmd/docs/deploy.md", scope: alice });
    assert.equal(got.text, "# deploy\ndeploy with make\n");
  });
});

describe("the tools", () => {
  test("memory_search answers with results and the routing, as text for the model and as details", async () => {
    const tool = createSearchTool(plugin, { agentId: "alice" });
    const out = await tool.execute("t1", { query: "decision" });
    const details = /** @type {any} */ (out.details);
    assert.equal(details.provider, "memory-router");
    assert.equal(details.results.length, 3);
    assert.equal(details.routing.via, "daemon");
    assert.equal(details.routing.routed_to, "totalrecall");
    assert.deepEqual(JSON.parse(out.content[0].text), details);
  });

  test("memory_search that abstains says why; one that fails is the unavailable payload, not a throw", async () => {
    const tool = createSearchTool(plugin, { agentId: "alice" });
    const none = /** @type {any} */ ((await tool.execute("t2", { query: "nothing" })).details);
    assert.deepEqual([none.results, none.abstained], [[], { min_relevance: 0.2, best: 0.1, dropped: 2 }]);
    assert.equal(none.disabled, undefined); // an answer, not an outage
    const some = /** @type {any} */ ((await tool.execute("t2b", { query: "tail", minScore: 0.25 })).details);
    assert.deepEqual([some.results.length, some.floor, some.abstained], [2, { min_score: 0.25, dropped: 2 }, undefined]);
    const failed = /** @type {any} */ ((await tool.execute("t3", { query: "broken" })).details);
    assert.deepEqual([failed.results, failed.disabled, failed.unavailable], [[], true, true]);
    assert.match(failed.error, /BACKENDS_JSON_MISSING/);
    assert.match(failed.action, /^Run: memory-router query --state-dir .*state "<query>"/);
  });

  test("memory_search's since/until reach memory-router, the payload says the window, a bad one is the caller's error", async () => {
    const tool = createSearchTool(plugin, { agentId: "alice" });
    const found = /** @type {any} */ ((await tool.execute("t6", { query: "decision", since: " 2026-11-30 ", until: "" })).details);
    const request = daemon.requests.at(-1);
    assert.deepEqual([request?.since, "until" in (request ?? {})], ["2026-11-30", false]);
    assert.deepEqual([found.results.length, found.window], [1, { since: "2026-11-30T00:00:00+00:00" }]);
    const bad = /** @type {any} */ ((await tool.execute("t7", { query: "decision", since: "someday" })).details);
    assert.deepEqual(bad, { results: [], error: "memory-router: since 'someday' cannot be read (INVALID_TIME_RANGE)", code: CODES.INVALID_TIME_RANGE });
  });

  test("memory_get's errors carry their code", async () => {
    const tool = createGetTool(plugin, { agentId: "bob" });
    const refused = /** @type {any} */ ((await tool.execute("t4", { path: ".env" })).details);
    assert.deepEqual([refused.status, refused.code, refused.text], ["error", CODES.MEMORY_PATH_NOT_ALLOWED, ""]);
    const nothing = /** @type {any} */ ((await tool.execute("t5", {})).details);
    assert.deepEqual([nothing.status, nothing.code], ["error", CODES.INVALID_PATH]);
  });
});

describe("the memory runtime", () => {
  test("a manager per call, for the agent asked for, with status for `openclaw status`", async () => {
    const runtime = memoryRuntime(plugin);
    const got = await runtime.getMemorySearchManager({ agentId: "bob", purpose: "default" });
    assert.ok(got.manager);
    const results = await got.manager.search("decision");
    assert.equal(results.length, 3);
    assert.equal(daemon.requests.at(-1)?.scope?.agent, "bob");
    await got.manager.loadIndexFreshness();
    const status = got.manager.status();
    assert.equal(status.provider, "memory-router");
    assert.equal(status.custom.memoryRouter.agent, "bob");
    assert.equal(status.custom.memoryRouter.transport, "daemon");
    assert.equal(status.custom.memoryRouter.lastQuery?.routed_to, "totalrecall");
    assert.deepEqual(status.custom.memoryRouter.index?.backends, { qmd: { collections: { docs: { pending: 0 } } } });
    await got.manager.close(); // the Gateway closes it after every search: the connection stays
    const again = await runtime.getMemorySearchManager({ agentId: "bob", purpose: "default" });
    await again.manager?.search("decision");
    assert.equal(again.manager?.status().custom.memoryRouter.transport, "daemon");
    assert.equal(again.manager?.status().custom.memoryRouter.connections, 1);
    const aborted = AbortSignal.abort(new Error("the caller gave up"));
    await assert.rejects(got.manager.search("decision", { signal: aborted }), /the caller gave up/);
  });
});
