#!/usr/bin/env node
/* global process, console */
/**
 * Builds the CLI package every Coffer server serves at /downloads/coffer-cli.tgz (run by `npm run build`, after tsc).
 *
 * The package holds the client side of `coffer` only: dist/cli/client-main.js and the compiled modules it imports
 * (found by following the imports), with exactly the dependencies those modules name, at the versions of this
 * package.json. So `npm install -g <server>/downloads/coffer-cli.tgz` installs a few small packages, not the
 * server's (no SQLite build, no AWS SDK). The tarball is `npm pack`'s output, renamed.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const ENTRY = 'dist/cli/client-main.js';
const OUT = path.join(root, 'dist/downloads/coffer-cli.tgz');

if (!fs.existsSync(path.join(root, ENTRY))) {
  console.error(`pack-cli: ${ENTRY} is missing; run tsc first`);
  process.exit(1);
}

// ---- the import closure of the entry ----
const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;
const builtins = new Set(builtinModules);
const files = new Set();
const packages = new Set();
const queue = [ENTRY];
while (queue.length > 0) {
  const rel = queue.pop();
  if (files.has(rel)) continue;
  files.add(rel);
  const source = fs.readFileSync(path.join(root, rel), 'utf8');
  for (const match of source.matchAll(IMPORT)) {
    const specifier = match[1] ?? match[2] ?? match[3];
    if (specifier.startsWith('.')) {
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(rel), specifier));
      if (!fs.existsSync(path.join(root, target))) throw new Error(`${rel} imports ${specifier}, which is not built`);
      queue.push(target);
    } else if (!specifier.startsWith('node:') && !builtins.has(specifier)) {
      const parts = specifier.split('/');
      packages.add(specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]);
    }
  }
}

const dependencies = {};
for (const name of [...packages].sort()) {
  const range = manifest.dependencies?.[name];
  if (!range) throw new Error(`the CLI imports ${name}, which is not a dependency in package.json`);
  dependencies[name] = range;
}

// ---- stage and pack ----
const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-cli-pack-'));
try {
  for (const rel of files) {
    const target = path.join(stage, rel);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    // Source maps point into src/, which the package does not ship.
    const text = fs.readFileSync(path.join(root, rel), 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n');
    fs.writeFileSync(target, text, { mode: rel === ENTRY ? 0o755 : 0o644 });
  }
  const cli = {
    name: 'coffer-cli',
    version: manifest.version,
    description: 'Coffer CLI: zero-knowledge encrypted backups (encrypts locally; the server stores only ciphertext)',
    type: 'module',
    license: manifest.license,
    engines: manifest.engines,
    bin: { coffer: ENTRY },
    files: ['dist', 'README.md'],
    dependencies,
  };
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(cli, null, 2)}\n`);
  fs.writeFileSync(
    path.join(stage, 'README.md'),
    [
      '# coffer-cli',
      '',
      'The `coffer` command of Coffer, a self-hostable zero-knowledge backup service: it archives, compresses and',
      'encrypts on your machine (libsodium: Argon2id, XChaCha20-Poly1305), then uploads only ciphertext.',
      '',
      'Every Coffer server serves this package: `npm install -g <your server>/downloads/coffer-cli.tgz`.',
      '',
      '```sh',
      'export COFFER_URL=https://backup.example.com COFFER_API_KEY=cfk_...',
      'coffer init && coffer backup ~/Documents && coffer list',
      'coffer restore <backupId> ./restored',
      '```',
      '',
      'Run `coffer --help` for every command. The server itself (`coffer serve`, `coffer admin`) is the full `coffer` package.',
      '',
    ].join('\n'),
  );
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  const output = execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', stage], {
    cwd: stage,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const [{ filename }] = JSON.parse(output);
  fs.copyFileSync(path.join(stage, filename), `${OUT}.tmp`);
  fs.renameSync(`${OUT}.tmp`, OUT);
  console.log(
    `pack-cli: dist/downloads/coffer-cli.tgz (${fs.statSync(OUT).size} bytes, ${files.size} modules; ${Object.keys(dependencies).join(', ')})`,
  );
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}
