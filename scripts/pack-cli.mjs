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
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { importClosure, npmPack, stageModule, versionsOf } from './package-closure.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const ENTRY = 'dist/cli/client-main.js';
const OUT = path.join(root, 'dist/downloads/coffer-cli.tgz');

if (!fs.existsSync(path.join(root, ENTRY))) {
  console.error(`pack-cli: ${ENTRY} is missing; run tsc first`);
  process.exit(1);
}

const { files, packages } = importClosure(root, [ENTRY]);
const dependencies = versionsOf(packages, manifest, 'the CLI');

// ---- stage and pack ----
const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-cli-pack-'));
try {
  for (const rel of files) stageModule(path.join(root, rel), path.join(stage, rel), rel === ENTRY ? 0o755 : 0o644);
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
  const bytes = npmPack(stage, OUT);
  console.log(`pack-cli: dist/downloads/coffer-cli.tgz (${bytes} bytes, ${files.size} modules; ${Object.keys(dependencies).join(', ')})`);
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}
