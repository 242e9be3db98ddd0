// @ts-check
// Where a qmd collection's files live: qmd's own index.yml, found as memory-router's qmd adapter
// finds it (backends/qmd/adapter.py `config_file`, backends/qmd/parse.py `collection_roots`).
//
// A qmd hit's path is relative to its collection's folder, which need not be (and usually is not)
// the agent's workspace. memory_get on such a hit reads the file from that folder, never the
// workspace file of the same relative path.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expandHome } from "./settings.js";

const SMALL_FILE = 1 << 20; // router-config.json and index.yml are a few kB

/** @param {string} file @returns {string | null} */
function readSmall(file) {
  try {
    const st = fs.statSync(file);
    if (!st.isFile() || st.size > SMALL_FILE) return null;
    return fs.readFileSync(file, "utf8");
  } catch {
    return null;
  }
}


/** qmd's index.yml for backend `name` of the router-config.json at `configFile` (null when that
 * backend is not a qmd backend of that file). Order as the adapter's: the backend's `config_dir`
 * (QMD_CONFIG_DIR), $QMD_CONFIG_DIR, $XDG_CONFIG_HOME/qmd, ~/.config/qmd; `<index>.yml`.
 * @param {string | null} configFile
 * @param {string} name
 * @param {Record<string, string | undefined>} env
 * @returns {string | null} */
export function qmdIndexYml(configFile, name, env) {
  const text = configFile ? readSmall(configFile) : null;
  if (text === null) return null;
  let cfg;
  try {
    cfg = JSON.parse(text);
  } catch {
    return null;
  }
  const b = cfg?.backends?.[name];
  if (!b || typeof b !== "object" || (b.type ?? name) !== "qmd") return null;
  const file = `${typeof b.index === "string" && b.index ? b.index : "index"}.yml`;
  if (typeof b.config_dir === "string" && b.config_dir) return path.join(expandHome(b.config_dir, env), file);
  if (env.QMD_CONFIG_DIR) return path.join(env.QMD_CONFIG_DIR, file);
  if (env.XDG_CONFIG_HOME) return path.join(env.XDG_CONFIG_HOME, "qmd", file);
  return path.join(env.HOME || os.homedir(), ".config", "qmd", file);
}

const NAME_KEY = /^([ \t]+)("[^"]*"|'[^']*'|[^:#\s][^:#]*?)[ \t]*:[ \t]*(.*?)[ \t]*$/;

/** `collection name -> folder` from index.yml's `collections:` block (the shape qmd writes),
 * as parse.collection_roots reads it; {} when the file is missing or not in that shape.
 * @param {string | null} indexYml
 * @param {Record<string, string | undefined>} env
 * @returns {Record<string, string>} */
export function collectionRoots(indexYml, env) {
  const text = indexYml ? readSmall(indexYml) : null;
  if (text === null) return {};
  const lines = text.split(/\r?\n/);
  const start = lines.findIndex((l) => /^collections:[ \t]*$/.test(l));
  if (start < 0) return {};
  /** @type {Record<string, string>} */
  const roots = {};
  /** @type {number | null} */
  let nameIndent = null;
  /** @type {string | null} */
  let current = null;
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === "") continue;
    if (!/^[ \t]/.test(line)) break; // the next top-level key ends the block
    const m = NAME_KEY.exec(line);
    if (!m) continue;
    const indent = m[1].length;
    const key = m[2].replace(/^["']|["']$/g, "");
    const value = m[3];
    if (nameIndent === null || indent <= nameIndent) {
      nameIndent = indent;
      current = key;
    } else if (current !== null && key === "path" && value) {
      roots[current] = expandHome(value.replace(/^["']|["']$/g, ""), env);
    }
  }
  return roots;
}

/** The folder of `collection` of qmd backend `backend`, or null when it cannot be known.
 * @param {string | null} configFile
 * @param {string} backend
 * @param {string} collection
 * @param {Record<string, string | undefined>} env
 * @returns {string | null} */
export function collectionRoot(configFile, backend, collection, env) {
  const root = collectionRoots(qmdIndexYml(configFile, backend, env), env)[collection];
  return typeof root === "string" && path.isAbsolute(root) ? root : null;
}
