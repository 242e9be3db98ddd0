// memory-router's warm qmd engine: one Node process that keeps qmd's SQLite index and GGUF models
// loaded, driven by the daemon over JSON lines (requests on stdin, answers on stdout).
//
//   node qmd_engine.mjs <qmd package dir> '<init json>'
//   init: {"dbPath", "configPath"|null, "models": {"embed","generate","rerank"}, "idleMs"}
//
// It imports qmd's own modules (dist/store.js, dist/llm.js) and calls the same functions the
// `qmd` CLI calls, so hits have the CLI's `--json` shape and qmd's own scores: BM25 for search,
// cosine for vsearch, the reranker's score in `explain` for query. stdout carries protocol lines
// only (console.* goes to stderr). It exits when stdin closes, i.e. when the daemon is gone.
//
// Requests:  {"id": 1, "op": "search"|"vsearch"|"query"|"warm"|"health"|"unload", ...}
//            warm: {"roles": ["embed", "rerank", "generate"]} loads those models (the daemon asks at
//            start-up, naming only models whose files are on disk), answered {"loaded_ms": {role: ms}}
// Answers:   {"id": 1, "ok": true, "hits": [...], "warnings": [...]} or
//            {"id": 1, "ok": false, "error": "...", "kind": "error"|"expired"|"collection"|"no_vectors"}
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { join } from "node:path";
import { existsSync, readFileSync } from "node:fs";

const [qmdDir, initJson] = process.argv.slice(2);
const init = JSON.parse(initJson);
const dist = (name) => pathToFileURL(join(qmdDir, "dist", name)).href;

// Protocol lines use the real stdout; everything qmd or llama.cpp logs goes to stderr, and
// warnings are also kept for the answer of the request that caused them.
const writeOut = process.stdout.write.bind(process.stdout);
let warnings = [];
const toStderr = (...args) => {
  const text = args.map((a) => (typeof a === "string" ? a : a instanceof Error ? a.message : JSON.stringify(a))).join(" ");
  if (warnings.length < 20) warnings.push(text.slice(0, 500));
  process.stderr.write(text + "\n");
};
console.log = console.info = console.warn = console.error = console.debug = toStderr;
const send = (obj) => writeOut(JSON.stringify(obj) + "\n");

// A failure to start (qmd missing, unreadable index.yml, unopenable index) is reported as one
// protocol line, so the daemon can say what is wrong instead of quoting a stack trace.
let sdk, store_, llm_, opened;
try {
  sdk = await import(dist("index.js"));
  store_ = await import(dist("store.js"));
  llm_ = await import(dist("llm.js"));
  opened = await sdk.createStore({
    dbPath: init.dbPath,
    ...(init.configPath && existsSync(init.configPath) ? { configPath: init.configPath } : {}),
  });
} catch (err) {
  send({ event: "fatal", error: String(err?.message ?? err).slice(0, 1000) });
  process.exit(1);
}
const store = opened.internal;
const llm = new llm_.LlamaCpp({
  embedModel: init.models?.embed,
  generateModel: init.models?.generate,
  rerankModel: init.models?.rerank,
  inactivityTimeoutMs: init.idleMs > 0 ? init.idleMs : 0,
  disposeModelsOnInactivity: true,
});
store.llm = llm;
llm_.setDefaultLlamaCpp(llm);

let version = null;
try {
  version = JSON.parse(readFileSync(join(qmdDir, "package.json"), "utf8")).version;
} catch {}

class Refusal extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

// The collections a search covers, as the CLI resolves them: the named ones (each must exist),
// else the collections included by default.
function collectionsFor(names) {
  const known = store_.listCollections(store.db);
  if (!names || names.length === 0) return known.filter((c) => c.includeByDefault).map((c) => c.name);
  for (const name of names) {
    if (!known.some((c) => c.name === name)) throw new Refusal("collection", `Collection not found: ${name}`);
  }
  return names;
}
const filterOf = (names) => (names.length === 0 ? undefined : names.length === 1 ? names[0] : names);

// The CLI's --json row (qmd.js outputResults): docid, score rounded to 2 places, qmd:// file,
// the snippet's line, title, context, explain.
function row(r, query, explain) {
  const docid = r.docid || (r.hash ? r.hash.slice(0, 6) : undefined);
  const info = sdk.extractSnippet(r.body || "", query, 300, r.chunkPos ?? r.bestChunkPos, r.chunkLen ?? r.bestChunk?.length);
  return {
    ...(docid && { docid: `#${docid}` }),
    score: Math.round(r.score * 100) / 100,
    file: r.file ?? r.filepath,
    line: info.line,
    title: r.title,
    ...(r.context && { context: r.context }),
    snippet: info.snippet,
    ...(explain && r.explain && { explain: r.explain }),
  };
}

function search(req) {
  const names = collectionsFor(req.collections);
  const limit = req.limit || 10;
  const hits = store.searchFTS(req.query, Math.max(50, limit * 2), filterOf(names));
  return hits.slice(0, limit).map((r) => row({ ...r, file: r.filepath, context: store.getContextForFile(r.filepath) }, req.query));
}

function requireVectors() {
  const hasVectors = !!store.db.prepare("SELECT name FROM sqlite_master WHERE type='table' AND name='vectors_vec'").get();
  const health = store_.getIndexHealth(store.db, llm.embedModelName);
  if (!hasVectors || (health.totalDocs > 0 && health.needsEmbedding >= health.totalDocs)) {
    throw new Refusal("no_vectors", `${health.needsEmbedding} documents (100%) need embeddings`);
  }
  if (health.needsEmbedding > 0) {
    // As qmd's CLI warns: the adapter puts it on the answer's note (these documents are not searched).
    const pct = Math.round((health.needsEmbedding / Math.max(1, health.totalDocs)) * 100);
    toStderr(`Warning: ${health.needsEmbedding} documents (${pct}%) need embeddings. Run 'qmd embed' for better results.`);
  }
}

async function vsearch(req) {
  const names = collectionsFor(req.collections);
  const limit = req.limit || 10;
  requireVectors();
  if (req.expand) {
    const hits = await store_.vectorSearchQuery(store, req.query, { collection: filterOf(names), limit, minScore: 0.3 });
    return hits.map((r) => row(r, req.query));
  }
  // Without expansion: the query's own embedding, qmd's searchVec per collection, best first.
  const embedding = (await llm.embed(llm_.formatQueryForEmbedding(req.query, llm.embedModelName), { isQuery: true }))?.embedding;
  if (!embedding) throw new Error("the embedding model returned no embedding for the query");
  const hits = await store.searchVec(req.query, llm.embedModelName, limit, filterOf(names), undefined, embedding);
  return hits
    .filter((r) => r.score >= 0.3)
    .slice(0, limit)
    .map((r) => row({ ...r, file: r.filepath }, req.query));
}

async function query(req) {
  const names = collectionsFor(req.collections);
  const limit = req.limit || 10;
  const options = { limit, minScore: 0, explain: true, skipRerank: !req.rerank };
  if (req.searches) {
    if (req.searches.some((s) => s.type !== "lex")) requireVectors();
    const hits = await store_.structuredSearch(store, req.searches, { ...options, collections: names.length ? names : undefined });
    const primary = req.searches.find((s) => s.type === "lex")?.query || req.searches[0]?.query || req.query;
    return hits.map((r) => row(r, primary, true));
  }
  requireVectors();
  const hits = await store_.hybridQuery(store, req.query, { ...options, collection: filterOf(names) });
  return hits.map((r) => row(r, req.query, true));
}

// Load the named models now, as the first query would: the embedding model with its contexts (by
// embedding a word), the reranker's contexts, the generate model. Milliseconds per role.
async function warm(req) {
  const loaded = {};
  for (const role of req.roles || ["embed"]) {
    const started = Date.now();
    if (role === "embed") {
      const text = llm_.formatQueryForEmbedding("warm up", llm.embedModelName);
      const embedding = (await llm.embed(text, { isQuery: true }))?.embedding;
      // qmd's embed() answers null when the model cannot load: that is a failed warm-up.
      if (!embedding) throw new Error(`the embedding model did not load (${llm.embedModelName})`);
      // One vector search too, so sqlite-vec and the vectors' pages are loaded before the first query.
      try {
        await store.searchVec("warm up", llm.embedModelName, 1, undefined, undefined, embedding);
      } catch {} // an index without vectors yet: the first vsearch says so
    } else if (role === "rerank") await llm.ensureRerankContexts();
    else if (role === "generate") await llm.ensureGenerateModel();
    else throw new Refusal("error", `unknown model role ${JSON.stringify(role)}`);
    loaded[role] = Date.now() - started;
  }
  return loaded;
}

function health() {
  return {
    pid: process.pid,
    node: process.version,
    qmd_version: version,
    rss_bytes: process.memoryUsage().rss,
    models: {
      embed: { uri: llm.embedModelName, loaded: !!llm.embedModel },
      generate: { uri: llm.generateModelName, loaded: !!llm.generateModel },
      rerank: { uri: llm.rerankModelName, loaded: !!llm.rerankModel },
    },
    served,
  };
}

// Model work runs one request at a time (qmd: "concurrent embed() hangs"); a request whose
// deadline passed while it waited is answered "expired" without running (its caller gave up).
let chain = Promise.resolve();
let served = 0;
const handlers = { search, vsearch, query };

async function handle(req) {
  const run = async () => {
    if (req.deadline && Date.now() > req.deadline) throw new Refusal("expired", "the caller's deadline passed while queued");
    warnings = [];
    // A session keeps qmd's idle timer from unloading the models in the middle of this call.
    const hits =
      req.op === "search"
        ? handlers.search(req)
        : await llm_.withLLMSession(() => handlers[req.op](req), { maxDuration: 10 * 60 * 1000, name: req.op });
    served += 1;
    return { id: req.id, ok: true, hits, warnings, health: health() };
  };
  let answer;
  try {
    if (req.op === "health") answer = { id: req.id, ok: true, health: health() };
    else if (req.op === "unload") {
      await llm.unloadIdleResources();
      answer = { id: req.id, ok: true, health: health() };
    } else if (req.op === "warm") {
      // In the model-work queue like a query: a semantic query that arrives meanwhile waits for
      // the load instead of starting a second one; keyword searches do not wait.
      const load = async () => {
        warnings = [];
        const loaded = await llm_.withLLMSession(() => warm(req), { maxDuration: 10 * 60 * 1000, name: "warm" });
        return { id: req.id, ok: true, loaded_ms: loaded, warnings, health: health() };
      };
      const turn = chain.then(load, load);
      chain = turn.catch(() => {});
      answer = await turn;
    } else if (!handlers[req.op]) answer = { id: req.id, ok: false, kind: "error", error: `unknown op ${JSON.stringify(req.op)}` };
    else if (req.op === "search") answer = await run();
    else {
      const turn = chain.then(run, run);
      chain = turn.catch(() => {});
      answer = await turn;
    }
  } catch (err) {
    answer = { id: req.id, ok: false, kind: err instanceof Refusal ? err.kind : "error", error: String(err?.message ?? err), warnings };
  }
  send(answer);
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch {
    send({ id: null, ok: false, kind: "error", error: "request is not JSON" });
    return;
  }
  if (req.deadline_ms) req.deadline = Date.now() + req.deadline_ms;
  handle(req);
});
// The daemon is gone (exit, crash or SIGKILL closes our stdin): free the models and leave.
lines.on("close", async () => {
  try {
    await Promise.race([llm.dispose(), new Promise((r) => setTimeout(r, 2000))]);
  } finally {
    process.exit(0);
  }
});
send({ event: "ready", ...health() });
