// @ts-check
// lib/wire.js: the daemon's JSON-lines protocol (one connection, many requests answered by id)
// and the context the plugin compares before it uses a daemon.
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { CODES } from "../lib/codes.js";
import { Connection, DaemonError, contextDiff, contextTag, envDigest, expectedContext } from "../lib/wire.js";
import { HELLO } from "./support/daemon.js";

/** @type {string} */
let dir;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "mr-wire-"));
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

// The settings the fixture's daemon was started with (tests/openclaw/test_plugin_package.py ENV).
const SETTINGS = {
  command: "memory-router",
  stateDir: "/ws/state",
  socket: null,
  memoryRoot: "/ws",
  config: "/ws/state/router-config.json",
  timeoutMs: 5000,
  maxResults: 10,
  minRelevance: 0.2,
  maxChars: null,
  env: { HOME: "/home/u", PATH: "/usr/bin", OPENCLAW_REPO_ROOT: "/ws", QMD_FORCE_CPU: "1" },
};

describe("the daemon's context", () => {
  test("the context the plugin expects is the one the real daemon reports for the same start", () => {
    assert.deepEqual(contextDiff(expectedContext(SETTINGS, HELLO.context), HELLO.context), []);
  });

  test("a daemon started elsewhere is told apart, key by key, variables by name", () => {
    const other = { ...SETTINGS, memoryRoot: "/elsewhere", env: { ...SETTINGS.env, QMD_FORCE_CPU: undefined, CI: "1" } };
    assert.deepEqual(contextDiff(expectedContext(other, HELLO.context), HELLO.context), ["cwd", "env.CI", "env.QMD_FORCE_CPU"]);
  });

  test("values are compared as the daemon's salted digests, never sent", () => {
    const mine = expectedContext(SETTINGS, HELLO.context);
    assert.equal(mine.env.HOME, HELLO.context.env.HOME);
    assert.ok(!JSON.stringify(mine.env).includes("/home/u"));
    assert.equal(envDigest("s4lt", "HOME", undefined), null);
    assert.equal(envDigest("s4lt", "HOME", null), null);
    assert.match(/** @type {string} */ (envDigest("s4lt", "HOME", "")), /^[0-9a-f]{32}$/);
    assert.notEqual(envDigest("s4lt", "HOME", "/home/u"), envDigest("salt", "HOME", "/home/u"));
  });

  test("the compared names are the daemon's own list", () => {
    const mine = expectedContext(SETTINGS, HELLO.context);
    assert.deepEqual(Object.keys(mine.env), Object.keys(HELLO.context.env).sort());
    assert.deepEqual(expectedContext(SETTINGS, undefined).env, {});
  });

  test("with no config of its own the plugin accepts only the packaged one", () => {
    const unset = { ...SETTINGS, config: null, stateDir: dir }; // no router-config.json in the state dir
    const theirs = { ...HELLO.context, state_dir: dir, backends_json: path.join(dir, "backends.json") };
    const packaged = `${path.sep}venv${path.sep}memory_router${path.sep}router-config.json`;
    assert.deepEqual(contextDiff(expectedContext(unset, theirs), { ...theirs, config: packaged }), []);
    assert.deepEqual(contextDiff(expectedContext(unset, theirs), { ...theirs, config: "/home/u/router-config.json" }), ["config"]);
  });

  test("no context at all is a difference", () => {
    assert.deepEqual(contextDiff(expectedContext(SETTINGS, undefined), undefined), ["context"]);
  });

  test("a context's tag is short, stable, and changes with what it names", () => {
    const tag = contextTag(SETTINGS, ["HOME", "QMD_FORCE_CPU"]);
    assert.match(tag, /^[0-9a-f]{12}$/);
    assert.equal(contextTag(SETTINGS, ["QMD_FORCE_CPU", "HOME"]), tag);
    assert.notEqual(contextTag({ ...SETTINGS, memoryRoot: "/other" }, ["HOME", "QMD_FORCE_CPU"]), tag);
    assert.notEqual(contextTag({ ...SETTINGS, env: { ...SETTINGS.env, QMD_FORCE_CPU: "0" } }, ["HOME", "QMD_FORCE_CPU"]), tag);
  });
});

/**
 * A server on a fresh socket that hands each connection to `onConnection`.
 * @param {(socket: net.Socket) => void} onConnection
 * @returns {Promise<{path: string, server: net.Server}>}
 */
async function listen(onConnection) {
  const socketPath = path.join(fs.mkdtempSync(path.join(dir, "s-")), "d.sock");
  const server = net.createServer(onConnection);
  await new Promise((resolve) => server.listen(socketPath, () => resolve(undefined)));
  return { path: socketPath, server };
}

/**
 * Request lines as they arrive on `socket`.
 * @param {net.Socket} socket
 * @param {(request: Record<string, any>) => void} onRequest
 */
function lines(socket, onRequest) {
  let buffer = "";
  socket.setEncoding("utf8");
  socket.on("data", (chunk) => {
    buffer += chunk;
    let nl;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      onRequest(JSON.parse(buffer.slice(0, nl)));
      buffer = buffer.slice(nl + 1);
    }
  });
}

describe("a connection", () => {
  test("matches answers to requests by id, in whatever order they come", async () => {
    /** @type {Record<string, any>[]} */
    const held = [];
    const { path: p, server } = await listen((socket) =>
      lines(socket, (request) => {
        held.push(request);
        if (held.length === 2) for (const r of held.reverse()) socket.write(`${JSON.stringify({ id: r.id, echo: r.query })}\n`);
      }),
    );
    const conn = await new Connection(p).open();
    const [a, b] = await Promise.all([conn.request({ query: "a" }, 5000), conn.request({ query: "b" }, 5000)]);
    assert.deepEqual([a.echo, b.echo], ["a", "b"]);
    assert.deepEqual(
      held.map((r) => r.id),
      [2, 1],
    );
    conn.close();
    server.close();
  });

  test("skips lines that are not JSON and answers to ids it never asked", async () => {
    const { path: p, server } = await listen((socket) =>
      lines(socket, (request) => socket.write(`not json\n{"id": 999, "x": 1}\n${JSON.stringify({ id: request.id, ok: true })}\n`)),
    );
    const conn = await new Connection(p).open();
    assert.deepEqual(await conn.request({ op: "stats" }, 5000), { id: 1, ok: true });
    conn.close();
    server.close();
  });

  test("an answer split across writes is read whole", async () => {
    const { path: p, server } = await listen((socket) =>
      lines(socket, (request) => {
        const text = `${JSON.stringify({ id: request.id, content: "é".repeat(5000) })}\n`;
        const bytes = Buffer.from(text);
        socket.write(bytes.subarray(0, 4001)); // inside a two-byte character
        setTimeout(() => socket.write(bytes.subarray(4001)), 20);
      }),
    );
    const conn = await new Connection(p).open();
    assert.equal((await conn.request({}, 5000)).content, "é".repeat(5000));
    conn.close();
    server.close();
  });

  test("a request nobody answers times out as QUERY_TIMEOUT and the connection stays usable", async () => {
    const { path: p, server } = await listen((socket) =>
      lines(socket, (request) => {
        if (request.query !== "slow") socket.write(`${JSON.stringify({ id: request.id, ok: true })}\n`);
      }),
    );
    const conn = await new Connection(p).open();
    await assert.rejects(conn.request({ query: "slow" }, 50), (err) => err instanceof DaemonError && err.code === CODES.QUERY_TIMEOUT);
    assert.equal(conn.closed, false);
    assert.equal((await conn.request({ query: "fast" }, 5000)).ok, true);
    conn.close();
    server.close();
  });

  test("the daemon going away fails every request in flight, and the next at once", async () => {
    const { path: p, server } = await listen((socket) => lines(socket, () => socket.destroy()));
    const conn = await new Connection(p).open();
    await assert.rejects(conn.request({ query: "a" }, 5000), /closed the connection/);
    assert.equal(conn.closed, true);
    await assert.rejects(conn.request({ query: "b" }, 5000), /is closed/);
    server.close();
  });

  test("no socket: absent (starting a daemon may help)", async () => {
    await assert.rejects(new Connection(path.join(dir, "none.sock")).open(), (err) => err instanceof DaemonError && err.absent && err.code === CODES.DAEMON_UNAVAILABLE);
  });

  test("a file that is not a socket is never talked to", async () => {
    const planted = path.join(dir, "planted.sock");
    fs.writeFileSync(planted, "not a socket");
    await assert.rejects(new Connection(planted).open(), (err) => err instanceof DaemonError && !err.absent && /is not a socket/.test(err.message));
  });
});
