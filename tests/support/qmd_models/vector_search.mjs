// Vector search through qmd's own SDK (createStore + searchVector): each query is embedded with
// the index's embed model (as qmd formats it) and ranked by cosine, without the CLI's query
// expansion (which needs qmd's generate model). Test helper for tests/adapters/test_qmd_models.py.
//
// usage: node vector_search.mjs <@tobilu/qmd package dir> <index.sqlite> <index.yml> <limit> <query>...
// stdout: one JSON array with, per query, its results [{file, title, score}] best first.
// Errors: message on stderr, exit 1 (2 for usage).
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, dbPath, configPath, limit, ...queries] = process.argv.slice(2);
if (queries.length === 0) {
  console.error("usage: node vector_search.mjs <qmd package dir> <index.sqlite> <index.yml> <limit> <query>...");
  process.exit(2);
}
const { createStore } = await import(pathToFileURL(join(packageDir, "dist", "index.js")).href);
const store = await createStore({ dbPath, configPath });
try {
  const answers = [];
  for (const query of queries) {
    const results = await store.searchVector(query, { limit: Number(limit) });
    answers.push(results.map((r) => ({ file: r.filepath, title: r.title, score: r.score })));
  }
  process.stdout.write(JSON.stringify(answers) + "\n");
} finally {
  await store.close();
}
