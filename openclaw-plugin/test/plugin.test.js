// @ts-check
// index.js: what the plugin registers with OpenClaw, matching its manifest, and its CLI loaded
// only when OpenClaw runs a `memory` command (as OpenClaw's own plugins load theirs).
import assert from "node:assert/strict";
import fs from "node:fs";
import { registerHooks } from "node:module";
import { test } from "node:test";
import { FakeProgram } from "./support/program.js";
/** @import { CliContext, CliDescriptor, HostApi, Tool, ToolContext } from "../lib/host.js" */

// Every module this process loads from here on, to see when lib/cli.js is.
/** @type {string[]} */
const loaded = [];
registerHooks({
  load(url, context, nextLoad) {
    loaded.push(url);
    return nextLoad(url, context);
  },
});
const cliLoaded = () => loaded.some((url) => url.endsWith("/lib/cli.js"));
const manifest = JSON.parse(fs.readFileSync(new URL("../openclaw.plugin.json", import.meta.url), "utf8"));
const pkg = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8"));

/** What a host would have been told by register(api). */
function register() {
  /** @type {{tools: [(ctx: ToolContext) => Tool, {names: string[]}][], clis: [(ctx: CliContext) => void | Promise<void>, {descriptors: CliDescriptor[]}][], memory: unknown[]}} */
  const seen = { tools: [], clis: [], memory: [] };
  /** @type {HostApi} */
  const api = {
    pluginConfig: {},
    config: {},
    logger: {},
    registerMemoryCapability: (capability) => seen.memory.push(capability),
    registerTool: (factory, options) => seen.tools.push([factory, options]),
    registerCli: (registrar, options) => seen.clis.push([registrar, options]),
  };
  return { api, seen };
}

test("the entry OpenClaw loads is package.json's, with the manifest's id", async () => {
  assert.deepEqual(pkg.openclaw.extensions, ["./index.js"]);
  const { default: entry } = await import("../index.js");
  assert.equal(entry.id, manifest.id);
  assert.equal(pkg.name, manifest.id);
});

test("it registers the memory capability, the manifest's tools and its command, and loads the CLI only when run", async () => {
  const { default: entry } = await import("../index.js");
  const { api, seen } = register();
  entry.register(api);
  assert.equal(seen.memory.length, 1);
  assert.deepEqual(
    seen.tools.map(([, options]) => options.names).flat(),
    manifest.contracts.tools,
  );
  assert.deepEqual(
    seen.tools.map(([factory]) => factory({}).name),
    manifest.contracts.tools,
  );
  const [[registrar, { descriptors }]] = seen.clis;
  assert.deepEqual(descriptors, manifest.cliCommands);
  assert.equal(cliLoaded(), false, "lib/cli.js was loaded with the plugin, before any command ran");

  const program = new FakeProgram();
  await registrar({ program, config: {} });
  assert.equal(cliLoaded(), true);
  const memory = /** @type {FakeProgram} */ (program.commands.get("memory"));
  assert.equal(memory.text, manifest.cliCommands[0].description);
  assert.deepEqual([...memory.commands.keys()], ["search", "status"]);
});
