// @ts-check
// The router envelope in OpenClaw's shapes: MemorySearchResult hits, and readFile answers for
// the paths those hits carry.
//
// A Total Recall hit keeps its workspace-relative `path` and `line`. A hit without a file (a
// Lossless summary or message, a Cognee edge) gets a synthetic path under
// `memory-router/<backend>/<id>`, one per hit. A qmd hit's file lives in its collection's folder,
// not the workspace: it gets `memory-router/<backend>/<collection>/<path>`, so it can never be
// taken for the workspace file of the same relative path. Every hit is kept (text, line, and for a
// file where it lives) in the asking agent's own bounded cache, so memory_get and readFile read
// back only what that agent was shown.
import crypto from "node:crypto";
import { isInteger } from "./settings.js";

export const SYNTHETIC_PREFIX = "memory-router/";
const CACHE_LIMIT = 512; // hits remembered for readFile (least recently returned dropped first)

/**
 * One hit of an envelope's `results` (memory_router/core/envelope.py): the fields every backend
 * gives, and the ones that say where it comes from (a file and line, a qmd collection, a Lossless
 * message or summary, a Cognee relationship).
 * @typedef {object} Hit
 * @property {string} content
 * @property {number} relevance 0..1
 * @property {string} source the backend that found it
 * @property {string | null} [timestamp]
 * @property {string} [path]
 * @property {number} [line]
 * @property {number} [end_line] the file line the content ends on, where it leaves lines out
 * @property {string} [collection]
 * @property {string | number | null} [message_id]
 * @property {string | number} [summary_id]
 * @property {string | number} [id]
 * @property {string | number} [docid]
 * @property {{source: string, relation: string, target: string}} [relationship]
 */

/**
 * memory-router's answer (memory_router/contract.py ENVELOPE_FIELDS and OPTIONAL_ENVELOPE_FIELDS),
 * the fields the plugin reads.
 * @typedef {object} Envelope
 * @property {string} [query_echo]
 * @property {string | null} [routed_to]
 * @property {string | null} [routed_mode]
 * @property {string[]} [fallback_chain]
 * @property {number} [fallbacks_used]
 * @property {Hit[]} [results]
 * @property {string} status success, partial, empty or error
 * @property {string | null} [error_code]
 * @property {string | null} [error_message]
 * @property {{number: number, id: string, strength?: string} | null} [rule]
 * @property {{min_relevance: number, best: number, dropped: number}} [abstained] the best hit was under min_relevance
 * @property {{max_chars: number, kept: number, cut: number, chars: number, truncated: boolean}} [budget] what max_chars cut
 * @property {{since?: string, until?: string}} [window] the time window the hits were kept to (ISO instants)
 */

/**
 * The routing facts of one answer.
 * @typedef {object} RoutingFacts
 * @property {{number: number, id: string} | null} rule
 * @property {string | null} routed_to
 * @property {string | null} routed_mode
 * @property {string} status
 * @property {string[]} fallback_chain
 * @property {number} fallbacks_used
 * @property {string | null} [error_code]
 * @property {string | null} [error_message]
 */

/**
 * OpenClaw's MemorySearchResult, plus `memoryRouter` (OpenClaw passes it through untouched).
 * @typedef {object} SearchResult
 * @property {string} path
 * @property {number} startLine
 * @property {number} endLine
 * @property {number} score
 * @property {string} snippet
 * @property {"memory"} source
 * @property {string} citation
 * @property {RoutingFacts & {backend: string, timestamp?: string}} memoryRouter
 */

/**
 * What the plugin remembers of a hit it returned, for memory_get to read it back.
 * @typedef {object} CachedHit
 * @property {string} text
 * @property {boolean} synthetic no file: the text is all there is
 * @property {number} startLine
 * @property {"workspace" | "collection" | "synthetic"} kind
 * @property {string} backend
 * @property {string} [collection]
 * @property {string} [relPath]
 */

/**
 * memory_get's answer for lines of a text (OpenClaw's paging fields).
 * @typedef {object} Excerpt
 * @property {"ok"} status
 * @property {string} path
 * @property {string} text
 * @property {number} from
 * @property {number} lines
 * @property {true} [truncated]
 * @property {number} [nextFrom]
 */

/** The routing facts of one answer: carried on every hit, and by the tool and CLI payloads.
 * @param {Envelope} envelope
 * @returns {RoutingFacts} */
export function routingFacts(envelope) {
  return {
    rule: envelope.rule ? { number: envelope.rule.number, id: envelope.rule.id } : null,
    routed_to: envelope.routed_to ?? null,
    routed_mode: envelope.routed_mode ?? null,
    status: envelope.status,
    fallback_chain: envelope.fallback_chain ?? [],
    fallbacks_used: envelope.fallbacks_used ?? 0,
    ...(envelope.error_code ? { error_code: envelope.error_code, error_message: envelope.error_message } : {}),
  };
}

/** What memory-router's floor and budget left out of an answer, when they did (abstained: its
 * best hit was under the floor; budget: what the character budget cut).
 * @param {Envelope | undefined} envelope
 * @returns {Pick<Envelope, "abstained" | "budget">} */
export function trimFacts(envelope) {
  /** @type {Pick<Envelope, "abstained" | "budget">} */
  const out = {};
  if (envelope?.abstained) out.abstained = envelope.abstained;
  if (envelope?.budget) out.budget = envelope.budget;
  return out;
}

/** @param {string} text */
function lineCount(text) {
  return text ? text.split("\n").length : 1;
}

/** A stable id for a hit without a file: its own id when the backend gives one. A Lossless
 * message hit also names the summary that covers it, so its own message_id comes first (four
 * messages under one leaf are four hits, not one path).
 * @param {Hit} hit
 * @returns {string} */
function syntheticId(hit) {
  if (hit.message_id !== undefined && hit.message_id !== null && hit.message_id !== "") {
    return `message-${String(hit.message_id).replace(/[^A-Za-z0-9._-]/g, "_")}`;
  }
  for (const key of /** @type {const} */ (["summary_id", "id", "docid"])) {
    const v = hit[key];
    if ((typeof v === "string" && v) || Number.isInteger(v)) return String(v).replace(/[^A-Za-z0-9._-]/g, "_");
  }
  const rel = hit.relationship;
  const basis = rel && typeof rel === "object" ? `${rel.source}|${rel.relation}|${rel.target}` : hit.content;
  return crypto.createHash("sha256").update(String(basis)).digest("hex").slice(0, 16);
}

/** A path segment from a name a backend gave (a qmd collection): no separators, no `..`.
 * @param {string} name */
function segment(name) {
  const clean = String(name).replace(/[^A-Za-z0-9._-]/g, "_");
  return clean === "." || clean === ".." || !clean ? "_" : clean;
}

/** What a hit's path is: a workspace file (Total Recall), a collection file (qmd: a relative
 * path inside a named collection), or nothing on disk (synthetic).
 * @param {Hit} hit
 * @param {Envelope} envelope
 * @returns {{path: string, kind: CachedHit["kind"], collection?: string, relPath?: string}} */
function placeOf(hit, envelope) {
  const backend = hit.source || envelope.routed_to || "router";
  const rel = typeof hit.path === "string" ? hit.path : "";
  if (rel && typeof hit.collection === "string" && hit.collection) {
    return {
      path: `${SYNTHETIC_PREFIX}${segment(backend)}/${segment(hit.collection)}/${rel}`,
      kind: "collection",
      collection: hit.collection,
      relPath: rel,
    };
  }
  if (rel && backend === "qmd") {
    // qmd without a collection name (an older qmd): the file's folder is unknown, never the workspace.
    return { path: `${SYNTHETIC_PREFIX}${segment(backend)}/_/${rel}`, kind: "synthetic" };
  }
  if (rel) return { path: rel, kind: "workspace", relPath: rel };
  return { path: `${SYNTHETIC_PREFIX}${segment(backend)}/${syntheticId(hit)}`, kind: "synthetic" };
}

/** The last `limit` hits returned to one agent, by path (the oldest dropped first). */
export class HitCache {
  constructor(limit = CACHE_LIMIT) {
    this.limit = limit;
    /** @type {Map<string, CachedHit>} */
    this.map = new Map();
  }

  /** @param {string} path @param {CachedHit} entry */
  put(path, entry) {
    this.map.delete(path);
    this.map.set(path, entry);
    for (const oldest of this.map.keys()) {
      if (this.map.size <= this.limit) break;
      this.map.delete(oldest);
    }
  }

  /** @param {string} path @returns {CachedHit | undefined} */
  get(path) {
    return this.map.get(path);
  }
}

/**
 * Envelope -> MemorySearchResult[] (best first, as the router ranked them).
 * `score` is the router's relevance (0..1); `source` is "memory" (OpenClaw drops "sessions"
 * hits on some paths unless the plugin authorizes them); `memoryRouter` carries the backend's
 * own source and the routing facts, which OpenClaw passes through untouched. Every hit of the
 * envelope is mapped, up to `maxResults` (a caller's minScore is applied before: lib/trim.js).
 * @param {Envelope} envelope
 * @param {{maxResults: number, cache?: HitCache}} options
 * @returns {SearchResult[]}
 */
export function toSearchResults(envelope, { maxResults, cache }) {
  const facts = routingFacts(envelope);
  /** @type {SearchResult[]} */
  const out = [];
  const seen = new Set();
  for (const hit of envelope.results ?? []) {
    const text = typeof hit.content === "string" ? hit.content : "";
    const place = placeOf(hit, envelope);
    // Two synthetic hits of one answer never share a path: memory_get must give each its own
    // text. (Hits in one file share its path: memory_get reads the file, `from` picks the line.)
    let path = place.path;
    if (place.kind === "synthetic") for (let n = 2; seen.has(path); n++) path = `${place.path}~${n}`;
    seen.add(path);
    const hasFile = place.kind !== "synthetic";
    const startLine = isInteger(hit.line, 1) ? hit.line : 1;
    // A Total Recall hit that leaves lines of a long entry out says where its text ends; any
    // other hit's lines are consecutive from its start.
    const endLine = isInteger(hit.end_line, startLine) ? hit.end_line : startLine + lineCount(text) - 1;
    cache?.put(path, { text, synthetic: !hasFile, startLine, kind: place.kind, backend: hit.source, collection: place.collection, relPath: place.relPath });
    out.push({
      path,
      startLine,
      endLine,
      score: hit.relevance,
      snippet: text,
      source: "memory",
      citation: hasFile ? `${path}#L${startLine}` : path,
      memoryRouter: {
        backend: hit.source,
        ...(hit.timestamp ? { timestamp: hit.timestamp } : {}),
        ...facts,
      },
    });
    if (out.length >= maxResults) break;
  }
  return out;
}

/** Lines `from` (1-based) .. `from + lines - 1` of `text`, with OpenClaw's paging fields.
 * @param {string} text
 * @param {string} relPath
 * @param {number} [from]
 * @param {number} [lines]
 * @returns {Excerpt} */
export function excerpt(text, relPath, from, lines) {
  const all = text.split("\n");
  const start = Math.max(1, from ?? 1);
  const count = lines ?? all.length;
  const slice = all.slice(start - 1, start - 1 + count);
  const end = start - 1 + slice.length;
  const truncated = end < all.length;
  return {
    status: "ok",
    path: relPath,
    text: slice.join("\n"),
    from: start,
    lines: slice.length,
    ...(truncated ? { truncated: true, nextFrom: end + 1 } : {}),
  };
}
