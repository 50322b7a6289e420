/**
 * Tests that run the built CLI or server (`npm test` builds first) fail clearly when the build is missing or
 * older than a source. `npm run build` ends by writing dist/.built; its time is compared with every source's
 * (a file's own output time cannot tell: tsc's incremental build leaves an output untouched when its source
 * was rewritten with the same content, as a git checkout or merge does).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const STAMP = path.join(ROOT, 'dist/.built');

export function assertBuilt(): void {
  const built = fs.statSync(STAMP, { throwIfNoEntry: false });
  if (!built || !fs.existsSync(path.join(ROOT, 'dist/cli/main.js')))
    throw new Error('dist is missing: run `npm run build` (npm test does it)');
  for (const folder of ['src', 'console/src']) {
    const files = fs.readdirSync(path.join(ROOT, folder), { recursive: true }) as string[];
    for (const file of files) {
      const source = path.join(ROOT, folder, file);
      if (fs.statSync(source).mtimeMs > built.mtimeMs) {
        throw new Error(`dist is older than ${folder}/${file}: run \`npm run build\` (npm test does it)`);
      }
    }
  }
}
