// @ts-check
// lib/cli.js: `openclaw memory search|status`, on a fake of commander's program
// (support/program.js) and a fake daemon (support/daemon.js). JSON on stdout, the error on
// stderr and exit code 1. The real OpenClaw runs the command in tests/openclaw/.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, afterEach, before, test } from "node:test";
import { indexLines, registerMemoryCli } from "../lib/cli.js";
import { CODES } from "../lib/codes.js";
import { MemoryRouterPlugin } from "../lib/manager.js";
import { contextOf, envelope, fakeDaemon } from "./support/daemon.js";
import { FakeProgram } from "./support/program.js";
/** @import { FakeDaemon } from "./support/daemon.js" */

/** @type {string} */
let dir;
/** @type {FakeDaemon} */
let daemon;
/** @type {FakeProgram} */
let program;
// The command's stdout and stderr (the process's are the test runner's).
const streams = {
  stdout: { text: "", write: (/** @type {string} */ t) => (streams.stdout.text += t) },
  stderr: { text: "", write: (/** @type {string} */ t) => (streams.stderr.text += t) },
};

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "mr-cli-"));
  const state = path.join(dir, "state");
  fs.mkdirSync(state);
  const noop = () => {};
  const api = { pluginConfig: { stateDir: state, memoryRoot: dir, socket: path.join(state, "t.sock") }, config: {}, logger: {}, registerMemoryCapability: noop, registerTool: noop, registerCli: noop };
  const plugin = new MemoryRouterPlugin(api);
  const settings = plugin.settingsFor(undefined, "main");
  daemon = await fakeDaemon(/** @type {string} */ (settings.socket), {
    context: contextOf(settings),
    answer: (r) => {
      if (r.op === "stats") return { op: "stats", stats: { runtime: {} } };
      if (r.query === "broken") return envelope({ status: "error", error_code: CODES.CONFIG_INVALID, error_message: "router-config.json: bad", results: [] });
      return envelope(r.query === "none" ? { query_echo: r.query, results: [] } : { query_echo: r.query });
    },
  });
  program = new FakeProgram();
  registerMemoryCli(plugin, { program, config: {} }, streams);
});

after(async () => {
  await daemon.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

afterEach(() => {
  process.exitCode = 0;
});

/**
 * What a command wrote on stdout and stderr.
 * @param {() => Promise<void>} run
 */
async function output(run) {
  streams.stdout.text = "";
  streams.stderr.text = "";
  await run();
  return { stdout: streams.stdout.text, stderr: streams.stderr.text };
}

test("search --json prints the results and the routing", async () => {
  const { stdout } = await output(() => program.run(["memory", "search"], ["what did we decide"], { json: true, maxResults: "3", agent: "ops" }));
  const printed = JSON.parse(stdout);
  assert.equal(printed.results[0].path, "MEMORY.md");
  assert.equal(printed.routing.via, "daemon");
  assert.deepEqual([daemon.requests.at(-1)?.limit, daemon.requests.at(-1)?.scope], [3, { agent: "ops" }]);
  assert.ok(!process.exitCode, "exit code 0");
});

test("search --since/--until ask memory-router for that window", async () => {
  await output(() => program.run(["memory", "search"], ["what did we decide"], { json: true, since: "yesterday", until: "today" }));
  assert.deepEqual([daemon.requests.at(-1)?.since, daemon.requests.at(-1)?.until], ["yesterday", "today"]);
  assert.ok(!process.exitCode, "exit code 0");
});

test("search in text: score, path and lines, or that nothing matched and what was tried", async () => {
  const hit = await output(() => program.run(["memory", "search"], [], { query: "decision" }));
  assert.match(hit.stdout, /^rule 3 \(decision_recall\) -> totalrecall, success\n\n0\.800 MEMORY\.md:3-3\nwe chose Postgres\n$/);
  const none = await output(() => program.run(["memory", "search"], ["none"]));
  assert.equal(none.stdout, "No matches (rule decision_recall, tried totalrecall).\n");
});

test("a failed search: the message on stderr (and in the JSON), exit code 1", async () => {
  const { stdout, stderr } = await output(() => program.run(["memory", "search"], ["broken"], { json: true }));
  assert.equal(stderr, "memory-router: router-config.json: bad (CONFIG_INVALID)\n");
  assert.deepEqual(JSON.parse(stdout), { results: [], error: "memory-router: router-config.json: bad (CONFIG_INVALID)" });
  assert.equal(process.exitCode, 1);
});

test("no query, or a bad number: said, exit code 1", async () => {
  const { stderr } = await output(() => program.run(["memory", "search"], []));
  assert.match(stderr, /^memory search: give a query/);
  assert.equal(process.exitCode, 1);
  await assert.rejects(program.run(["memory", "search"], ["q"], { maxResults: "0" }), /--max-results must be a positive integer, got 0/);
  await assert.rejects(program.run(["memory", "search"], ["q"], { minScore: "high" }), /--min-score must be a number, got high/);
});

test("status --json is the manager's status; status in text names the transport and the socket", async () => {
  const json = JSON.parse((await output(() => program.run(["memory", "status"], [], { json: true }))).stdout);
  assert.equal(json.provider, "memory-router");
  assert.equal(json.custom.memoryRouter.agent, "main");
  const text = (await output(() => program.run(["memory", "status"], []))).stdout;
  assert.match(text, /^provider: {4}memory-router \(daemon\)\nmemory root: /);
  assert.match(text, /\nsocket: {6}.*t\.sock \(daemon pid \d+\)\n/);
});

test("index lines: per qmd collection, files pending and the last update; a refresh running or failed", () => {
  const index = {
    at: "now",
    backends: {
      qmd: { collections: { notes: { pending: 2, last_updated: "2026-01-01T00:00:00Z" }, docs: { error: "index.yml unreadable" } }, running: true, phase: "embed" },
      other: { collections: {}, failed: true, error: "qmd exited 1" },
    },
  };
  assert.deepEqual(indexLines(index), [
    "index:       qmd notes: 2 pending, updated 2026-01-01T00:00:00Z; docs: index.yml unreadable; refresh running (embed)",
    "index:       other no collection to follow; last refresh failed: qmd exited 1",
  ]);
  assert.deepEqual(indexLines(null), []);
});
