#!/usr/bin/env node
/**
 * `npm start` runs this before the build: an unsupported Node gets one line (package.json `engines`), not a
 * stack trace from the build tools. `coffer` itself runs the same check (src/cli/main.ts).
 */
/* global process, URL */
import fs from 'node:fs';
import satisfies from 'semver/functions/satisfies.js';

const range = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')).engines.node;
if (!satisfies(process.versions.node, range)) {
  process.stderr.write(`coffer: Node.js ${process.versions.node} is not supported; use ${range}\n`);
  process.exit(1);
}
