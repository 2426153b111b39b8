#!/usr/bin/env node
// Compile a .ksy with the Kaitai Struct compiler from the npm registry (its JavaScript build has no
// command line of its own). usage: node scripts/kaitai-compile.js SPEC.ksy LANGUAGE OUTDIR [--debug]
// The compiler and js-yaml are looked up in $MOSQDB_KAITAI_DIR/node_modules (default
// ~/.cache/mosqdb-kaitai, filled by scripts/bootstrap.sh). --debug: positions kept, _read() by hand.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");

const [spec, language, outdir, flag] = process.argv.slice(2);
if (!spec || !language || !outdir) {
  console.error("usage: kaitai-compile.js SPEC.ksy LANGUAGE OUTDIR [--debug]");
  process.exit(2);
}
const home = process.env.MOSQDB_KAITAI_DIR || path.join(os.homedir(), ".cache", "mosqdb-kaitai");
const modules = path.join(home, "node_modules");
const compiler = require(path.join(modules, "kaitai-struct-compiler"));
const yaml = require(path.join(modules, "js-yaml"));

const ksy = yaml.load(fs.readFileSync(spec, "utf8"));
compiler.compile(language, ksy, null, flag === "--debug").then((files) => {
  fs.mkdirSync(outdir, { recursive: true });
  for (const [name, text] of Object.entries(files)) {
    fs.writeFileSync(path.join(outdir, name), text);
    console.log(name);
  }
}).catch((err) => {
  console.error(`${spec}: ${err && err.toString ? err.toString() : err}`);
  process.exit(1);
});
