// @ts-check
// lib/collections.js: where a qmd collection's files live, found as memory-router's qmd adapter
// finds them (the backend's config_dir, $QMD_CONFIG_DIR, $XDG_CONFIG_HOME/qmd, ~/.config/qmd).
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { collectionRoot, collectionRoots, qmdIndexYml } from "../lib/collections.js";

/** @type {string} */
let dir;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "mr-collections-"));
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/**
 * A file under the test's folder.
 * @param {string} name
 * @param {string} text
 */
function write(name, text) {
  const file = path.join(dir, name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
  return file;
}

describe("qmd's index.yml for a backend", () => {
  test("the backend's config_dir and index name first, then the environment's, then the home's", () => {
    const rc = write("rc.json", JSON.stringify({ backends: { qmd: { type: "qmd", config_dir: "~/qmdcfg", index: "work" }, docs: { type: "qmd" }, tr: { type: "totalrecall" } } }));
    const home = { HOME: "/home/u" };
    assert.equal(qmdIndexYml(rc, "qmd", home), "/home/u/qmdcfg/work.yml");
    assert.equal(qmdIndexYml(rc, "docs", { ...home, QMD_CONFIG_DIR: "/q", XDG_CONFIG_HOME: "/x" }), "/q/index.yml");
    assert.equal(qmdIndexYml(rc, "docs", { ...home, XDG_CONFIG_HOME: "/x" }), "/x/qmd/index.yml");
    assert.equal(qmdIndexYml(rc, "docs", home), "/home/u/.config/qmd/index.yml");
  });

  test("not a qmd backend, no such config, or not JSON: none", () => {
    const rc = write("rc2.json", JSON.stringify({ backends: { tr: { type: "totalrecall" } } }));
    assert.equal(qmdIndexYml(rc, "tr", {}), null);
    assert.equal(qmdIndexYml(rc, "missing", {}), null);
    assert.equal(qmdIndexYml(path.join(dir, "none.json"), "qmd", {}), null);
    assert.equal(qmdIndexYml(write("bad.json", "{"), "qmd", {}), null);
    assert.equal(qmdIndexYml(null, "qmd", {}), null);
  });
});

describe("collection folders from index.yml", () => {
  test("the collections block as qmd writes it: names, quoted or not, and their path", () => {
    const yml = write(
      "index.yml",
      [
        "version: 1",
        "collections:",
        "  team-docs:",
        "    path: /srv/docs",
        "    pattern: '**/*.md'",
        '  "alice notes":',
        "    path: '~/notes'",
        "  no-path:",
        "    pattern: x",
        "contexts:",
        "  other:",
        "    path: /not/a/collection",
      ].join("\n"),
    );
    assert.deepEqual(collectionRoots(yml, { HOME: "/home/a" }), { "team-docs": "/srv/docs", "alice notes": "/home/a/notes" });
  });

  test("a missing file, or one without a collections block: none", () => {
    assert.deepEqual(collectionRoots(path.join(dir, "none.yml"), {}), {});
    assert.deepEqual(collectionRoots(write("other.yml", "version: 1\n"), {}), {});
  });

  test("a collection's folder only when it is absolute", () => {
    const yml = write("cfg/index.yml", "collections:\n  abs:\n    path: /srv/docs\n  rel:\n    path: docs\n");
    const rc = write("rc3.json", JSON.stringify({ backends: { qmd: { type: "qmd", config_dir: path.dirname(yml) } } }));
    assert.equal(collectionRoot(rc, "qmd", "abs", {}), "/srv/docs");
    assert.equal(collectionRoot(rc, "qmd", "rel", {}), null);
    assert.equal(collectionRoot(rc, "qmd", "unknown", {}), null);
  });
});
