// @ts-check
// memory-core's `minScore`, kept with memory-core's meaning: a floor on each hit.
//
// memory-router's own floor (`min_relevance`, memory_router/core/trim.py) judges the answer: an
// answer whose best hit is under it abstains, one that reaches it comes back whole, because the
// calibrated relevance falls with rank and a per-hit floor cut the evidence from the tail of
// answers it kept (docs/abstention.md). A caller who passes `minScore` asks memory-core's question
// instead, so the plugin drops the hits under it here, after memory-router has abstained on an
// answer with none at or above it (the same value as its `min_relevance`). The text budget then
// counts only the hits that passed, as memory-router's does after its floor: `budgetHits` is
// core/trim.py's `_budget`, held equal to it by tests/openclaw/test_plugin_modules.py.
/** @import { Envelope, Hit } from "./mapping.js" */

/**
 * What the per-hit floor dropped (the tool's `floor` field; memory-router's envelopes have none).
 * @typedef {{min_score: number, dropped: number}} HitFloor
 */

/**
 * What the text budget cut (memory-router's `budget` field, the same keys).
 * @typedef {{max_chars: number, kept: number, cut: number, chars: number, truncated: boolean}} Budget
 */

/** `envelope` without the hits whose relevance is under `minScore`, in the router's order, and
 * what was dropped (null: nothing).
 * @param {Envelope} envelope
 * @param {number} minScore
 * @returns {{envelope: Envelope, floor: HitFloor | null}} */
export function dropUnder(envelope, minScore) {
  const results = envelope.results ?? [];
  const kept = results.filter((hit) => hit.relevance >= minScore);
  if (kept.length === results.length) return { envelope, floor: null };
  return { envelope: { ...envelope, results: kept }, floor: { min_score: minScore, dropped: results.length - kept.length } };
}

/** The number of Unicode code points of `text` (Python's len(), not UTF-16 units).
 * @param {string} text */
function codePoints(text) {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** `text`'s first `count` code points.
 * @param {string} text @param {number} count */
function firstCodePoints(text, count) {
  return Array.from(text).slice(0, count).join("");
}

/** `envelope` with at most `maxChars` characters of hits: whole hits in rank order while they fit,
 * a first hit alone larger cut to the budget (never dropped, and then alone), and what was cut (null: nothing).
 * @param {Envelope} envelope
 * @param {number} maxChars
 * @returns {{envelope: Envelope, budget: Budget | null}} */
export function budgetHits(envelope, maxChars) {
  const results = envelope.results ?? [];
  if (!results.length) return { envelope, budget: null };
  const [first, ...rest] = results;
  const content = typeof first.content === "string" ? first.content : "";
  const truncated = codePoints(content) > maxChars;
  /** @type {Hit[]} */
  const kept = [truncated ? { ...first, content: firstCodePoints(content, maxChars) } : first];
  let chars = codePoints(kept[0].content);
  // A first hit cut to the budget is the whole answer (not even an empty hit follows it).
  for (const hit of truncated ? [] : rest) {
    const size = codePoints(typeof hit.content === "string" ? hit.content : "");
    if (chars + size > maxChars) break;
    kept.push(hit);
    chars += size;
  }
  const cut = results.length - kept.length;
  if (!cut && !truncated) return { envelope, budget: null };
  return { envelope: { ...envelope, results: kept }, budget: { max_chars: maxChars, kept: kept.length, cut, chars, truncated } };
}
