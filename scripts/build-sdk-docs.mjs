#!/usr/bin/env node
/* global console */
/**
 * The SDK's reference (run by `npm run build`, after tsconfig.sdk.json's declaration emit): TypeDoc over the
 * declarations of the SDK's entries (typedoc.json) into dist/sdk-docs, which the server serves at /docs/sdk/. TypeDoc takes ~10 s; it
 * runs only when the declarations or typedoc.json changed since the last run (their hash is kept in
 * dist/sdk-docs/.inputs), so a build that did not touch the SDK's public types skips it.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TYPES = path.join(root, 'dist/sdk-types');
const OUT = path.join(root, 'dist/sdk-docs');
const STAMP = path.join(OUT, '.inputs');
/** The SDK's entries (package.json `exports` of coffer-sdk): Node's, and the browser's where it is built. */
const ENTRIES = ['client/index.d.ts', 'client/browser.d.ts'];

function inputsHash() {
  const hash = createHash('sha256');
  const files = fs.readdirSync(TYPES, { recursive: true }).filter((file) => String(file).endsWith('.d.ts'));
  for (const file of files.map(String).sort())
    hash
      .update(file)
      .update('\0')
      .update(fs.readFileSync(path.join(TYPES, file)));
  for (const config of ['typedoc.json', 'tsconfig.sdk-docs.json', 'package.json', 'docs/sdk.md'])
    hash.update(fs.readFileSync(path.join(root, config)));
  return hash.digest('hex');
}

const inputs = inputsHash();
if (fs.existsSync(STAMP) && fs.readFileSync(STAMP, 'utf8') === inputs) {
  console.log('sdk-docs: dist/sdk-docs is up to date');
} else {
  const started = Date.now();
  const args = ['--options', 'typedoc.json'];
  for (const entry of ENTRIES) if (fs.existsSync(path.join(TYPES, entry))) args.push('--entryPoints', path.join(TYPES, entry));
  execFileSync(path.join(root, 'node_modules/.bin/typedoc'), args, { cwd: root, stdio: 'inherit' });
  fs.writeFileSync(STAMP, inputs);
  console.log(`sdk-docs: dist/sdk-docs (TypeDoc, ${((Date.now() - started) / 1000).toFixed(1)} s)`);
}
