/**
 * Files the console serves from the package itself (no CDN): the page built by Vite into dist/console-ui, and
 * the CLI package built by `npm pack` into dist/downloads (scripts/pack-cli.mjs). Both are found from the package
 * root, so the server finds them whether it runs from src/ (tests) or dist/.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The directory of Coffer's package.json above this module. */
export function packageRoot(from = path.dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest)) {
      try {
        if ((JSON.parse(fs.readFileSync(manifest, 'utf8')) as { name?: string }).name === 'coffer') return dir;
      } catch {
        // not ours; keep looking
      }
    }
    if (path.dirname(dir) === dir) throw new Error(`Coffer's package.json not found above ${from}`);
  }
}

export const CONSOLE_DIR = 'dist/console-ui';
export const CLI_TARBALL = 'dist/downloads/coffer-cli.tgz';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'application/javascript; charset=utf-8',
  '.mjs': 'application/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.wasm': 'application/wasm',
  '.json': 'application/json; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
  '.txt': 'text/plain; charset=utf-8',
};

export interface StaticFile {
  body: Buffer;
  type: string;
  etag: string;
  /** Vite's content-hashed assets never change under their name. */
  immutable: boolean;
}

/** Every file of the built console, by URL path below /console (e.g. `/assets/index-1a2b3c.js`); empty when not built. */
export function loadConsoleFiles(root = packageRoot()): Map<string, StaticFile> {
  const dir = path.join(root, CONSOLE_DIR);
  const files = new Map<string, StaticFile>();
  if (!fs.existsSync(path.join(dir, 'index.html'))) return files;
  const walk = (current: string) => {
    for (const entry of fs.readdirSync(current, { withFileTypes: true })) {
      const full = path.join(current, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile()) {
        const body = fs.readFileSync(full);
        const rel = `/${path.relative(dir, full).split(path.sep).join('/')}`;
        files.set(rel, {
          body,
          type: TYPES[path.extname(entry.name)] ?? 'application/octet-stream',
          etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
          immutable: rel.startsWith('/assets/'),
        });
      }
    }
  };
  walk(dir);
  return files;
}

const consoleFilesByRoot = new Map<string, Map<string, StaticFile>>();

/**
 * loadConsoleFiles, once per package root: the page's routes and the operator console's call it on their first
 * request (not at the server's start: the build is ~2 MB to read and hash), and share what it read.
 */
export function consoleFiles(root = packageRoot()): Map<string, StaticFile> {
  let files = consoleFilesByRoot.get(root);
  if (!files) consoleFilesByRoot.set(root, (files = loadConsoleFiles(root)));
  return files;
}

export interface CliTarball {
  file: string;
  bytes: number;
  sha256: string;
  /** npm's Subresource Integrity string (sha512), as `npm install` prints and lockfiles hold. */
  integrity: string;
  mtimeMs: number;
}

let cached: CliTarball | undefined;

/** The packed CLI, or undefined when it has not been built (`npm run build`). Re-read when the file changes. */
export function cliTarball(root = packageRoot()): CliTarball | undefined {
  const file = path.join(root, CLI_TARBALL);
  const stat = fs.statSync(file, { throwIfNoEntry: false });
  if (!stat?.isFile()) return undefined;
  if (cached && cached.file === file && cached.mtimeMs === stat.mtimeMs && cached.bytes === stat.size) return cached;
  const body = fs.readFileSync(file);
  cached = {
    file,
    bytes: body.length,
    sha256: createHash('sha256').update(body).digest('hex'),
    integrity: `sha512-${createHash('sha512').update(body).digest('base64')}`,
    mtimeMs: stat.mtimeMs,
  };
  return cached;
}
