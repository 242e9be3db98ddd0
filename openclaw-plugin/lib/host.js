// @ts-check
// What the plugin uses of its host, OpenClaw's plugin API (openclaw 2026.9.6, plugin-sdk
// `OpenClawPluginApi`), as JSDoc types. OpenClaw is the host, not a dependency, so its own types
// are not installed here: these name only the members the plugin calls, in the shapes the host
// gives them (tests/openclaw/ runs the plugin inside the real OpenClaw).
/** @import { PluginConfig } from "./settings.js" */
/** @import { MemoryRuntime } from "./manager.js" */
/** @import { PromptParams } from "./prompt.js" */

/**
 * The host's logger (api.logger); the plugin logs through it when it has one.
 * @typedef {object} Logger
 * @property {(message: string) => void} [info]
 * @property {(message: string) => void} [warn]
 */

/**
 * One agent of OpenClaw's roster (`agents.list[]`, or `agents.entries` keyed by id).
 * @typedef {object} AgentEntry
 * @property {string} [id]
 * @property {boolean} [default]
 * @property {string} [workspace]
 */

/**
 * OpenClaw's config (openclaw.json), as far as the plugin reads it.
 * @typedef {object} HostConfig
 * @property {{defaults?: {workspace?: string}, list?: AgentEntry[], entries?: Record<string, AgentEntry | null>}} [agents]
 */

/**
 * The host's helpers the plugin resolves its defaults with (an older host may lack them). The
 * config handed to resolveAgentWorkspaceDir is the host's own (a method: it takes it back whole).
 * @typedef {object} HostRuntime
 * @property {{resolveStateDir?(env?: Record<string, string | undefined>): string}} [state]
 * @property {{resolveAgentWorkspaceDir?(cfg: HostConfig, agentId: string,
 *   env?: Record<string, string | undefined>): string}} [agent]
 */

/**
 * What a tool factory is given: the asking agent and session, and the host's current config.
 * @typedef {object} ToolContext
 * @property {string} [agentId]
 * @property {string} [sessionKey]
 * @property {() => HostConfig | undefined} [getRuntimeConfig]
 * @property {HostConfig} [runtimeConfig]
 * @property {HostConfig} [config]
 */

/**
 * A tool's answer: the payload as text for the model, and as `details` for the host.
 * @typedef {{content: {type: "text", text: string}[], details: Record<string, unknown>}} ToolResult
 */

/**
 * An agent tool (memory_search, memory_get).
 * @typedef {object} Tool
 * @property {string} name
 * @property {string} label
 * @property {string} description
 * @property {Record<string, unknown>} parameters its JSON schema
 * @property {(toolCallId: string, params: Record<string, any> | undefined) => Promise<ToolResult>} execute
 */

/**
 * commander's Command, as far as the `memory` command uses it (OpenClaw hands over its program).
 * @typedef {{
 *   command(name: string): Command,
 *   description(text: string): Command,
 *   argument(name: string, description: string): Command,
 *   option(flags: string, description: string): Command,
 *   option(flags: string, description: string, parse: (value: string) => unknown): Command,
 *   action(handler: (...args: any[]) => void | Promise<void>): Command,
 * }} Command
 */

/**
 * What a CLI registrar is given.
 * @typedef {{program: Command, config?: HostConfig}} CliContext
 */

/**
 * A top-level command the plugin provides: OpenClaw lists it before it loads the registrar.
 * @typedef {{name: string, description: string, hasSubcommands: boolean}} CliDescriptor
 */

/**
 * The plugin API (`register(api)`), as far as the plugin uses it.
 * @typedef {object} HostApi
 * @property {PluginConfig} [pluginConfig] validated by the host against openclaw.plugin.json
 * @property {HostConfig} [config]
 * @property {Logger} [logger]
 * @property {HostRuntime} [runtime]
 * @property {(capability: {runtime: MemoryRuntime, promptBuilder: (params: PromptParams) => string[]}) => void} registerMemoryCapability
 * @property {(factory: (ctx: ToolContext) => Tool, options: {names: string[]}) => void} registerTool
 * @property {(registrar: (ctx: CliContext) => void | Promise<void>, options: {descriptors: CliDescriptor[]}) => void} registerCli
 */

export {};
