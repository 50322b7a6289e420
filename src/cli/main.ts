#!/usr/bin/env node
/**
 * The one executable, `coffer` (README.md, docs/client.md). The Node check comes first: every other module
 * (./program.js and all it imports) loads only after it passed.
 */
import { SUPPORTED_NODE, nodeSupported } from './node-check.js';

if (!nodeSupported(process.versions.node)) {
  process.stderr.write('coffer: Node.js ' + process.versions.node + ' is not supported; use ' + SUPPORTED_NODE + '\n');
  process.exit(1);
}
await import('./program.js');
