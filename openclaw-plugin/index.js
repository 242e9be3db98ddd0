// @ts-check
// memory-router as OpenClaw's memory slot: the memory capability (Gateway memory.search,
// status), the agent's memory_search / memory_get tools and the `openclaw memory` command, all
// answered by memory-router's warm socket daemon (see lib/router.js), never a Python process per
// query unless the socket cannot be used.
import { MemoryRouterPlugin, memoryRuntime } from "./lib/manager.js";
import { memoryPromptSection } from "./lib/prompt.js";
import { createGetTool, createSearchTool } from "./lib/tools.js";
/** @import { CliDescriptor, HostApi } from "./lib/host.js" */

/**
 * The `memory` command, as OpenClaw lists it before it loads the plugin's CLI (the manifest's
 * `cliCommands` says the same).
 * @type {CliDescriptor}
 */
const MEMORY_COMMAND = Object.freeze({
  name: "memory",
  description: "Search memory through memory-router, and show its status",
  hasSubcommands: true,
});

export default {
  id: "memory-router",
  name: "memory-router",
  description: "Memory search through memory-router's warm daemon",
  /** @param {HostApi} api */
  register(api) {
    const plugin = new MemoryRouterPlugin(api);
    api.registerMemoryCapability({ runtime: memoryRuntime(plugin), promptBuilder: memoryPromptSection });
    api.registerTool((ctx) => createSearchTool(plugin, ctx), { names: ["memory_search"] });
    api.registerTool((ctx) => createGetTool(plugin, ctx), { names: ["memory_get"] });
    // The command's code is loaded when OpenClaw runs a `memory` command, not when the Gateway
    // loads the plugin: OpenClaw's own plugins register their CLI the same way (memory-core).
    api.registerCli(
      async (ctx) => {
        const { registerMemoryCli } = await import("./lib/cli.js");
        registerMemoryCli(plugin, ctx);
      },
      { descriptors: [MEMORY_COMMAND] },
    );
  },
};
