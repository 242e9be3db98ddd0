// @ts-check
// The "Memory Recall" section of the agent's system prompt. memory-core adds one when it holds
// the slot; with it disabled, the slot's plugin tells the agent when to use its tools.

/**
 * What the host tells the prompt builder: the tools this agent has, and whether citations are on.
 * @typedef {{availableTools?: ReadonlySet<string>, citationsMode?: string | null}} PromptParams
 */

/** The section's lines (none when the agent has neither tool).
 * @param {PromptParams} params
 * @returns {string[]} */
export function memoryPromptSection({ availableTools, citationsMode }) {
  const search = availableTools?.has?.("memory_search");
  const get = availableTools?.has?.("memory_get");
  if (!search && !get) return [];
  const lines = ["## Memory Recall"];
  if (search) {
    lines.push(
      "Before answering anything about prior work, decisions, dates, people, preferences, code locations or todos: " +
        "run memory_search" +
        (get ? "; use memory_get on a returned path to read more." : "."),
      "Each hit says which memory answered (memoryRouter.routed_to) and why (memoryRouter.rule). If memory_search " +
        "returns disabled=true, tell the user, with its warning and action. If the hits are weak, say you checked.",
    );
  } else {
    lines.push("To read a memory file or a remembered conversation summary you know the path of, use memory_get.");
  }
  lines.push(
    citationsMode === "off"
      ? "Citations are disabled: do not mention file paths or line numbers unless the user asks."
      : "Citations: include Source: <path#line> when it helps the user verify a memory.",
    "",
  );
  return lines;
}
