#!/usr/bin/env node
/* global process, URL */
/**
 * `npm start` runs this before the build: an unsupported Node gets one line (package.json `engines`), not a
 * stack trace from the build tools. The same check as src/cli/node-check.ts, which `coffer` runs itself
 * (test/cli/node-check.test.ts keeps the two in step); plain code, so that old Nodes can parse it.
 */
import fs from 'node:fs';
import { pathToFileURL } from 'node:url';

function parts(version) {
  return version
    .replace(/^v/, '')
    .split('.')
    .map((part) => parseInt(part, 10) || 0);
}

function atLeast(version, floor) {
  for (let i = 0; i < 3; i++) {
    const a = version[i] || 0;
    const b = floor[i] || 0;
    if (a !== b) return a > b;
  }
  return true;
}

export function nodeSupported(version, range) {
  const v = parts(version);
  return range.split('||').some((alternative) => {
    const text = alternative.trim();
    if (text.indexOf('^') === 0) {
      const floor = parts(text.slice(1));
      return v[0] === floor[0] && atLeast(v, floor);
    }
    return text.indexOf('>=') === 0 && atLeast(v, parts(text.slice(2)));
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const range = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')).engines.node;
  if (!nodeSupported(process.versions.node, range)) {
    process.stderr.write('coffer: Node.js ' + process.versions.node + ' is not supported; use ' + range + '\n');
    process.exit(1);
  }
}
