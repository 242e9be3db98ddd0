// @ts-check
// memory-router's daemon protocol, client side: JSON lines over a Unix stream socket.
//
// The wire format is the one memory_router/client/wire.py and memory_router/daemon/socket_server.py
// define (and memory_router/client/thin.py speaks):
//   -> {"op": "hello", "protocol": 1, "version": "..."}
//   <- {"op": "hello", "protocol": 1, "pid": 123, "context": {...}, ...}
//   -> {"id": 7, "query": "auth", "limit": 5, "timeout_ms": 5000}
//   <- {"id": 7, ...the router envelope...}
// Responses are matched to requests by `id`, so one connection carries many queries at once.
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { CODES } from "./codes.js";
import { effectiveConfig } from "./settings.js";
/** @import { Settings } from "./settings.js" */

export const PROTOCOL = 1;
const MAX_RESPONSE = 64 << 20; // as wire.py: a longer line is not an answer

/**
 * What a daemon answers for: memory_router/client/wire.py `context` (the environment's values as
 * salted digests, null when unset; `env_salt` is the salt).
 * @typedef {object} DaemonContext
 * @property {string} cwd
 * @property {string} state_dir
 * @property {string} backends_json
 * @property {string | null} config
 * @property {Record<string, string | null>} env
 * @property {string} [env_salt]
 */

/**
 * The daemon's answer to `hello` (memory_router/daemon/socket_server.py): its context and the
 * table of error codes (memory_router/contract.py `hello_codes`). A daemon from before a field was
 * added lacks it.
 * @typedef {object} Hello
 * @property {string} op
 * @property {number} [protocol]
 * @property {string} [version]
 * @property {number} [pid]
 * @property {DaemonContext} [context]
 * @property {Record<string, {exit: number | null, origin: string, retry: boolean}>} [error_codes]
 * @property {string} [error_message]
 */

/**
 * The context a client computes for the daemon it would start: DaemonContext without the salt.
 * @typedef {Omit<DaemonContext, "env_salt">} ExpectedContext
 */

/**
 * One JSON object the daemon wrote; its shape is the op's (Hello, an Envelope, stats).
 * @typedef {Record<string, any>} Answer
 */

export class DaemonError extends Error {
  /**
   * @param {string} message
   * @param {{code?: string, absent?: boolean}} [options]
   */
  constructor(message, { code = CODES.DAEMON_UNAVAILABLE, absent = false } = {}) {
    super(message);
    this.name = "DaemonError";
    this.code = code;
    this.absent = absent; // nothing listens there: starting a daemon may help
  }
}

/** The socket must be a socket of this user (as wire.Connection checks): never talk to one
 * another user could have planted.
 * @param {string} socketPath */
function checkSocket(socketPath) {
  let st;
  try {
    st = fs.statSync(socketPath);
  } catch {
    throw new DaemonError(`no daemon socket at ${socketPath}`, { absent: true });
  }
  if (!st.isSocket()) throw new DaemonError(`${socketPath} is not a socket`);
  if (typeof process.getuid === "function" && st.uid !== process.getuid()) {
    throw new DaemonError(`${socketPath} belongs to uid ${st.uid}, not to this user; not using it`);
  }
}

/** @typedef {{resolve: (answer: Answer) => void, reject: (err: DaemonError) => void, timer: NodeJS.Timeout}} Waiter */

/** One connection to a daemon; many requests in flight, answered by id. */
export class Connection {
  /** @param {string} socketPath */
  constructor(socketPath) {
    this.path = socketPath;
    /** @type {net.Socket | null} */
    this.socket = null;
    /** @type {Map<number, Waiter>} */
    this.pending = new Map();
    this.nextId = 1;
    this.buffer = "";
    this.closed = false;
  }

  /** Connect; rejects with a DaemonError (absent=true when nothing listens).
   * @returns {Promise<Connection>} */
  open(timeoutMs = 2000) {
    try {
      checkSocket(this.path);
    } catch (err) {
      return Promise.reject(err); // a promise either way: callers await it
    }
    return new Promise((resolve, reject) => {
      const socket = net.createConnection({ path: this.path });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new DaemonError(`no daemon answers at ${this.path} (connect timed out)`));
      }, timeoutMs);
      socket.once("connect", () => {
        clearTimeout(timer);
        socket.setEncoding("utf8");
        this.socket = socket;
        socket.on("data", (chunk) => this.#onData(String(chunk))); // a string already (setEncoding)
        socket.on("close", () => this.#fail(new DaemonError(`the daemon at ${this.path} closed the connection`)));
        socket.on("error", (/** @type {Error} */ err) => this.#fail(new DaemonError(`the connection to ${this.path} failed: ${err.message}`)));
        this.#idle();
        resolve(this);
      });
      socket.once("error", (/** @type {NodeJS.ErrnoException} */ err) => {
        clearTimeout(timer);
        const absent = err.code === "ECONNREFUSED" || err.code === "ENOENT";
        reject(new DaemonError(`no daemon answers at ${this.path} (${err.code || err.message})`, { absent }));
      });
    });
  }

  /** Send one request object (an id is added) and wait for its answer.
   * @param {Record<string, unknown>} obj
   * @param {number} timeoutMs
   * @returns {Promise<Answer>} */
  request(obj, timeoutMs) {
    const socket = this.socket;
    if (this.closed || !socket) return Promise.reject(new DaemonError(`the connection to ${this.path} is closed`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        this.#idle();
        reject(new DaemonError(`the daemon at ${this.path} did not answer within ${Math.round(timeoutMs / 1000)} s`, { code: CODES.QUERY_TIMEOUT }));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      // A pending request keeps the host's event loop alive; an idle connection must not
      // (a one-shot `openclaw memory search` has to be able to exit).
      socket.ref();
      socket.write(`${JSON.stringify({ id, ...obj })}\n`);
    });
  }

  close() {
    this.closed = true;
    this.socket?.destroy();
    this.#fail(new DaemonError(`the connection to ${this.path} was closed`));
  }

  #idle() {
    if (this.pending.size === 0) this.socket?.unref();
  }

  /** @param {string} chunk */
  #onData(chunk) {
    this.buffer += chunk;
    if (this.buffer.length > MAX_RESPONSE) {
      this.socket?.destroy();
      this.#fail(new DaemonError("the daemon's response is too large"));
      return;
    }
    let nl;
    while ((nl = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      let data;
      try {
        data = JSON.parse(line);
      } catch {
        continue; // not ours to answer: every request has its own timeout
      }
      const waiter = data && this.pending.get(data.id);
      if (!waiter) continue;
      this.pending.delete(data.id);
      clearTimeout(waiter.timer);
      waiter.resolve(data);
    }
    this.#idle();
  }

  /** @param {DaemonError} err */
  #fail(err) {
    this.closed = true;
    for (const [id, waiter] of this.pending) {
      clearTimeout(waiter.timer);
      waiter.reject(err);
      this.pending.delete(id);
    }
  }
}

// ---------------------------------------------------------------------------- the context
// A daemon answers with the memory of the context it was started in (memory_router/client/wire.py
// `context`): working directory, state dir, backends.json, router-config.json, and the values
// of the environment variables the router and its adapters read, as salted hashes. The plugin
// compares the context it would start a daemon with against the daemon's before using it.

/** wire.env_digest: a salted SHA-256 of one variable's value, null when unset.
 * @param {string} salt
 * @param {string} name
 * @param {string | null | undefined} value
 * @returns {string | null} */
export function envDigest(salt, name, value) {
  if (value === undefined || value === null) return null;
  return crypto.createHash("sha256").update(`${salt}\0${name}\0${value}`, "utf8").digest("hex").slice(0, 32);
}

/** The context a daemon started by this plugin with `settings` would report. The names are the
 * daemon's own list (its hello carries them): the plugin does not keep a copy of envvars.py.
 * @param {Settings} settings
 * @param {DaemonContext | undefined} theirs
 * @returns {ExpectedContext} */
export function expectedContext(settings, theirs) {
  const salt = typeof theirs?.env_salt === "string" ? theirs.env_salt : "";
  const names = theirs?.env && typeof theirs.env === "object" ? Object.keys(theirs.env) : [];
  /** @type {Record<string, string | null>} */
  const env = {};
  for (const name of names.sort()) env[name] = envDigest(salt, name, settings.env[name]);
  return {
    cwd: path.normalize(settings.memoryRoot),
    state_dir: path.normalize(settings.stateDir),
    backends_json: path.join(settings.stateDir, "backends.json"),
    config: effectiveConfig(settings),
    env,
  };
}

/** The keys on which the daemon's context differs from what this plugin needs (empty: use it).
 * The config is the one memory-router's precedence gives (settings.effectiveConfig: the
 * plugin's `config`, $MEMORY_ROUTER_CONFIG, `<state dir>/router-config.json`); with none of
 * those the daemon must use its packaged default, whose path only the Python package knows: it
 * is recognised by its place in the package.
 * @param {ExpectedContext} mine
 * @param {DaemonContext | undefined} theirs
 * @returns {string[]} */
export function contextDiff(mine, theirs) {
  if (!theirs || typeof theirs !== "object") return ["context"];
  /** @type {string[]} */
  const diff = /** @type {const} */ (["cwd", "state_dir", "backends_json"]).filter((k) => mine[k] !== theirs[k]);
  if (mine.config !== null) {
    if (mine.config !== theirs.config) diff.push("config");
  } else if (typeof theirs.config !== "string" || !theirs.config.endsWith(`${path.sep}memory_router${path.sep}router-config.json`)) {
    diff.push("config");
  }
  const theirEnv = theirs.env && typeof theirs.env === "object" ? theirs.env : {};
  for (const name of Object.keys(theirEnv).sort()) {
    if (mine.env[name] !== theirEnv[name]) diff.push(`env.${name}`);
  }
  return diff;
}

/** A short, stable name for a context: the plugin's own socket when the default one is taken
 * by a daemon serving another context. Hashes the values, never shows them.
 * @param {Settings} settings
 * @param {Iterable<string>} names
 * @returns {string} */
export function contextTag(settings, names) {
  const h = crypto.createHash("sha256");
  h.update(JSON.stringify([settings.memoryRoot, settings.stateDir, settings.config]));
  for (const name of [...names].sort()) h.update(`\0${name}=${settings.env[name] ?? "\u0001unset"}`);
  return h.digest("hex").slice(0, 12);
}
