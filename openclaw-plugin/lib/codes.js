// @ts-check
// memory-router's error codes, one per row of memory_router/contract.py ERROR_CODES, the one
// table. Generated, do not edit: `MR_WRITE_DOCS=1 python3 -m pytest -q tests/unit/test_error_codes.py`
// rewrites it, and that test fails while it differs from the table.
//
// The daemon's `hello` carries the same table with its columns (`error_codes`: exit, origin,
// retry): which answers are retried is read from there (router.js `retryCodes`). These names
// are for the codes the plugin gives its own errors, so a typo is a type error, not a new code.

export const CODES = Object.freeze({
  /** an error the user can fix, of no more specific kind (router, exit 2) */
  ROUTER_ERROR: "ROUTER_ERROR",
  /** the query is empty or only whitespace (router, exit 2) */
  EMPTY_QUERY: "EMPTY_QUERY",
  /** the query is longer than `max_query_chars` (router, exit 2) */
  QUERY_TOO_LONG: "QUERY_TOO_LONG",
  /** the query (stdin, argv or a request line) is not valid UTF-8 (router, exit 2) */
  INVALID_UTF8: "INVALID_UTF8",
  /** `--agent`/`--session-key` (or a request's `scope`) is not a scope (router, exit 2) */
  INVALID_SCOPE: "INVALID_SCOPE",
  /** `--since`/`--until` (or a request's) cannot be read (router, exit 2) */
  INVALID_TIME_RANGE: "INVALID_TIME_RANGE",
  /** router-config.json (or openclaw.json) cannot be used (config, exit 2) */
  CONFIG_INVALID: "CONFIG_INVALID",
  /** backends.json does not exist (`memory-router init`) (config, exit 2) */
  BACKENDS_JSON_MISSING: "BACKENDS_JSON_MISSING",
  /** backends.json is malformed (config, exit 2) */
  BACKENDS_JSON_INVALID: "BACKENDS_JSON_INVALID",
  /** `init` would replace an existing backends.json (`--force`) (config, exit 2) */
  BACKENDS_JSON_EXISTS: "BACKENDS_JSON_EXISTS",
  /** the state dir is another user's or others can write it (config, exit 2) */
  STATE_DIR_UNSAFE: "STATE_DIR_UNSAFE",
  /** `--daemon require` and no daemon serving this context answered (client, exit 2) */
  DAEMON_UNAVAILABLE: "DAEMON_UNAVAILABLE",
  /** every backend in the fallback chain failed (router, exit 1) */
  ALL_BACKENDS_FAILED: "ALL_BACKENDS_FAILED",
  /** no backend of the rule's chain is usable here (router, exit 1) */
  NO_BACKEND_AVAILABLE: "NO_BACKEND_AVAILABLE",
  /** the query's overall deadline ran out (an attempt's code) (router, exit 1) */
  DEADLINE_EXCEEDED: "DEADLINE_EXCEEDED",
  /** a backend that just failed is skipped for a while (an attempt's code) (router, exit 1) */
  COOLDOWN: "COOLDOWN",
  /** the backend ran and failed (an attempt's code) (backend, exit 1) */
  BACKEND_ERROR: "BACKEND_ERROR",
  /** the backend cannot run here (an attempt's code) (backend, exit 1) */
  BACKEND_UNAVAILABLE: "BACKEND_UNAVAILABLE",
  /** the backend did not answer within `timeout_ms` (an attempt's code) (backend, exit 1) */
  QUERY_TIMEOUT: "QUERY_TIMEOUT",
  /** a request line is JSON of the wrong shape (daemon, exit 1) */
  INVALID_REQUEST: "INVALID_REQUEST",
  /** a request line is not JSON (daemon, exit 1) */
  INVALID_JSON: "INVALID_JSON",
  /** a request line is longer than the daemon reads (daemon, exit 1) */
  REQUEST_TOO_LARGE: "REQUEST_TOO_LARGE",
  /** the daemon failed answering (a bug; stderr says why) (daemon, exit 1) */
  INTERNAL_ERROR: "INTERNAL_ERROR",
  /** the daemon is stopping and answers nothing more (daemon, exit 1) */
  SHUTTING_DOWN: "SHUTTING_DOWN",
  /** the daemon refused the connection (its connection cap) (daemon, exit 1) */
  FORBIDDEN: "FORBIDDEN",
  /** a query sent with the thin client's context reached a daemon serving another one: not routed (daemon, exit 1) */
  CONTEXT_MISMATCH: "CONTEXT_MISMATCH",
  /** the plugin could not get an envelope (it names why) (plugin, never reaches `query`) */
  MEMORY_ROUTER_ERROR: "MEMORY_ROUTER_ERROR",
  /** the daemon the plugin started exited 2 (a configuration error) (plugin, never reaches `query`) */
  DAEMON_CONFIG_ERROR: "DAEMON_CONFIG_ERROR",
  /** the daemon the plugin started exited before listening (plugin, never reaches `query`) */
  DAEMON_START_FAILED: "DAEMON_START_FAILED",
  /** `memory_get` was given no path or an absolute one (plugin, never reaches `query`) */
  INVALID_PATH: "INVALID_PATH",
  /** `memory_get`'s path leaves the memory root (plugin, never reaches `query`) */
  PATH_OUTSIDE_ROOT: "PATH_OUTSIDE_ROOT",
  /** `memory_get`'s file is larger than it reads (plugin, never reaches `query`) */
  FILE_TOO_LARGE: "FILE_TOO_LARGE",
  /** `memory_get`'s path is not a memory file (memory-core's code) (plugin, never reaches `query`) */
  MEMORY_PATH_NOT_ALLOWED: "MEMORY_PATH_NOT_ALLOWED",
  /** `memory_get` could not read the file (plugin, never reaches `query`) */
  MEMORY_READ_FAILED: "MEMORY_READ_FAILED",
});
