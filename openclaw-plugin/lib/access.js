// @ts-check
// What memory_get / readFile may read, and reading it safely.
//
// memory-core's rule (OpenClaw 2026.9.6, packages/memory-host-sdk read-file.ts `isMemoryPath`):
// a workspace-relative Markdown file that is MEMORY.md, USER.md or dreams.md (any case) at the
// root, or under memory/. The plugin adds only what this agent was shown: a file a hit of this
// agent's returned (a Total Recall tier such as CLAUDE.local.md; a qmd collection file, resolved
// against that collection's folder). Everything else is refused the way memory-core refuses it:
// status error with code MEMORY_PATH_NOT_ALLOWED from the tool, a thrown error from readFile.
import fs from "node:fs";
import path from "node:path";
import { CODES } from "./codes.js";
import { RouterError } from "./router.js";

export const MAX_READ_BYTES = 4 << 20;

/** memory-core's isMemoryPath, plus its `.md` requirement.
 * @param {string} relPath
 * @returns {boolean} */
export function isMemoryPath(relPath) {
  const normalized = path.posix.normalize(String(relPath).replaceAll("\\", "/")).replace(/^\.\//, "");
  if (!normalized || normalized.startsWith("../") || normalized === ".." || path.posix.isAbsolute(normalized)) return false;
  if (!normalized.endsWith(".md")) return false;
  if (normalized === "MEMORY.md" || normalized === "USER.md" || normalized.toLowerCase() === "dreams.md") return true;
  return normalized.startsWith("memory/");
}

/** The refusal of a path memory_get may not read (memory-core's code for the same refusal).
 * @param {string} relPath
 * @param {string} why
 * @returns {RouterError} */
export function notAllowed(relPath, why) {
  return new RouterError(
    `${relPath}: path is not an allowed Markdown memory file (${why}); memory_get reads MEMORY.md, USER.md, ` +
      "dreams.md, memory/**/*.md and the paths memory_search returned to this agent",
    CODES.MEMORY_PATH_NOT_ALLOWED,
  );
}

/**
 * The real file `relPath` names under `root`, or null when there is none (or it is not a regular
 * file). Throws when the path leaves the root, lexically or through a symlink, or is too large.
 * `rootLabel` says which root in the error ("the memory root", "qmd collection docs").
 * @param {string} root
 * @param {string} relPath
 * @param {string} [rootLabel]
 * @returns {Promise<string | null>}
 */
export async function fileUnder(root, relPath, rootLabel = "the memory root") {
  if (path.isAbsolute(relPath)) throw new RouterError(`${relPath}: give a path relative to ${rootLabel} ${root}`, CODES.INVALID_PATH);
  const outside = () => new RouterError(`${relPath} is outside ${rootLabel} ${root}; memory_get reads only memory files`, CODES.PATH_OUTSIDE_ROOT);
  const lexical = path.resolve(root, relPath);
  if (lexical !== path.resolve(root) && !lexical.startsWith(path.resolve(root) + path.sep)) throw outside();
  let realRoot;
  try {
    realRoot = await fs.promises.realpath(root);
  } catch {
    return null;
  }
  let real;
  try {
    real = await fs.promises.realpath(path.join(realRoot, relPath));
  } catch {
    return null;
  }
  if (real !== realRoot && !real.startsWith(realRoot + path.sep)) throw outside(); // a symlink out of the root
  const st = await fs.promises.stat(real);
  if (!st.isFile()) return null;
  if (st.size > MAX_READ_BYTES) throw new RouterError(`${relPath} is ${st.size} bytes; memory_get reads files up to ${MAX_READ_BYTES}`, CODES.FILE_TOO_LARGE);
  return real;
}

/** A file's text, read without following a last-moment swap to a FIFO or device (O_NONBLOCK,
 * then fstat: a regular file only).
 * @param {string} file
 * @returns {Promise<string | null>} */
export async function readRegular(file) {
  const handle = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  try {
    const st = await handle.stat();
    if (!st.isFile()) return null;
    return (await handle.readFile()).toString("utf8");
  } finally {
    await handle.close();
  }
}
