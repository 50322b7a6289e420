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

const [{ NODE_ENGINE }, { isClientCommand, requestedCommand }] = await Promise.all([
  import('../lib/version.js'),
  import('./commands/names.js'),
]);

/**
 * `version` against `range` where both are of the plain forms package.json's engines uses (x.y.z; `^x.y.z` with
 * x ≥ 1 and `>=x[.y[.z]]`, joined by `||`), else undefined and semver decides. semver is a dozen CommonJS modules:
 * loading them was some 20 ms of every command's start-up on Node 20.
 */
function plainSatisfies(version: string, range: string): boolean | undefined {
  const parse = (text: string | undefined) => Number(text ?? 0);
  const v = /^(\d+)\.(\d+)\.(\d+)$/.exec(version)?.slice(1).map(parse);
  if (!v) return undefined;
  const atLeast = (min: number[]) => v[0]! - min[0]! || v[1]! - min[1]! || v[2]! - min[2]!;
  let satisfied = false;
  for (const part of range.split('||')) {
    const caret = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(part.trim());
    const from = /^>=(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(part.trim());
    if (caret && parse(caret[1]) >= 1) {
      const min = caret.slice(1).map(parse);
      satisfied ||= v[0] === min[0] && atLeast(min) >= 0;
    } else if (from) satisfied ||= atLeast(from.slice(1).map(parse)) >= 0;
    else return undefined;
  }
  return satisfied;
}

const supported =
  plainSatisfies(process.versions.node, NODE_ENGINE) ??
  (await import('semver/functions/satisfies.js')).default(process.versions.node, NODE_ENGINE);
if (!supported) {
  process.stderr.write(`coffer: Node.js ${process.versions.node} is not supported; use ${NODE_ENGINE}\n`);
  process.exit(1);
}
// A client command runs from the bundle (scripts/bundle-cli.mjs: one file loads far faster than the modules it holds);
// serve, admin, help and completion from the whole program.
const entry = isClientCommand(requestedCommand(process.argv)) ? './client-main.bundle.js' : './program.js';
await import(entry);
