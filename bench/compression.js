/* global process, console */
/**
 * zstd vs gzip for `coffer backup` + `coffer restore` of the P6 tree (bench/lib/tree.js: 3,000 small text files
 * and three 11 MiB files, about 45 MiB) against a local Coffer server. The CLI runs on the Node given with
 * --node (zstd needs Node 22.15 or later; the server runs on this Node); each round makes one backup with each
 * compression (fresh account, `coffer init --kdf min`, not timed, so Argon2id is out of the figures) and
 * restores it, checked against the source tree outside the timing. A restore of a zstd backup is also timed
 * with this Node when it has no zstd (the pure-JavaScript decoder).
 *
 *   node bench/compression.js --node /path/to/node24/bin/node [--rounds 3]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { DIST, log, median, options, requireBuild, round, tempDir, runWhenMain } from './lib/common.js';
import { prepareBackend, startCoffer } from './lib/coffer.js';
import { generateTree, treeDigest } from './lib/tree.js';

const PASSPHRASE = 'compression benchmark passphrase';

function timed(command, args, env) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('exit', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (code === 0) resolve({ seconds, stdout });
      else reject(new Error(`${args.join(' ')} exited ${code}: ${stderr.slice(-500)}`));
    });
  });
}

export async function main() {
  const opts = options({ rounds: 3, node: process.execPath, backend: 'sqlite+fs' });
  requireBuild();
  const cli = path.join(DIST, 'cli', 'main.js');
  const work = tempDir('coffer-bench-compression-');
  const tree = path.join(work, 'tree');
  generateTree(tree);
  const source = treeDigest(tree);
  const prepared = await prepareBackend(opts.backend);
  const server = await startCoffer(prepared, {});
  const localZstd = typeof zlib.createZstdDecompress === 'function';
  const samples = { gzip: [], zstd: [] };
  try {
    for (let r = 0; r < Number(opts.rounds); r++) {
      for (const compression of r % 2 === 0 ? ['gzip', 'zstd'] : ['zstd', 'gzip']) {
        const [key] = await server.keys(1, 'pro');
        const env = { COFFER_URL: server.url, COFFER_API_KEY: key.apiKey, COFFER_PASSPHRASE: PASSPHRASE, COFFER_KDF: 'min' };
        await timed(opts.node, [cli, 'init'], env);
        const backup = await timed(opts.node, [cli, 'backup', tree, '--compression', compression, '--json'], env);
        const detail = JSON.parse(backup.stdout);
        const target = path.join(work, `restore-${compression}-${r}`);
        const restore = await timed(opts.node, [cli, 'restore', detail.id, target], env);
        if (treeDigest(target).digest !== source.digest) throw new Error(`${compression} restore differs from the source`);
        fs.rmSync(target, { recursive: true, force: true });
        let fallback;
        if (compression === 'zstd' && !localZstd) {
          fallback = (await timed(process.execPath, [cli, 'restore', detail.id, target], env)).seconds;
          if (treeDigest(target).digest !== source.digest) throw new Error('zstd restore (fzstd) differs from the source');
          fs.rmSync(target, { recursive: true, force: true });
        }
        samples[compression].push({ backup: backup.seconds, restore: restore.seconds, fallback, bytes: detail.ciphertextSizeBytes });
        log(`round ${r + 1} ${compression}: backup ${backup.seconds.toFixed(2)} s, restore ${restore.seconds.toFixed(2)} s` +
          (fallback ? `, restore on ${process.version} (fzstd) ${fallback.toFixed(2)} s` : '') + `, ${detail.ciphertextSizeBytes} bytes encrypted`);
      }
    }
  } finally {
    await server.stop();
    await prepared.cleanup();
    fs.rmSync(work, { recursive: true, force: true });
  }
  const nodeVersion = (await timed(opts.node, ['--version'], {})).stdout.trim();
  const m = (c, pick) => round(median(samples[c].map(pick)), 2);
  console.log(`CLI on Node ${nodeVersion}; tree ${source.files} files; medians of ${opts.rounds} rounds`);
  console.log('| compression | encrypted MiB | backup s | restore s | restore s on this Node (fzstd) |');
  console.log('|---|---|---|---|---|');
  for (const c of ['gzip', 'zstd']) {
    const fallback = samples[c].some((s) => s.fallback) ? m(c, (s) => s.fallback ?? NaN) : '-';
    console.log(`| ${c} | ${round(samples[c][0].bytes / 1024 / 1024, 1)} | ${m(c, (s) => s.backup)} | ${m(c, (s) => s.restore)} | ${fallback} |`);
  }
}

runWhenMain(import.meta.url, main);
