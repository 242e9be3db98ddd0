// @ts-check
// The plugin's picture of its host (lib/host.js) against OpenClaw's own types: the real
// OpenClawPluginApi must be a HostApi (so every member the plugin calls exists, with the
// arguments it passes, and every callback it hands over, tools, the memory capability, the CLI
// registrar, has the shape OpenClaw calls it with), and the plugin's entry an
// OpenClawPluginDefinition. Needs the OpenClaw that .ci/setup.d/50-openclaw.sh installs into
// .tools/ (tsconfig.json here maps its types); tests/openclaw/test_plugin_host_types.py runs it.
import entry from "../../index.js";
/** @import { OpenClawPluginApi, OpenClawPluginDefinition } from "openclaw/plugin-sdk/core" */
/** @import { HostApi } from "../../lib/host.js" */

/**
 * @param {OpenClawPluginApi} api
 * @returns {HostApi}
 */
export function hostApi(api) {
  return api;
}

/** @type {OpenClawPluginDefinition} */
export const definition = entry;
