// @ts-check
// A fake of memory-router's socket daemon (memory_router/daemon/socket_server.py), for the tests:
// JSON lines over a Unix socket, each answer carrying its request's id. It answers `hello` as the
// real daemon does (fixtures/hello.json, which tests/openclaw/test_plugin_package.py holds equal
// to the daemon's answer) for the context it is given, and every other request as the test says.
// The real daemon answers the plugin in tests/openclaw/ (Python, slow tier).
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { envDigest } from "../../lib/wire.js";
/** @import { DaemonContext, Hello } from "../../lib/wire.js" */

/** The real daemon's hello (a fixed context; see the header). */
export const HELLO = /** @type {Hello & {context: DaemonContext}} */ (
  JSON.parse(fs.readFileSync(new URL("../fixtures/hello.json", import.meta.url), "utf8"))
);

/**
 * The context a daemon started with these settings reports (memory_router/client/wire.py
 * `context`), with the real daemon's salt and list of variables.
 * @param {{memoryRoot: string, stateDir: string, config: string | null, env: Record<string, string | undefined>}} s
 * @returns {DaemonContext}
 */
export function contextOf(s) {
  const salt = /** @type {string} */ (HELLO.context.env_salt);
  /** @type {Record<string, string | null>} */
  const env = {};
  for (const name of Object.keys(HELLO.context.env)) env[name] = envDigest(salt, name, s.env[name]);
  return {
    cwd: s.memoryRoot,
    state_dir: s.stateDir,
    backends_json: path.join(s.stateDir, "backends.json"),
    // A daemon with no config of its own reads the packaged one, in the Python package.
    config: s.config ?? "/site-packages/memory_router/router-config.json",
    env_salt: salt,
    env,
  };
}

/**
 * @typedef {object} FakeDaemon
 * @property {Record<string, any>[]} requests every request it read, in order (hello included)
 * @property {() => number} connections connections open now
 * @property {() => Promise<void>} close
 */

/**
 * Listen on `socketPath`. `answer(request)` gives the answer to a request that is not `hello`
 * (its id is added), or a promise of it, or null for no answer at all.
 * @param {string} socketPath
 * @param {{context: DaemonContext | null, hello?: Record<string, unknown>,
 *   answer?: (request: Record<string, any>) => unknown}} options
 * @returns {Promise<FakeDaemon>}
 */
export async function fakeDaemon(socketPath, { context, hello = {}, answer = () => null }) {
  /** @type {Record<string, any>[]} */
  const requests = [];
  /** @type {Set<net.Socket>} */
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    socket.setEncoding("utf8");
    let buffer = "";
    socket.on("data", (chunk) => {
      buffer += chunk;
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const request = JSON.parse(buffer.slice(0, nl));
        buffer = buffer.slice(nl + 1);
        requests.push(request);
        const reply = request.op === "hello" ? { ...HELLO, pid: process.pid, context, ...hello } : answer(request);
        Promise.resolve(reply).then((body) => {
          if (body !== null && !socket.destroyed) socket.write(`${JSON.stringify({ ...body, id: request.id })}\n`);
        });
      }
    });
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => resolve(undefined));
  });
  return {
    requests,
    connections: () => sockets.size,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * An envelope as memory-router writes one (memory_router/contract.py ENVELOPE_FIELDS).
 * @param {Record<string, unknown>} [over]
 */
export function envelope(over = {}) {
  return {
    query_echo: "q",
    routed_to: "totalrecall",
    routed_mode: null,
    fallback_chain: ["totalrecall"],
    fallbacks_used: 0,
    results: [{ content: "we chose Postgres", relevance: 0.8, source: "totalrecall", timestamp: null, path: "MEMORY.md", line: 3 }],
    result_count: 1,
    normalized_relevance: 0.8,
    status: "success",
    error_code: null,
    error_message: null,
    router_duration_ms: 2,
    backend_duration_ms: 1,
    rule: { number: 3, id: "decision_recall", strength: "strong" },
    attempts: [],
    ...over,
  };
}

/**
 * An executable `memory-router` in `dir` that runs fake-memory-router.js with this Node: what
 * the plugin's `command` setting names in the tests.
 * @param {string} dir
 * @returns {string}
 */
export function fakeCommand(dir) {
  const script = new URL("./fake-memory-router.js", import.meta.url).pathname;
  const command = path.join(dir, "memory-router");
  fs.writeFileSync(command, `#!/bin/sh\nexec '${process.execPath}' '${script}' "$@"\n`, { mode: 0o755 });
  return command;
}
