#!/usr/bin/env node
/**
 * The one executable, `coffer` (README.md, docs/client.md). The Node check comes first: every other module
 * (./program.js and all it imports) loads only after it passed, so an unsupported Node gets one line, not a stack
 * trace. The range is package.json's `engines` (docs/runtime.md); scripts/check-node.mjs checks the same before
 * `npm start`'s build.
 *
 * Before anything else is loaded, Node's module compile cache is turned on where the runtime has it (22.1+): the
 * compiled code of every module is kept, so the next start skips compiling it (docs/runtime.md#start-up). It lives
 * where Node keeps it by default, the OS temp directory's node-compile-cache folder (the one npm also fills), or
 * NODE_COMPILE_CACHE's directory; NODE_DISABLE_COMPILE_CACHE=1 turns it off. Hence the dynamic imports below.
 */
import module from 'node:module';

(module as { enableCompileCache?: () => unknown }).enableCompileCache?.();

const [{ default: satisfies }, { NODE_ENGINE }, { isClientCommand, requestedCommand }] = await Promise.all([
  import('semver/functions/satisfies.js'),
  import('../lib/version.js'),
  import('./commands/names.js'),
]);

if (!satisfies(process.versions.node, NODE_ENGINE)) {
  process.stderr.write(`coffer: Node.js ${process.versions.node} is not supported; use ${NODE_ENGINE}\n`);
  process.exit(1);
}
// A client command runs from the bundle (scripts/bundle-cli.mjs: one file loads far faster than the modules it holds);
// serve, admin, help and completion from the whole program.
const entry = isClientCommand(requestedCommand(process.argv)) ? './client-main.bundle.js' : './program.js';
await import(entry);
