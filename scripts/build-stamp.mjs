/**
 * Whether dist/ is the build of the sources as they are: `npm run build` ends by writing dist/.built, and its time is
 * compared with every input of the build. `npm start` (scripts/build-quietly.mjs) builds only when this says so, and
 * the tests that run the built CLI or server (test/helpers/built.ts) fail when it does. A file's own output time
 * cannot tell: tsc's incremental build leaves an output untouched when its source was rewritten with the same
 * content, as a git checkout or merge does. Directories count too: a removed source changes its directory's time.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** What the build reads, relative to the checkout: folders are walked whole. */
export const BUILD_INPUTS = [
  'src',
  'console',
  'scripts/bundle-cli.mjs',
  'scripts/pack-cli.mjs',
  'scripts/pack-sdk.mjs',
  'scripts/package-closure.mjs',
  'scripts/build-sdk-docs.mjs',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'tsconfig.sdk.json',
  'tsconfig.sdk-docs.json',
  'typedoc.json',
  'docs/sdk.md',
];

/** Why `root`'s dist/ must be built (it is missing, or older than the input named), or null when it is current. */
export function staleBuild(root = ROOT) {
  const stamp = fs.statSync(path.join(root, 'dist/.built'), { throwIfNoEntry: false });
  if (!stamp || !fs.existsSync(path.join(root, 'dist/cli/main.js'))) return 'dist is missing';
  for (const input of BUILD_INPUTS) {
    const top = path.join(root, input);
    const stats = fs.statSync(top, { throwIfNoEntry: false });
    if (!stats) continue;
    const entries = stats.isDirectory() ? ['', ...fs.readdirSync(top, { recursive: true })] : [''];
    for (const entry of entries) {
      const file = path.join(top, entry);
      if (fs.statSync(file).mtimeMs > stamp.mtimeMs) return `dist is older than ${path.relative(root, file)}`;
    }
  }
  return null;
}
