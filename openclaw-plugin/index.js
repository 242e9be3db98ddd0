// memory-router as OpenClaw's memory slot: the memory capability (Gateway memory.search,
// status), the agent's memory_search / memory_get tools and the `openclaw memory` command, all
// answered by memory-router's warm socket daemon (see lib/router.js), never a Python process per
// query unless the socket cannot be used.
import { registerMemoryCli } from "./lib/cli.js";
import { MemoryRouterPlugin, memoryRuntime } from "./lib/manager.js";
import { createGetTool, createSearchTool } from "./lib/tools.js";

export default {
  id: "memory-router",
  name: "memory-router",
  description: "Memory search through memory-router's warm daemon",
  register(api) {
    const plugin = new MemoryRouterPlugin(api);
    api.registerMemoryCapability({ runtime: memoryRuntime(plugin) });
    api.registerTool((ctx) => createSearchTool(plugin, ctx), { names: ["memory_search"] });
    api.registerTool((ctx) => createGetTool(plugin, ctx), { names: ["memory_get"] });
    api.registerCli((ctx) => registerMemoryCli(plugin, ctx), {
      descriptors: [{ name: "memory", description: "Search memory through memory-router, and show its status", hasSubcommands: true }],
    });
  },
};
