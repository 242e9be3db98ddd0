// @ts-check
// lib/mapping.js: memory-router's envelope in OpenClaw's shapes (MemorySearchResult hits, the
// paths memory_get reads back, its paging).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { HitCache, excerpt, routingFacts, toSearchResults, trimFacts } from "../lib/mapping.js";
import { envelope } from "./support/daemon.js";
/** @import { Envelope, Hit } from "../lib/mapping.js" */

/**
 * An envelope with these hits.
 * @param {Partial<Hit>[]} hits
 * @param {Record<string, unknown>} [over]
 * @returns {Envelope}
 */
function withHits(hits, over = {}) {
  const results = hits.map((h) => ({ content: "text", relevance: 0.5, source: "totalrecall", timestamp: null, ...h }));
  return /** @type {Envelope} */ (envelope({ results, ...over }));
}

describe("hits", () => {
  test("a file hit keeps its path and line; its end line counts the snippet's lines", () => {
    const [hit] = toSearchResults(withHits([{ path: "memory/x.md", line: 7, content: "a\nb\nc", relevance: 0.9 }]), { maxResults: 10 });
    assert.deepEqual(
      { path: hit.path, startLine: hit.startLine, endLine: hit.endLine, score: hit.score, snippet: hit.snippet },
      { path: "memory/x.md", startLine: 7, endLine: 9, score: 0.9, snippet: "a\nb\nc" },
    );
    assert.equal(hit.source, "memory");
    assert.equal(hit.citation, "memory/x.md#L7");
  });

  test("a hit that leaves lines out ends on the line it names; one naming a line before its start is not believed", () => {
    const content = 'user: "a"\n[… lines 8-19 left out …]\nuser: "b"';
    const results = toSearchResults(
      withHits([
        { path: "memory/x.md", line: 7, content, end_line: 20 },
        { path: "memory/y.md", line: 7, content, end_line: 3 },
      ]),
      { maxResults: 10 },
    );
    assert.deepEqual(
      results.map((r) => [r.startLine, r.endLine]),
      [
        [7, 20],
        [7, 9],
      ],
    );
  });

  test("a hit without a line starts at line 1", () => {
    const results = toSearchResults(withHits([{ path: "MEMORY.md" }, { path: "USER.md", line: 0 }, { path: "dreams.md", line: 2.5 }]), { maxResults: 10 });
    assert.deepEqual(
      results.map((r) => r.startLine),
      [1, 1, 1],
    );
  });

  test("every hit carries the routing facts and its own backend", () => {
    const env = withHits([{ source: "lossless", summary_id: "sum_1", timestamp: "2026-01-02T03:04:05Z" }], {
      routed_to: "totalrecall",
      status: "partial",
      fallback_chain: ["totalrecall", "lossless"],
      fallbacks_used: 1,
    });
    const [hit] = toSearchResults(env, { maxResults: 10 });
    assert.deepEqual(hit.memoryRouter, {
      backend: "lossless",
      timestamp: "2026-01-02T03:04:05Z",
      rule: { number: 3, id: "decision_recall" },
      routed_to: "totalrecall",
      routed_mode: null,
      status: "partial",
      fallback_chain: ["totalrecall", "lossless"],
      fallbacks_used: 1,
    });
  });

  test("every hit is mapped, weak ones too, in the router's order; maxResults cuts the rest", () => {
    const env = withHits([0.9, 0.2, 0.8, 0.7, 0.6].map((relevance, i) => ({ path: `memory/${i}.md`, relevance })));
    assert.deepEqual(
      toSearchResults(env, { maxResults: 3 }).map((r) => r.score),
      [0.9, 0.2, 0.8],
    );
  });
});

describe("paths of hits without a file", () => {
  test("Lossless and Cognee hits get memory-router/<backend>/<id>, each its own", () => {
    const results = toSearchResults(
      withHits([
        { source: "lossless", summary_id: "sum_1f" },
        { source: "lossless", message_id: 42, summary_id: "sum_leaf" },
        { source: "lossless", message_id: 43, summary_id: "sum_leaf" },
        { source: "cognee", content: "A --[calls]--> B", relationship: { source: "A", relation: "calls", target: "B" } },
        { source: "cognee", id: "doc/1 2" },
      ]),
      { maxResults: 10 },
    );
    const paths = results.map((r) => r.path);
    assert.deepEqual(paths.slice(0, 3), ["memory-router/lossless/sum_1f", "memory-router/lossless/message-42", "memory-router/lossless/message-43"]);
    assert.match(paths[3], /^memory-router\/cognee\/[0-9a-f]{16}$/);
    assert.equal(paths[4], "memory-router/cognee/doc_1_2"); // no separators from a backend's id
    assert.equal(results[0].citation, "memory-router/lossless/sum_1f"); // no line to cite
  });

  test("two hits that would share a synthetic path get ~2, ~3", () => {
    const same = { source: "cognee", content: "same text" };
    const paths = toSearchResults(withHits([same, same, same]), { maxResults: 10 }).map((r) => r.path);
    assert.match(paths[0], /^memory-router\/cognee\/[0-9a-f]{16}$/);
    assert.deepEqual(paths.slice(1), [`${paths[0]}~2`, `${paths[0]}~3`]);
  });

  test("two hits in one file share its path (memory_get reads the file)", () => {
    const results = toSearchResults(withHits([{ path: "MEMORY.md", line: 1 }, { path: "MEMORY.md", line: 9 }]), { maxResults: 10 });
    assert.deepEqual(
      results.map((r) => r.path),
      ["MEMORY.md", "MEMORY.md"],
    );
  });

  test("a qmd hit lives in its collection's folder, never taken for the workspace's file", () => {
    const cache = new HitCache();
    const [named, unnamed, hostile] = toSearchResults(
      withHits([
        { source: "qmd", collection: "team-docs", path: "docs/deploy.md" },
        { source: "qmd", path: "docs/deploy.md" },
        { source: "qmd", collection: "..", path: "x.md" },
      ]),
      { maxResults: 10, cache },
    );
    assert.equal(named.path, "memory-router/qmd/team-docs/docs/deploy.md");
    assert.deepEqual(cache.get(named.path), {
      text: "text",
      synthetic: false,
      startLine: 1,
      kind: "collection",
      backend: "qmd",
      collection: "team-docs",
      relPath: "docs/deploy.md",
    });
    assert.equal(unnamed.path, "memory-router/qmd/_/docs/deploy.md"); // an older qmd: folder unknown
    assert.equal(cache.get(unnamed.path)?.kind, "synthetic");
    assert.equal(hostile.path, "memory-router/qmd/_/x.md");
  });
});

describe("the hit cache", () => {
  test("remembers what each returned hit was, for memory_get", () => {
    const cache = new HitCache();
    const [file, summary] = toSearchResults(withHits([{ path: "memory/a.md", line: 4, content: "x" }, { source: "lossless", summary_id: "s1", content: "sum" }]), {
      maxResults: 10,
      cache,
    });
    assert.deepEqual(cache.get(file.path), { text: "x", synthetic: false, startLine: 4, kind: "workspace", backend: "totalrecall", collection: undefined, relPath: "memory/a.md" });
    assert.equal(cache.get(summary.path)?.text, "sum");
    assert.equal(cache.get(summary.path)?.synthetic, true);
  });

  test("keeps the last `limit` hits, a hit returned again counting as new", () => {
    const cache = new HitCache(2);
    const entry = { text: "", synthetic: true, startLine: 1, kind: /** @type {const} */ ("synthetic"), backend: "cognee" };
    cache.put("a", entry);
    cache.put("b", entry);
    cache.put("a", entry); // returned again: now the newest
    cache.put("c", entry);
    assert.deepEqual([...cache.map.keys()], ["a", "c"]);
  });
});

describe("facts of an answer", () => {
  test("an error envelope's code and message are part of its routing facts", () => {
    const facts = routingFacts(withHits([], { status: "error", error_code: "ALL_BACKENDS_FAILED", error_message: "every backend failed", rule: null }));
    assert.equal(facts.error_code, "ALL_BACKENDS_FAILED");
    assert.equal(facts.error_message, "every backend failed");
    assert.equal(facts.rule, null);
    assert.ok(!("error_code" in routingFacts(withHits([]))));
  });

  test("what the floor and the budget left out is passed on only when they did", () => {
    const abstained = { min_relevance: 0.2, best: 0.1, dropped: 3 };
    assert.deepEqual(trimFacts(withHits([], { abstained })), { abstained });
    const budget = { max_chars: 10, kept: 1, cut: 2, chars: 8, truncated: false };
    assert.deepEqual(trimFacts(withHits([], { budget, floor: { min_relevance: 0.2, dropped: 1 } })), { budget }); // no per-hit floor of memory-router's
    assert.deepEqual(trimFacts(withHits([])), {});
    assert.deepEqual(trimFacts(undefined), {});
  });
});

describe("excerpts", () => {
  const text = ["one", "two", "three", "four", "five"].join("\n");

  test("lines from..from+lines-1, with where to read on", () => {
    assert.deepEqual(excerpt(text, "MEMORY.md", 2, 2), { status: "ok", path: "MEMORY.md", text: "two\nthree", from: 2, lines: 2, truncated: true, nextFrom: 4 });
  });

  test("the rest of the file, without paging fields, when nothing is left", () => {
    assert.deepEqual(excerpt(text, "MEMORY.md", 4, 10), { status: "ok", path: "MEMORY.md", text: "four\nfive", from: 4, lines: 2 });
    assert.deepEqual(excerpt(text, "MEMORY.md"), { status: "ok", path: "MEMORY.md", text, from: 1, lines: 5 });
  });

  test("past the end: no lines", () => {
    assert.deepEqual(excerpt(text, "MEMORY.md", 9, 2), { status: "ok", path: "MEMORY.md", text: "", from: 9, lines: 0 });
  });
});
