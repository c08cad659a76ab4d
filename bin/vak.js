#!/usr/bin/env node
import { main } from "../dist/cli/main.js";

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`vak: internal error: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(125);
  },
);
