// @ts-check
// lib/access.js: which paths memory_get may read (memory-core's rule) and reading them without
// leaving the root.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { MAX_READ_BYTES, fileUnder, isMemoryPath, notAllowed, readRegular } from "../lib/access.js";
import { CODES } from "../lib/codes.js";

test("memory files are memory-core's: MEMORY.md, USER.md, dreams.md, memory/**/*.md", () => {
  const allowed = ["MEMORY.md", "USER.md", "dreams.md", "DREAMS.md", "./MEMORY.md", "memory/2026-01-02.md", "memory/a/b.md", "memory\\x.md"];
  const refused = [".env", ".git/config", "memory.md", "user.md", "notes/MEMORY.md", "memory/x.txt", "memory/../.env", "../MEMORY.md", "/MEMORY.md", "..", "", "src/auth.ts"];
  assert.deepEqual(allowed.filter((p) => !isMemoryPath(p)), []);
  assert.deepEqual(refused.filter((p) => isMemoryPath(p)), []);
});

test("a refusal carries memory-core's code and says what may be read", () => {
  const err = notAllowed(".env", "not a memory file");
  assert.equal(err.code, CODES.MEMORY_PATH_NOT_ALLOWED);
  assert.match(err.message, /^\.env: path is not an allowed Markdown memory file \(not a memory file\); memory_get reads MEMORY\.md/);
});

describe("reading under a root", () => {
  /** @type {string} */
  let root;
  /** @type {string} */
  let outside;
  before(() => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mr-access-"));
    root = path.join(dir, "ws");
    outside = path.join(dir, "secret.md");
    fs.mkdirSync(path.join(root, "memory"), { recursive: true });
    fs.writeFileSync(path.join(root, "MEMORY.md"), "# memory\n");
    fs.writeFileSync(outside, "secret\n");
    fs.symlinkSync(outside, path.join(root, "memory", "link.md"));
    fs.symlinkSync(path.join(root, "MEMORY.md"), path.join(root, "memory", "inside.md"));
  });
  after(() => fs.rmSync(path.dirname(root), { recursive: true, force: true }));

  test("a file under the root is its real path", async () => {
    assert.equal(await fileUnder(root, "MEMORY.md"), fs.realpathSync(path.join(root, "MEMORY.md")));
    assert.equal(await fileUnder(root, "memory/inside.md"), fs.realpathSync(path.join(root, "MEMORY.md")));
  });

  test("no such file, or a folder: nothing to read", async () => {
    assert.equal(await fileUnder(root, "memory/none.md"), null);
    assert.equal(await fileUnder(root, "memory"), null);
    assert.equal(await fileUnder(path.join(root, "gone"), "MEMORY.md"), null);
  });

  test("out of the root, by `..` or through a symlink, is refused; an absolute path too", async () => {
    await assert.rejects(fileUnder(root, "../secret.md"), { code: CODES.PATH_OUTSIDE_ROOT });
    await assert.rejects(fileUnder(root, "memory/link.md"), { code: CODES.PATH_OUTSIDE_ROOT });
    await assert.rejects(fileUnder(root, outside), { code: CODES.INVALID_PATH, message: /give a path relative to the memory root/ });
    await assert.rejects(fileUnder(root, "../x", "qmd collection docs"), { message: /outside qmd collection docs / });
  });

  test("a file over the limit is refused with its size", async () => {
    const big = path.join(root, "memory", "big.md");
    fs.writeFileSync(big, "");
    fs.truncateSync(big, MAX_READ_BYTES + 1);
    await assert.rejects(fileUnder(root, "memory/big.md"), { code: CODES.FILE_TOO_LARGE, message: new RegExp(`${MAX_READ_BYTES + 1} bytes`) });
  });

  test("a FIFO swapped in is not read (and never blocks)", async () => {
    const fifo = path.join(root, "memory", "fifo.md");
    execFileSync("mkfifo", [fifo]);
    assert.equal(await readRegular(fifo), null);
    assert.equal(await readRegular(path.join(root, "MEMORY.md")), "# memory\n");
  });
});
