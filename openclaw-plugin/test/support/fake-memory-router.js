// @ts-check
// A fake `memory-router` for the plugin's tests (see daemon.js): `query` prints an envelope that
// also says how it was called, `serve --socket` listens as a fake daemon. FAKE_MR_SERVE picks how
// `serve` behaves: "listen" (default), "config-error" (serve's own exit 2 for a bad config),
// "exit1"; FAKE_MR_QUERY=no-envelope makes `query` exit 3 with a message on stderr only.
import fs from "node:fs";
import path from "node:path";
import { contextOf, envelope, fakeDaemon } from "./daemon.js";

const [command, ...args] = process.argv.slice(2);

/** @param {string} flag */
function option(flag) {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}

if (command === "query") {
  if (process.env.FAKE_MR_QUERY === "no-envelope") {
    process.stderr.write("Traceback (most recent call last):\n  ...\nRuntimeError: the fake broke\n");
    process.exit(3);
  }
  const query = args[args.indexOf("--") + 1];
  const called = { argv: args, cwd: process.cwd(), repoRoot: process.env.OPENCLAW_REPO_ROOT };
  process.stdout.write(`${JSON.stringify(envelope({ query_echo: query, called }))}\n`);
} else if (command === "serve") {
  const stateDir = /** @type {string} */ (option("--state-dir"));
  fs.writeFileSync(path.join(stateDir, "fake-serve.json"), JSON.stringify({ argv: args, cwd: process.cwd() }));
  const mode = process.env.FAKE_MR_SERVE ?? "listen";
  if (mode === "config-error") {
    process.stderr.write("memory-router serve: router-config.json: rules[0].match: not a list (CONFIG_INVALID)\n");
    process.exit(2);
  }
  if (mode === "exit1") process.exit(1);
  const settings = { memoryRoot: process.cwd(), stateDir, config: option("--config") ?? null, env: process.env };
  const daemon = await fakeDaemon(/** @type {string} */ (option("--socket")), {
    context: contextOf(settings),
    answer: (request) => (request.op === "stats" ? { op: "stats", stats: { runtime: {} } } : envelope({ query_echo: request.query })),
  });
  // Gone once its clients are (the real one waits --idle-exit seconds), or when told.
  setInterval(() => {
    if (daemon.requests.length > 0 && daemon.connections() === 0) daemon.close().then(() => process.exit(0));
  }, 300).unref();
  setTimeout(() => process.exit(0), 60000);
  process.on("SIGTERM", () => process.exit(0));
}
