/**
 * Coffer's version, read once from package.json: the one place it is written. src/domain and dist/domain are both
 * two levels below the package root, and so is dist/domain in the CLI package (scripts/pack-cli.mjs writes its
 * package.json with this same version), so the same relative path serves all three.
 */
import fs from 'node:fs';

export const VERSION: string = (
  JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
