#!/usr/bin/env node
/* global console */
/**
 * Bundles the client commands into one file, dist/cli/client-main.bundle.js (run by `npm run build`, after tsc),
 * which dist/cli/main.js runs for every client command. Loading ~150 small modules (resolving, reading and compiling
 * each, the CommonJS export scan of every package imported from ESM) was most of a client command's start-up;
 * one file skips all of that (BENCHMARKS.md, P6: start-up). Native addons stay outside (sodium-native loads its
 * prebuilt binary from its own package). Nothing else changes: the bundle is dist/cli/client-main.js with its imports
 * inlined, and src/lib/version.ts finds package.json at the same depth from dist/cli as from dist/lib.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * zod's namespace of error-message locales (`z.locales`, ~400 KB of the bundle's 1.8 MB: read and compiled at every
 * start) holds only English here: no client module uses z.locales, and zod configures its English messages from
 * locales/en.js directly, not through this namespace, so every message stays the same.
 */
const englishZodOnly = {
  name: 'english-zod-only',
  setup(build) {
    build.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, (args) => ({
      contents: "export { default as en } from './en.js';\n",
      loader: 'js',
      resolveDir: path.dirname(args.path),
    }));
  },
};

await build({
  entryPoints: [path.join(root, 'dist/cli/client-main.js')],
  outfile: path.join(root, 'dist/cli/client-main.bundle.js'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['sodium-native'],
  // Some bundled packages are CommonJS and call require() for Node's own modules.
  banner: { js: "import { createRequire as __cofferRequire } from 'node:module'; const require = __cofferRequire(import.meta.url);" },
  plugins: [englishZodOnly],
  sourcemap: true,
  logLevel: 'warning',
});
console.log('bundle-cli: dist/cli/client-main.bundle.js');
