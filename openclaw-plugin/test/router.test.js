// @ts-check
// lib/router.js: one memory-router behind one set of settings. The warm daemon over its socket
// (a fake one here, support/daemon.js, answering hello as the real one does), started when none
// answers, and `memory-router query` (a fake command, support/fake-memory-router.js) when the
// socket cannot be used. The real memory-router answers the same client in tests/openclaw/.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, afterEach, before, describe, test } from "node:test";
import { CODES } from "../lib/codes.js";
import { PLUGIN_VERSION, RouterClient, RouterError, errorFacts, lockHolder, retryCodes, serveMessage } from "../lib/router.js";
import { HELLO, contextOf, envelope, fakeCommand, fakeDaemon } from "./support/daemon.js";
/** @import { Settings } from "../lib/settings.js" */
/** @import { FakeDaemon } from "./support/daemon.js" */

/** @type {string} */
let dir;
/** @type {string} */
let command;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "mr-router-"));
  command = fakeCommand(dir);
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** @type {(() => unknown)[]} */
const cleanups = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

let n = 0;
/**
 * Settings of a fresh memory root and state dir, the fake memory-router as the command.
 * @param {Partial<Settings>} [over]
 * @returns {Settings}
 */
function settings(over = {}) {
  const root = path.join(dir, `case-${++n}`);
  const stateDir = path.join(root, "state");
  fs.mkdirSync(stateDir, { recursive: true });
  const env = { PATH: process.env.PATH, HOME: root, OPENCLAW_REPO_ROOT: root };
  return { command, stateDir, socket: null, memoryRoot: root, config: null, timeoutMs: 5000, maxResults: 10, minRelevance: 0.2, maxChars: null, env, ...over };
}

/**
 * The settings with a socket of their own (the plugin's `socket` setting).
 * @param {Settings} s
 */
function explicit(s) {
  return { ...s, socket: path.join(s.stateDir, "explicit.sock") };
}

/**
 * A client that is closed (and whose daemon is stopped) after the test.
 * @param {Settings} s
 */
function client(s) {
  /** @type {string[]} */
  const warnings = [];
  const c = new RouterClient(s, { info() {}, warn: (m) => warnings.push(m) });
  cleanups.push(() => {
    const pid = c.daemon?.pid;
    c.close();
    if (pid && pid !== process.pid) {
      try {
        process.kill(pid, "SIGTERM");
      } catch {
        // gone already
      }
    }
  });
  return Object.assign(c, { warnings });
}

/**
 * A fake daemon on `socketPath` serving `s`'s context (or the one given), stopped after the test.
 * @param {string} socketPath
 * @param {Settings} s
 * @param {Partial<Parameters<typeof fakeDaemon>[1]>} [options]
 * @returns {Promise<FakeDaemon>}
 */
async function daemon(socketPath, s, options = {}) {
  const d = await fakeDaemon(socketPath, { context: contextOf(s), answer: (r) => envelope({ query_echo: r.query }), ...options });
  cleanups.push(() => d.close());
  return d;
}

describe("over the daemon", () => {
  test("a query is one request on the daemon's socket, carrying the scope, limits, floor, budget and window", async () => {
    const s = settings();
    const d = await daemon(path.join(s.stateDir, "router.sock"), s);
    const c = client(s);
    const { envelope: env, via } = await c.query("what did we decide", {
      limit: 5000,
      scope: { agent: "alice", session_key: "agent:alice:main" },
      minRelevance: 0.3,
      maxChars: 900,
      since: "last week",
      until: "2026-11-30",
    });
    assert.equal(via, "daemon");
    assert.equal(env.query_echo, "what did we decide");
    const [hello, request] = d.requests;
    assert.deepEqual(hello, { id: 1, op: "hello", protocol: 1, version: PLUGIN_VERSION });
    assert.deepEqual(request, {
      id: 2,
      query: "what did we decide",
      timeout_ms: 5000,
      limit: 1000,
      min_relevance: 0.3,
      max_chars: 900,
      since: "last week",
      until: "2026-11-30",
      scope: { agent: "alice", session_key: "agent:alice:main" },
    });
    assert.deepEqual(c.describe().transport, "daemon");
    assert.equal(c.describe().daemonPid, process.pid);
    assert.equal(c.counters.spawns, 0);
  });

  test("the plugin introduces itself with package.json's version", () => {
    const pkg = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8"));
    assert.equal(PLUGIN_VERSION, pkg.version);
  });

  test("concurrent first queries share one connection", async () => {
    const s = settings();
    await daemon(path.join(s.stateDir, "router.sock"), s);
    const c = client(s);
    const answers = await Promise.all(["a", "b", "c"].map((q) => c.query(q)));
    assert.deepEqual(
      answers.map((a) => [a.via, a.envelope.query_echo]),
      [
        ["daemon", "a"],
        ["daemon", "b"],
        ["daemon", "c"],
      ],
    );
    assert.equal(c.counters.connections, 1);
  });

  test("an error envelope is the answer, unless hello marks its code as not one", async () => {
    const s = explicit(settings());
    await daemon(/** @type {string} */ (s.socket), s, {
      answer: (r) => envelope({ query_echo: r.query, status: "error", error_code: r.query, error_message: "no", results: [] }),
    });
    const c = client(s);
    const failed = await c.query(CODES.ALL_BACKENDS_FAILED);
    assert.equal(failed.via, "daemon");
    assert.equal(failed.envelope.error_code, CODES.ALL_BACKENDS_FAILED);
    // SHUTTING_DOWN is retried (the daemon's hello says so): once more, then through exec.
    const retried = await c.query(CODES.SHUTTING_DOWN);
    assert.equal(retried.via, "exec");
    assert.match(/** @type {string} */ (c.describe().fallbackReason), /the daemon answered SHUTTING_DOWN: no/);
    assert.equal(c.counters.daemonQueries, 1);
  });

  test("the index freshness comes from the daemon's stats, and asking never starts one", async () => {
    const s = settings();
    const refresh = { collections: { notes: { pending: 2, last_updated: "2026-01-01T00:00:00Z" } }, running: false };
    const idle = client(s);
    assert.equal(await idle.indexFreshness(), null);
    assert.equal(idle.counters.spawns, 0);
    await daemon(path.join(s.stateDir, "router.sock"), s, {
      answer: (r) => (r.op === "stats" ? { op: "stats", stats: { runtime: { qmd: { refresh }, totalrecall: { files: 3 } } } } : null),
    });
    assert.deepEqual(await client(s).indexFreshness(), { qmd: refresh });
  });
});

describe("a daemon of another context", () => {
  test("on the shared socket: the plugin moves to a socket of its own context and starts a daemon there", async () => {
    const s = settings();
    const shared = path.join(s.stateDir, "router.sock");
    await daemon(shared, s, { context: { ...contextOf(s), cwd: "/another/workspace" } });
    const c = client(s);
    const { via } = await c.query("q");
    assert.equal(via, "daemon");
    assert.match(c.socketPath, /router-openclaw-[0-9a-f]{12}\.sock$/);
    assert.equal(c.counters.spawns, 1);
    assert.match(c.warnings[0], /serves another context \(differs in cwd\)/);
  });

  test("on a socket the settings name: not used, exec answers, and the status says why", async () => {
    const s = explicit(settings());
    await daemon(/** @type {string} */ (s.socket), s, { context: { ...contextOf(s), state_dir: "/elsewhere" } });
    const c = client(s);
    const { via, envelope: env } = await c.query("q");
    assert.equal(via, "exec");
    assert.equal(env.query_echo, "q");
    assert.match(/** @type {string} */ (c.describe().fallbackReason), /serves another context \(differs in state_dir\); stop it/);
    assert.equal(c.describe().transport, "exec");
  });

  test("another protocol: exec, with the fix", async () => {
    const s = explicit(settings());
    await daemon(/** @type {string} */ (s.socket), s, { hello: { protocol: 2 } });
    const c = client(s);
    assert.equal((await c.query("q")).via, "exec");
    assert.match(/** @type {string} */ (c.describe().fallbackReason), /speaks protocol 2, not 1; restart it/);
  });
});

describe("starting a daemon", () => {
  test("nothing listens: serve is started in the memory root, with the state dir and config, and answers", async () => {
    const s = settings();
    const config = path.join(s.stateDir, "router-config.json");
    fs.writeFileSync(config, "{}");
    const c = client({ ...s, config });
    const { via } = await c.query("q");
    assert.equal(via, "daemon");
    assert.equal(c.counters.spawns, 1);
    const started = JSON.parse(fs.readFileSync(path.join(s.stateDir, "fake-serve.json"), "utf8"));
    assert.deepEqual(started.argv, ["--socket", path.join(s.stateDir, "router.sock"), "--idle-exit", "600", "--state-dir", s.stateDir, "--config", config]);
    assert.equal(started.cwd, s.memoryRoot);
  });

  test("serve's configuration error fails at once with serve's own sentence, and exec answers", async () => {
    const s = settings();
    s.env.FAKE_MR_SERVE = "config-error";
    const c = client(s);
    const began = Date.now();
    const { via } = await c.query("q");
    assert.equal(via, "exec");
    assert.ok(Date.now() - began < 5000, "waited for a daemon that had said why it would not start");
    const reason = /** @type {string} */ (c.describe().fallbackReason);
    assert.match(reason, /the daemon exited \(2\) before listening on .*: memory-router serve: router-config\.json: rules\[0\]\.match: not a list \(CONFIG_INVALID\)/);
  });

  test("a daemon that exits at start is not started again for every query", async () => {
    const s = settings();
    s.env.FAKE_MR_SERVE = "exit1";
    const c = client(s);
    for (const q of ["a", "b"]) assert.equal((await c.query(q)).via, "exec");
    assert.equal(c.counters.spawns, 1);
    assert.equal(c.counters.execQueries, 2);
    assert.match(/** @type {string} */ (c.describe().fallbackReason), /the daemon exited \(1\) before listening/);
  });

  test("no state dir or memory root: nothing is started, and the error says whose job it is", async () => {
    const s = settings();
    const c = client({ ...s, stateDir: path.join(s.memoryRoot, "missing") });
    assert.equal((await c.query("q")).via, "exec"); // which says what is missing, as memory-router does
    assert.equal(c.counters.spawns, 0);
    assert.match(/** @type {string} */ (c.describe().fallbackReason), /the state directory .* does not exist \(it holds backends\.json\); run memory-router's installer/);
  });

  test("a planted non-socket is never replaced: exec answers", async () => {
    const s = settings();
    fs.writeFileSync(path.join(s.stateDir, "router.sock"), "not a socket");
    const c = client(s);
    assert.equal((await c.query("q")).via, "exec");
    assert.equal(c.counters.spawns, 0);
    assert.match(/** @type {string} */ (c.describe().fallbackReason), /is not a socket/);
  });
});

/**
 * The settings with a socket that cannot be used (a plain file): every query goes through exec.
 * @param {Settings} s
 */
function unusable(s) {
  const socket = path.join(s.stateDir, "planted.sock");
  fs.writeFileSync(socket, "");
  return { ...s, socket };
}

describe("the exec fallback", () => {
  test("memory-router query gets the same question, flags and memory root as the daemon would", async () => {
    const s = unusable(settings({ config: "/etc/rc.json" }));
    const c = client(s);
    const { envelope: env } = await c.query("--help", {
      limit: 3,
      timeoutMs: 700,
      scope: { agent: "bob", session_key: "agent:bob:x" },
      minRelevance: 0,
      maxChars: 50,
      since: "-3 days",
      until: "yesterday",
    });
    const called = /** @type {any} */ (env).called;
    assert.deepEqual(called.argv, [
      "--timeout-ms",
      "700",
      "--state-dir",
      s.stateDir,
      "--limit",
      "3",
      "--config",
      "/etc/rc.json",
      "--agent",
      "bob",
      "--session-key",
      "agent:bob:x",
      "--min-relevance",
      "0",
      "--max-chars",
      "50",
      "--since=-3 days", // one token: a value starting with "-" is not taken for an option
      "--until=yesterday",
      "--",
      "--help",
    ]);
    assert.equal(called.cwd, s.memoryRoot);
    assert.equal(called.repoRoot, s.memoryRoot);
  });

  test("no envelope: the exit code and the end of stderr", async () => {
    const s = unusable(settings());
    s.env.FAKE_MR_QUERY = "no-envelope";
    await assert.rejects(client(s).query("q"), (err) => {
      assert.ok(err instanceof RouterError);
      assert.match(err.message, /query exited 3 without an envelope: .*RuntimeError: the fake broke$/);
      return true;
    });
  });

  test("a missing command names the setting to fix", async () => {
    const s = unusable(settings({ command: path.join(dir, "no-such-memory-router") }));
    await assert.rejects(client(s).query("q"), /no-such-memory-router not found; install memory-router or set plugins\.entries\.memory-router\.config\.command/);
  });
});

describe("what serve said", () => {
  test("serve's own last line since the daemon started, else the last line", () => {
    const log = path.join(dir, "daemon.log");
    fs.writeFileSync(log, "memory-router serve: old reason\n");
    const offset = fs.statSync(log).size;
    fs.appendFileSync(log, "noise\nmemory-router serve: the reason\nTraceback...\n");
    assert.equal(serveMessage(log, offset), "memory-router serve: the reason");
    fs.appendFileSync(log, "x".repeat(700));
    assert.equal(serveMessage(log, fs.statSync(log).size - 700).length, 600);
    assert.equal(serveMessage(path.join(dir, "none.log"), 0), "");
  });

  test("another daemon holding the lock is told apart from every other exit 2", () => {
    assert.deepEqual(lockHolder("memory-router serve: another memory-router daemon (pid 123) is serving /s.sock"), { pid: 123 });
    assert.deepEqual(lockHolder("another memory-router daemon (pid ?) is serving"), { pid: null });
    assert.deepEqual(lockHolder("memory-router serve: something is already listening on /s.sock"), { pid: null });
    assert.equal(lockHolder("memory-router serve: router-config.json: bad (CONFIG_INVALID)"), null);
  });
});

describe("which answers are retried", () => {
  test("the codes the daemon's hello marks, from its table", () => {
    const marked = Object.entries(/** @type {NonNullable<typeof HELLO.error_codes>} */ (HELLO.error_codes))
      .filter(([, row]) => row.retry)
      .map(([code]) => code);
    assert.deepEqual([...retryCodes(HELLO)].sort(), marked.sort());
    assert.ok(retryCodes(HELLO).has(CODES.SHUTTING_DOWN));
    assert.ok(!retryCodes(HELLO).has(CODES.ALL_BACKENDS_FAILED));
  });

  test("a daemon from before hello carried the table: the two codes it always meant", () => {
    assert.deepEqual([...retryCodes({ op: "hello" })].sort(), [CODES.INTERNAL_ERROR, CODES.SHUTTING_DOWN]);
    assert.deepEqual([...retryCodes(null)].sort(), [CODES.INTERNAL_ERROR, CODES.SHUTTING_DOWN]);
  });

  test("the plugin's names are the daemon's codes", () => {
    assert.deepEqual(Object.keys(CODES).sort(), Object.keys(/** @type {object} */ (HELLO.error_codes)).sort());
  });
});

test("a caught error's message and code, whatever was thrown", () => {
  assert.deepEqual(errorFacts(new RouterError("m", CODES.EMPTY_QUERY)), { message: "m", code: CODES.EMPTY_QUERY });
  assert.deepEqual(errorFacts(Object.assign(new Error("e"), { code: "ENOENT" })), { message: "e", code: "ENOENT" });
  assert.deepEqual(errorFacts(new Error("plain")), { message: "plain" });
  assert.deepEqual(errorFacts("a string"), { message: "a string" });
});
