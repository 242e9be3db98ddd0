// @ts-check
// One memory-router behind one set of settings: a warm daemon over its socket, started when
// none answers, with `memory-router query` as the fallback when the socket cannot be used.
//
// One RouterClient (and so at most one connection and one daemon start) per plugin instance and
// memory root: the Gateway builds a search manager per call and closes it after every search,
// which must not cost a new connection or process.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { CODES } from "./codes.js";
import { Connection, DaemonError, PROTOCOL, contextDiff, contextTag, expectedContext } from "./wire.js";
/** @import { Logger } from "./host.js" */
/** @import { Envelope } from "./mapping.js" */
/** @import { Scope, Settings } from "./settings.js" */
/** @import { Hello } from "./wire.js" */

/** The plugin's version, told to the daemon in `hello`: package.json's, the one place it is written
 * (a test holds it equal to the Python package's). */
export const PLUGIN_VERSION = /** @type {{version: string}} */ (
  JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8"))
).version;
const SOCKET_NAME = "router.sock"; // memory_router/client/wire.py SOCKET_NAME: shared with `query --spawn`
const IDLE_EXIT_S = 600; // a daemon nobody uses exits (as `query --spawn`'s default)
const START_WAIT_MS = 15000; // how long a starting daemon may take to listen (wire.wait_for_daemon)
const MAX_SOCKET_PATH = 107; // bytes in a Unix socket path
const RETRY_AFTER_MS = 30000; // after the daemon could not be used: exec until then, then try again

const MAX_RESTARTS = 3; // new daemons started while an old one drains, per wait
// A daemon's answers that are not an answer to the query come from its hello (`error_codes`,
// memory_router/contract.py ERROR_CODES' retry column); these only for a daemon from before
// hello carried the table (tests/unit/test_error_codes.py holds them to the table).
const RETRY_WITHOUT_TABLE = Object.freeze([CODES.SHUTTING_DOWN, CODES.INTERNAL_ERROR]);
const LOG_TAIL = 16 << 10; // bytes of daemon.log read back for serve's reason

/** What `serve` said on stderr since `offset` of daemon.log: its last `memory-router serve:`
 * line (the reason it exits), else its last line; "" when it said nothing.
 * @param {string} logPath
 * @param {number} [offset]
 * @returns {string} */
export function serveMessage(logPath, offset) {
  let text = "";
  try {
    const fd = fs.openSync(logPath, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    try {
      const size = fs.fstatSync(fd).size;
      const start = Math.max(offset ?? 0, size - LOG_TAIL);
      const buf = Buffer.alloc(Math.max(0, size - start));
      fs.readSync(fd, buf, 0, buf.length, start);
      text = buf.toString("utf8");
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return "";
  }
  const lines = text.split("\n").map((l) => l.trim()).filter(Boolean);
  const own = lines.filter((l) => l.startsWith("memory-router serve:"));
  const line = own.at(-1) ?? lines.at(-1) ?? "";
  return line.length > 600 ? `${line.slice(0, 597)}...` : line;
}

/** serve's "another memory-router daemon (pid N) is serving" (its lock is held): {pid}, or null
 * for any other reason. "something is already listening" counts too (pid unknown).
 * @param {string} message
 * @returns {{pid: number | null} | null} */
export function lockHolder(message) {
  const m = /another memory-router daemon \(pid (\d+|\?)\) is serving/.exec(message);
  if (m) return { pid: m[1] === "?" ? null : Number(m[1]) };
  return /something is already listening on /.test(message) ? { pid: null } : null;
}

/** The codes of a daemon's answers that are not an answer to the query (it is stopping, it
 * failed, it could not read the request): the query is asked again, then through exec.
 * @param {Hello | null | undefined} hello
 * @returns {Set<string>} */
export function retryCodes(hello) {
  const table = hello?.error_codes;
  if (!table || typeof table !== "object") return new Set(RETRY_WITHOUT_TABLE);
  return new Set(Object.keys(table).filter((code) => table[code]?.retry === true));
}

/** Whether process `pid` still runs (a zombie, exited but not yet reaped by its parent, does not).
 * @param {number} pid */
function alive(pid) {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return errorFacts(err).code === "EPERM";
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true; // no /proc: kill(0) is all there is
  }
}

/** An error the plugin answers with: memory-router's own (its code and message), or the
 * plugin's (a code of lib/codes.js). */
export class RouterError extends Error {
  /** @param {string} message @param {string} [code] */
  constructor(message, code = CODES.MEMORY_ROUTER_ERROR) {
    super(message);
    this.name = "RouterError";
    this.code = code;
  }
}

/** What a caught error says: its message, and its code when it has one (a RouterError, a
 * DaemonError, a Node system error).
 * @param {unknown} err
 * @returns {{message: string, code?: string}} */
export function errorFacts(err) {
  if (!(err instanceof Error)) return { message: String(err) };
  const code = /** @type {{code?: unknown}} */ (err).code;
  return typeof code === "string" ? { message: err.message, code } : { message: err.message };
}

/**
 * A daemon this client started: its pid, its exit (null while it runs) and where its stderr
 * starts in daemon.log.
 * @typedef {{pid: number | undefined, exited: number | string | null, logOffset: number}} Started
 */

/**
 * What a query asks besides its text: how many hits, the per-backend timeout, whose memory, and
 * memory-router's floor and budget.
 * @typedef {object} QueryOptions
 * @property {number} [limit]
 * @property {number} [timeoutMs]
 * @property {Scope} [scope]
 * @property {number} [minRelevance]
 * @property {number | null} [maxChars]
 * @property {string} [since] the time window, as the caller wrote it (memory-router parses it)
 * @property {string} [until]
 */

export class RouterClient {
  /** @param {Settings} settings @param {Logger} [logger] */
  constructor(settings, logger = console) {
    this.settings = settings;
    this.logger = logger;
    /** @type {Connection | null} */
    this.connection = null;
    /** @type {Promise<Connection> | null} */
    this.connecting = null;
    /** @type {Hello | null} the hello of the daemon in use */
    this.daemon = null;
    this.socketPath = settings.socket ?? path.join(settings.stateDir, SOCKET_NAME);
    /** @type {string | null} why queries go through exec, when they do */
    this.fallbackReason = null;
    this.counters = { connections: 0, spawns: 0, daemonQueries: 0, execQueries: 0 };
    /** @type {Set<string>} */
    this.warned = new Set();
    this.retryAt = 0; // a daemon that failed to start is not started again for every query
  }

  /** The router envelope for `query`, and how it was answered ("daemon" or "exec").
   * @param {string} query
   * @param {QueryOptions} [options]
   * @returns {Promise<{envelope: Envelope, via: "daemon" | "exec"}>} */
  async query(query, { limit, timeoutMs, scope, minRelevance, maxChars, since, until } = {}) {
    const perBackend = timeoutMs ?? this.settings.timeoutMs;
    /** @type {Record<string, unknown>} */
    const request = { query, timeout_ms: perBackend };
    if (limit) request.limit = Math.min(1000, limit);
    // The floor and the budget are memory-router's (memory_router/core/trim.py): the envelope says
    // what they left out (abstained, floor, budget), on the daemon and the exec path alike.
    const trim = { minRelevance, maxChars, since, until };
    if (typeof minRelevance === "number") request.min_relevance = minRelevance;
    if (Number.isInteger(maxChars)) request.max_chars = maxChars;
    // The time window: memory-router reads it relative to the query's time (core/window.py).
    if (since) request.since = since;
    if (until) request.until = until;
    // Whose memory: the asking agent (and session). memory-router's backends read only that.
    if (scope?.agent) request.scope = scope;
    // A chain tries up to three backends, each up to timeout_ms; leave the daemon room to answer.
    const wait = Math.max(10000, 4 * perBackend + 2000);
    for (let attempt = 0; attempt < 2 && Date.now() >= this.retryAt; attempt++) {
      let conn;
      try {
        conn = await this.#connection();
      } catch (err) {
        const { message } = errorFacts(err);
        this.#warnOnce(`exec:${message}`, `memory-router: ${message}; answering through \`${this.settings.command} query\` instead`);
        this.fallbackReason = message;
        this.retryAt = Date.now() + RETRY_AFTER_MS;
        break;
      }
      const retry = retryCodes(this.daemon); // this connection's daemon, read before awaiting
      try {
        const { id: _id, ...answer } = await conn.request(request, wait);
        const envelope = /** @type {Envelope} */ (answer);
        if (typeof envelope.error_code === "string" && retry.has(envelope.error_code)) {
          throw new DaemonError(`the daemon answered ${envelope.error_code}: ${envelope.error_message}`);
        }
        this.counters.daemonQueries++;
        return { envelope, via: "daemon" };
      } catch (err) {
        const { message, code } = errorFacts(err);
        // Slow, not broken: another process would be as slow. The connection stays (a late
        // answer to a forgotten id is dropped).
        if (code === CODES.QUERY_TIMEOUT) throw new RouterError(`memory-router: ${message}`, CODES.QUERY_TIMEOUT);
        // The daemon went away (idle exit, restart) or broke: drop the connection, try once more.
        this.#drop(conn);
        if (attempt === 1) this.fallbackReason = message;
      }
    }
    return { envelope: await this.#exec(query, limit, perBackend, scope, trim), via: "exec" };
  }

  /** Per backend, the daemon's index freshness (qmd's `refresh` runtime facts: pending files and
   * last update per collection, a refresh running or failed), asked of the daemon serving this
   * context; null when none serves it (a status never starts a daemon).
   * @returns {Promise<Record<string, Record<string, any>> | null>} */
  async indexFreshness(timeoutMs = 5000) {
    let conn = this.connection && !this.connection.closed ? this.connection : null;
    try {
      conn ??= await this.#connect(false);
      const answer = await conn.request({ op: "stats" }, timeoutMs);
      /** @type {Record<string, Record<string, any>>} */
      const out = {};
      for (const [name, facts] of Object.entries(/** @type {Record<string, any>} */ (answer?.stats?.runtime ?? {}))) {
        if (facts && typeof facts.refresh === "object" && facts.refresh !== null) out[name] = facts.refresh;
      }
      return out;
    } catch {
      return null;
    }
  }

  /** What status() reports about the transport. */
  describe() {
    return {
      socket: this.socketPath,
      socketPresent: fs.existsSync(this.socketPath),
      daemonPid: this.daemon?.pid ?? null,
      daemonVersion: this.daemon?.version ?? null,
      transport: this.connection && !this.connection.closed ? "daemon" : this.fallbackReason ? "exec" : "idle",
      fallbackReason: this.fallbackReason,
      ...this.counters,
    };
  }

  /** Close the connection (never the daemon: it serves other clients and exits when idle). */
  close() {
    this.connection?.close();
    this.connection = null;
    this.daemon = null;
  }

  // ------------------------------------------------------------------ the daemon

  #connection() {
    if (this.connection && !this.connection.closed) return Promise.resolve(this.connection);
    // Concurrent first queries share one connect (and at most one daemon start).
    this.connecting ??= this.#connect().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  /** @param {Connection} conn */
  #drop(conn) {
    conn.close();
    if (this.connection === conn) {
      this.connection = null;
      this.daemon = null;
    }
  }

  /** @returns {Promise<Connection>} */
  async #connect(mayStart = true) {
    let conn = await this.#open(this.socketPath, mayStart);
    let diff = this.#diff();
    if (diff.length && !this.settings.socket) {
      // The shared socket is served for another context (another workspace, environment or
      // config): use a socket of this context's own, next to it.
      const names = Object.keys(this.daemon?.context?.env ?? {});
      const own = path.join(this.settings.stateDir, `router-openclaw-${contextTag(this.settings, names)}.sock`);
      this.#warnOnce(`ctx:${own}`, `memory-router: the daemon at ${this.socketPath} serves another context (differs in ${diff.join(", ")}); using ${own}`);
      conn.close();
      this.socketPath = own;
      conn = await this.#open(own, mayStart);
      diff = this.#diff();
    }
    if (diff.length) {
      conn.close();
      throw new DaemonError(
        `the daemon at ${this.socketPath} (pid ${this.daemon?.pid}) serves another context (differs in ${diff.join(", ")}); ` +
          `stop it (memory-router daemon stop --state-dir ${this.settings.stateDir}) or set the plugin's socket`,
      );
    }
    this.connection = conn;
    this.fallbackReason = null;
    return conn;
  }

  #diff() {
    return contextDiff(expectedContext(this.settings, this.daemon?.context), this.daemon?.context);
  }

  /** Connect and shake hands; start a daemon when nothing listens (once per client).
   * @param {string} socketPath
   * @param {boolean} mayStart
   * @returns {Promise<Connection>} */
  async #open(socketPath, mayStart) {
    let conn = new Connection(socketPath);
    try {
      await conn.open();
    } catch (err) {
      if (!(err instanceof DaemonError) || !err.absent || !mayStart) throw err;
      const child = await this.#start(socketPath);
      conn = await this.#waitFor(socketPath, child);
    }
    this.counters.connections++;
    /** @type {Hello} */
    let hello;
    try {
      hello = /** @type {Hello} */ (await conn.request({ op: "hello", protocol: PROTOCOL, version: PLUGIN_VERSION }, 5000));
    } catch (err) {
      conn.close();
      throw err;
    }
    if (hello.op !== "hello" || hello.protocol !== PROTOCOL) {
      conn.close();
      const why = hello.error_message ? `refused the connection: ${hello.error_message}` : `speaks protocol ${hello.protocol ?? "unknown"}, not ${PROTOCOL}; restart it: memory-router daemon stop`;
      throw new DaemonError(`the daemon at ${socketPath} ${why}`);
    }
    this.daemon = hello;
    return conn;
  }

  /** Wait for the daemon `child` (just started) to listen. `serve` exits 2 both when another
   * daemon holds the socket's lock (it may be starting, or draining before it exits) and for
   * every configuration error (docs/cli.md, exit codes): its stderr in daemon.log tells which.
   * A configuration error (or any other exit) fails at once with serve's own message; a lock
   * holder that is still alive is waited for, and once it has exited a new daemon is started.
   * @param {string} socketPath
   * @param {Started} child
   * @returns {Promise<Connection>} */
  async #waitFor(socketPath, child) {
    const deadline = Date.now() + START_WAIT_MS;
    const log = path.join(this.settings.stateDir, "daemon.log");
    let restarts = 0;
    for (;;) {
      const conn = new Connection(socketPath);
      try {
        return await conn.open();
      } catch (err) {
        if (child.exited !== null) {
          const said = serveMessage(log, child.logOffset);
          const holder = child.exited === 2 ? lockHolder(said) : null;
          if (holder === null) {
            const code = child.exited === 2 ? CODES.DAEMON_CONFIG_ERROR : CODES.DAEMON_START_FAILED;
            throw new DaemonError(`the daemon exited (${child.exited}) before listening on ${socketPath}${said ? `: ${said}` : `; see ${log}`}`, { code });
          }
          // Another daemon holds the socket: starting (it will listen) or draining (it will go).
          if (holder.pid && !alive(holder.pid) && restarts < MAX_RESTARTS) {
            restarts++;
            child = await this.#start(socketPath);
            continue;
          }
        }
        if (Date.now() > deadline) {
          throw new DaemonError(`the daemon did not start listening on ${socketPath} within ${START_WAIT_MS / 1000} s; see ${log}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  /** Start `memory-router serve --socket` detached (as `query --spawn` does: own session, no
   * terminal, stderr to <state dir>/daemon.log), with this plugin's state dir and memory root.
   * @param {string} socketPath
   * @returns {Promise<Started>} */
  async #start(socketPath) {
    const s = this.settings;
    if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH) {
      throw new DaemonError(`the socket path ${socketPath} is longer than a Unix socket path may be (107 bytes); set the plugin's socket to a shorter path`);
    }
    if (!fs.existsSync(s.stateDir)) {
      throw new DaemonError(`the state directory ${s.stateDir} does not exist (it holds backends.json); run memory-router's installer, or set the plugin's stateDir`);
    }
    if (!fs.existsSync(s.memoryRoot)) {
      throw new DaemonError(`the memory root ${s.memoryRoot} does not exist; create the agent workspace, or set the plugin's memoryRoot`);
    }
    const argv = ["serve", "--socket", socketPath, "--idle-exit", String(IDLE_EXIT_S), "--state-dir", s.stateDir];
    if (s.config) argv.push("--config", s.config);
    let log;
    try {
      // Never through a symlink (statedir.open_private refuses them too).
      log = fs.openSync(path.join(s.stateDir, "daemon.log"), fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_APPEND | fs.constants.O_NOFOLLOW, 0o600);
    } catch (err) {
      throw new DaemonError(`cannot write ${path.join(s.stateDir, "daemon.log")}: ${errorFacts(err).message}`);
    }
    const logOffset = fs.fstatSync(log).size; // this daemon's stderr starts here
    try {
      const child = spawn(s.command, argv, { cwd: s.memoryRoot, env: s.env, detached: true, stdio: ["ignore", "ignore", log] });
      await new Promise((resolve, reject) => {
        child.once("spawn", resolve);
        child.once("error", (err) => reject(new DaemonError(this.#commandError(err))));
      });
      /** @type {Started} */
      const started = { pid: child.pid, exited: null, logOffset };
      child.once("exit", (code, signal) => {
        started.exited = code ?? signal;
      });
      child.unref();
      this.counters.spawns++;
      this.logger.info?.(`memory-router: started a daemon (pid ${child.pid}) on ${socketPath}`);
      return started;
    } finally {
      fs.closeSync(log);
    }
  }

  /** @param {unknown} err */
  #commandError(err) {
    const { code, message } = errorFacts(err);
    return code === "ENOENT"
      ? `${this.settings.command} not found; install memory-router or set plugins.entries.memory-router.config.command to its path`
      : `cannot run ${this.settings.command}: ${message}`;
  }

  // ------------------------------------------------------------------ the exec fallback

  /** `memory-router query` as a child process (argument list, no shell), its process group
   * killed on timeout. It prints an envelope on stdout for exit codes 0, 1 and 2 alike.
   * @param {string} query
   * @param {number | undefined} limit
   * @param {number} timeoutMs
   * @param {Scope | undefined} scope
   * @param {{minRelevance?: number, maxChars?: number | null, since?: string, until?: string}} [trim]
   * @returns {Promise<Envelope>} */
  #exec(query, limit, timeoutMs, scope, trim = {}) {
    const s = this.settings;
    const argv = ["query", "--timeout-ms", String(timeoutMs), "--state-dir", s.stateDir];
    if (limit) argv.push("--limit", String(Math.min(1000, limit)));
    if (s.config) argv.push("--config", s.config);
    if (scope?.agent) argv.push("--agent", scope.agent);
    if (scope?.session_key) argv.push("--session-key", scope.session_key);
    if (typeof trim.minRelevance === "number") argv.push("--min-relevance", String(trim.minRelevance));
    if (Number.isInteger(trim.maxChars)) argv.push("--max-chars", String(trim.maxChars));
    // One token each (--since=VALUE): a value that starts with "-" is still the value.
    if (trim.since) argv.push(`--since=${trim.since}`);
    if (trim.until) argv.push(`--until=${trim.until}`);
    argv.push("--", query);
    const wait = Math.max(10000, 4 * timeoutMs + 5000);
    return new Promise((resolve, reject) => {
      /** @type {import("node:child_process").ChildProcessByStdio<null, import("node:stream").Readable, import("node:stream").Readable>} */
      let child;
      try {
        child = spawn(s.command, argv, { cwd: fs.existsSync(s.memoryRoot) ? s.memoryRoot : s.stateDir, env: s.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
      } catch (err) {
        reject(new RouterError(this.#commandError(err)));
        return;
      }
      /** @type {Buffer[]} */
      const out = [];
      /** @type {Buffer[]} */
      const err = [];
      child.stdout.on("data", (c) => out.push(c));
      child.stderr.on("data", (c) => err.push(c));
      const timer = setTimeout(() => {
        try {
          if (child.pid) process.kill(-child.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }, wait);
      child.once("error", (e) => {
        clearTimeout(timer);
        reject(new RouterError(this.#commandError(e)));
      });
      child.once("close", (code, signal) => {
        clearTimeout(timer);
        this.counters.execQueries++;
        const text = Buffer.concat(out).toString("utf8").trim();
        try {
          resolve(JSON.parse(text));
        } catch {
          const stderr = Buffer.concat(err).toString("utf8").trim().split("\n").slice(-3).join(" ");
          const how = signal ? `was killed (${signal}) after ${wait / 1000} s` : `exited ${code} without an envelope`;
          reject(new RouterError(`${s.command} query ${how}${stderr ? `: ${stderr}` : ""}`));
        }
      });
    });
  }

  /** @param {string} key @param {string} message */
  #warnOnce(key, message) {
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.logger.warn?.(message);
  }
}
