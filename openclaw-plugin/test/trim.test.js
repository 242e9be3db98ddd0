// @ts-check
// lib/trim.js: memory-core's minScore as a floor on each hit, and the text budget the plugin then
// applies to the hits left (memory_router/core/trim.py's, held equal to it by
// tests/openclaw/test_plugin_modules.py).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { budgetHits, dropUnder } from "../lib/trim.js";
import { envelope } from "./support/daemon.js";
/** @import { Envelope } from "../lib/mapping.js" */

/** @param {[string, number][]} hits @returns {Envelope} */
function withHits(hits) {
  const results = hits.map(([content, relevance]) => ({ content, relevance, source: "lossless", timestamp: null }));
  return /** @type {Envelope} */ (envelope({ results, result_count: results.length }));
}

describe("minScore, hit by hit", () => {
  test("drops each hit under it, keeps the router's order and says how many", () => {
    const { envelope: out, floor } = dropUnder(withHits([["a", 0.9], ["b", 0.1], ["c", 0.5], ["d", 0.49]]), 0.5);
    assert.deepEqual(out.results?.map((h) => h.content), ["a", "c"]); // at the floor is kept
    assert.deepEqual(floor, { min_score: 0.5, dropped: 2 });
  });

  test("an answer it leaves whole is the same object, with nothing to say", () => {
    const env = withHits([["a", 0.9], ["b", 0.3]]);
    assert.deepEqual(dropUnder(env, 0.3), { envelope: env, floor: null });
    assert.deepEqual(dropUnder(withHits([]), 0.3).floor, null);
  });
});

describe("the budget", () => {
  test("whole hits in rank order while they fit; a smaller later one does not jump the queue", () => {
    const { envelope: out, budget } = budgetHits(withHits([["a".repeat(10), 0.9], ["b".repeat(30), 0.8], ["c", 0.7]]), 25);
    assert.deepEqual(out.results?.map((h) => h.content), ["a".repeat(10)]);
    assert.deepEqual(budget, { max_chars: 25, kept: 1, cut: 2, chars: 10, truncated: false });
  });

  test("a first hit alone larger is cut to the budget, counted in code points", () => {
    const { envelope: out, budget } = budgetHits(withHits([["😀".repeat(8), 0.9], ["x", 0.8]]), 5);
    assert.deepEqual(out.results?.map((h) => h.content), ["😀".repeat(5)]); // never half a surrogate pair
    assert.deepEqual(budget, { max_chars: 5, kept: 1, cut: 1, chars: 5, truncated: true });
  });

  test("an answer that fits, or has no hits, is left as it is", () => {
    const env = withHits([["é".repeat(10), 0.9], ["ü".repeat(10), 0.8]]);
    assert.deepEqual(budgetHits(env, 20), { envelope: env, budget: null });
    assert.deepEqual(budgetHits(withHits([]), 1).budget, null);
  });
});
