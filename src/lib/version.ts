/**
 * Coffer's version and Node engine range, read once from package.json: the one place they are written. src/lib
 * and dist/lib are both two levels below the package root, and so is dist/lib in the CLI package
 * (scripts/pack-cli.mjs writes its package.json with this same version), so one relative path serves all three.
 */
import fs from 'node:fs';

const manifest = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
  engines?: { node?: string };
};

export const VERSION: string = manifest.version;
export const NODE_ENGINE: string = manifest.engines?.node ?? '>=20';
