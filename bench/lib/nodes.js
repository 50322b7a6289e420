/* global process */
/** Node executables installed beside this one, for the client benchmarks that need zstd (node:zlib has it from 22.15). */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** {version, zstd} of a Node executable, or null when it does not run. */
export function probe(node) {
  const result = spawnSync(node, ['-p', "process.version + ' ' + (typeof require('node:zlib').createZstdCompress === 'function')"], {
    encoding: 'utf8',
    timeout: 10_000,
  });
  if (result.status !== 0) return null;
  const [version, zstd] = result.stdout.trim().split(' ');
  return { node, version, zstd: zstd === 'true' };
}

/** Node executables that may be installed beside this one (nothing is downloaded). */
export function candidateNodes(explicit) {
  const home = os.homedir();
  const found = [explicit, process.execPath, process.env.COFFER_BENCH_ZSTD_NODE];
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    for (const name of ['node24', 'node23', 'node22']) found.push(path.join(dir, name));
  }
  const versionDirs = [
    [path.join(process.env.NVM_DIR ?? path.join(home, '.nvm'), 'versions', 'node'), 'bin/node'],
    [path.join(home, '.local', 'share', 'fnm', 'node-versions'), 'installation/bin/node'],
    [path.join(home, '.volta', 'tools', 'image', 'node'), 'bin/node'],
    [path.join(process.env.N_PREFIX ?? '/usr/local', 'n', 'versions', 'node'), 'bin/node'],
    [path.join(home, '.asdf', 'installs', 'nodejs'), 'bin/node'],
  ];
  for (const [dir, bin] of versionDirs) {
    if (!fs.existsSync(dir)) continue;
    // Newest first (v24.x before v22.x).
    const versions = fs.readdirSync(dir).sort((a, b) => b.localeCompare(a, 'en', { numeric: true }));
    for (const version of versions) found.push(path.join(dir, version, bin));
  }
  return [...new Set(found.filter((node) => node && fs.existsSync(node)))];
}

/** The first Node found with zstd in node:zlib ({node, version}), or null. */
export function findZstdNode(explicit) {
  return (
    candidateNodes(explicit)
      .map(probe)
      .find((p) => p?.zstd) ?? null
  );
}
