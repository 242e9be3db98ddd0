// An OpenAI-compatible embeddings endpoint on loopback, for bench/locomo_openclaw.py: OpenClaw's
// memory-core (provider "openai-compatible") embeds its chunks and queries here with the same
// MiniLM GGUF that qmd uses in the LoCoMo workspaces (.ci/setup.d/30-qmd-models.sh builds it).
//
//   node _embeddings_server.mjs <node-llama-cpp package dir> <model.gguf> [port]
//
// POST /v1/embeddings {"model", "input": string | string[]} -> {"object": "list", "data":
// [{"object": "embedding", "index", "embedding": [...]}], "model", "usage"}; GET /v1/models lists
// the one model. Prints {"port": N, "dims": D} on stdout once it listens; logs go to stderr.
// Embeddings are computed one at a time (llama.cpp contexts are not re-entrant) on ONE thread:
// on a loaded 2-CPU machine llama.cpp's default (a thread per core, spinning) took 8-11 s per
// short query against 50-80 ms on one thread. Each vector is L2-normalised, as OpenAI's are.
import http from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, modelPath, portArg] = process.argv.slice(2);
if (!packageDir || !modelPath) {
  console.error("usage: node _embeddings_server.mjs <node-llama-cpp dir> <model.gguf> [port]");
  process.exit(2);
}
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(path.join(packageDir, "dist", "index.js")).href);
const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath });
const context = await model.createEmbeddingContext({ contextSize: 512, threads: 1 });
const MODEL_ID = path.basename(modelPath).replace(/\.gguf$/, "");
const MAX_TOKENS = 510; // MiniLM's window (512) minus [CLS]/[SEP]

let queue = Promise.resolve();
function embedOne(text) {
  const run = queue.then(async () => {
    let tokens = model.tokenize(text);
    if (tokens.length > MAX_TOKENS) tokens = tokens.slice(0, MAX_TOKENS);
    const { vector } = await context.getEmbeddingFor(tokens);
    const norm = Math.hypot(...vector) || 1;
    return { vector: Array.from(vector, (v) => v / norm), tokens: tokens.length };
  });
  queue = run.catch(() => {});
  return run;
}

function send(res, status, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(data) });
  res.end(data);
}

const server = http.createServer(async (req, res) => {
  try {
    if (req.method === "GET" && req.url.startsWith("/v1/models")) {
      return send(res, 200, { object: "list", data: [{ id: MODEL_ID, object: "model", owned_by: "local" }] });
    }
    if (req.method !== "POST" || !req.url.startsWith("/v1/embeddings")) {
      return send(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: "not_found" } });
    }
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const inputs = Array.isArray(body.input) ? body.input : [body.input];
    if (!inputs.every((x) => typeof x === "string")) {
      return send(res, 400, { error: { message: "input must be a string or an array of strings", type: "invalid_request_error" } });
    }
    const data = [];
    let tokens = 0;
    for (const [index, text] of inputs.entries()) {
      const out = await embedOne(text);
      tokens += out.tokens;
      data.push({ object: "embedding", index, embedding: out.vector });
    }
    send(res, 200, { object: "list", data, model: body.model || MODEL_ID, usage: { prompt_tokens: tokens, total_tokens: tokens } });
  } catch (err) {
    send(res, 500, { error: { message: String(err?.message || err), type: "server_error" } });
  }
});
server.listen(Number(portArg || 0), "127.0.0.1", async () => {
  const probe = await embedOne("dimension probe");
  process.stdout.write(JSON.stringify({ port: server.address().port, dims: probe.vector.length, model: MODEL_ID }) + "\n");
});
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    server.close();
    process.exit(0);
  });
}
