// @ts-check
// A fake of commander's Command (OpenClaw hands its program to a plugin's CLI registrar), for the
// tests: it records the commands, arguments and options declared, and runs an action as commander
// would, with the positional arguments and then the options, parsed by their functions.
/** @import { Command } from "../../lib/host.js" */

/** @implements {Command} */
export class FakeProgram {
  /** @param {string} [name] */
  constructor(name = "openclaw") {
    this.name = name;
    this.text = "";
    /** @type {Map<string, FakeProgram>} */
    this.commands = new Map();
    /** @type {string[]} */
    this.arguments = [];
    /** @type {Map<string, {flags: string, parse?: (value: string) => unknown}>} */
    this.options = new Map();
    /** @type {((...args: any[]) => void | Promise<void>) | null} */
    this.handler = null;
  }

  /** @param {string} name */
  command(name) {
    const sub = new FakeProgram(name);
    this.commands.set(name, sub);
    return sub;
  }

  /** @param {string} text */
  description(text) {
    this.text = text;
    return this;
  }

  /** @param {string} name */
  argument(name) {
    this.arguments.push(name);
    return this;
  }

  /**
   * @param {string} flags
   * @param {string} _description
   * @param {(value: string) => unknown} [parse]
   * @returns {FakeProgram}
   */
  option(flags, _description, parse) {
    const long = /** @type {string} */ (/--([a-z-]+)/.exec(flags)?.[1]);
    this.options.set(long.replace(/-([a-z])/g, (_, c) => c.toUpperCase()), { flags, parse });
    return this;
  }

  /** @param {(...args: any[]) => void | Promise<void>} handler */
  action(handler) {
    this.handler = handler;
    return this;
  }

  /**
   * Run `path` (e.g. ["memory", "search"]) with positional `args` and raw option values.
   * @param {string[]} path
   * @param {string[]} args
   * @param {Record<string, string | true>} [raw]
   */
  async run(path, args, raw = {}) {
    /** @type {FakeProgram | undefined} */
    let at = this;
    for (const name of path) at = at?.commands.get(name);
    if (!at?.handler) throw new Error(`no command ${path.join(" ")}`);
    /** @type {Record<string, unknown>} */
    const opts = {};
    for (const [key, value] of Object.entries(raw)) {
      const option = at.options.get(key);
      if (!option) throw new Error(`${path.join(" ")} has no option ${key}`);
      opts[key] = option.parse && value !== true ? option.parse(value) : value;
    }
    const positional = at.arguments.map((_, i) => args[i]);
    await at.handler(...positional, opts);
  }
}
