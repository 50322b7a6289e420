#!/usr/bin/env node
/**
 * The one executable, `coffer` (README.md, docs/client.md). The Node check comes first: every other module
 * (./program.js and all it imports) loads only after it passed, so an unsupported Node gets one line, not a stack
 * trace. The range is package.json's `engines` (docs/runtime.md); scripts/check-node.mjs checks the same before
 * `npm start`'s build.
 */
import satisfies from 'semver/functions/satisfies.js';
import { NODE_ENGINE } from '../lib/version.js';
import { isClientCommand, requestedCommand } from './commands/names.js';

if (!satisfies(process.versions.node, NODE_ENGINE)) {
  process.stderr.write(`coffer: Node.js ${process.versions.node} is not supported; use ${NODE_ENGINE}\n`);
  process.exit(1);
}
// A client command runs from the bundle (scripts/bundle-cli.mjs: one file loads far faster than the modules it holds);
// serve, admin, help and completion from the whole program.
const entry = isClientCommand(requestedCommand(process.argv)) ? './client-main.bundle.js' : './program.js';
await import(entry);
