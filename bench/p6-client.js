/* global process */
/**
 * P6 — the client end to end: `coffer backup` + `coffer restore` of a generated 45 MiB tree (3,000 small files
 * and three 11 MiB ones) against a local Coffer server, vs `restic backup` + `restic restore` of the same tree
 * into a local repository (Debian restic, installed with apt-get when missing). Wall time of each command as a
 * user runs it (process start to exit). Target (issue 17): Coffer at least twice as fast as restic.
 *
 * Each round uses a fresh account (`coffer init` with the given Argon2id cost and `coffer recipient`, not timed) and
 * a fresh restic repository (`restic init`, not timed; scrypt parameters are calibrated by restic and read back from
 * its key file). `coffer backup` runs as a backup host does: sealed to the recipient, with no passphrase (no key
 * derivation); `coffer restore` derives the key from the passphrase (Argon2id), as restic derives its own (scrypt)
 * in each command. Every restore is checked against the source tree (SHA-256 over paths and contents), outside the
 * timing.
 *
 *   node bench/p6-client.js [--rounds 3] [--kdf moderate,interactive] [--node /path/to/node] [--dir /tmp]
 *
 * The first --kdf profile is the one the target is judged on (moderate is `coffer init`'s default); the others
 * are shown for comparison (interactive is about restic's own key-derivation cost). --node runs the CLI on another
 * Node (its default compression is zstd where node:zlib has it, gzip before Node 22.15); the server stays on this
 * one. --dir puts the tree, the restores and restic's repository elsewhere (a tmpfs shows both pipelines without
 * the file system's per-file cost).
 *
 * P9 (the host's footprint) from the same backups: CPU seconds (user + system) and peak RSS of each `coffer backup`
 * and `restic backup`, read by GNU time (Debian package time) around the process. Target: Coffer at most half of
 * restic's CPU time, peak RSS at most 100 MiB.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  DIST,
  MiB,
  commandLine,
  ensureDebian,
  list,
  log,
  logFile,
  median,
  options,
  requireBuild,
  round,
  run,
  tempDir,
  runWhenMain,
} from './lib/common.js';
import { prepareBackend, startCoffer } from './lib/coffer.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';
import { generateTree, treeDigest } from './lib/tree.js';

const PASSPHRASE = 'correct horse battery staple, benchmark edition';

/**
 * Runs a command, resolves with {seconds, stdout} and, with `footprint`, {cpuSeconds, peakRssMiB} of the process (GNU
 * time's user + system time and maximum resident set size); rejects on a non-zero exit.
 */
function timed(command, args, { env = {}, cwd, footprint = false } = {}) {
  const stats = footprint ? path.join(tempDir('coffer-bench-time-'), 'time.txt') : null;
  if (stats) [command, args] = ['/usr/bin/time', ['-f', '%U %S %M', '-o', stats, command, ...args]];
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(command, args, { env: { ...process.env, ...env }, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('exit', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (code === 0 && stats) {
        const [user, system, maxKiB] = fs.readFileSync(stats, 'utf8').trim().split(/\s+/).slice(-3).map(Number);
        fs.rmSync(path.dirname(stats), { recursive: true, force: true });
        resolve({ seconds, stdout, cpuSeconds: user + system, peakRssMiB: maxKiB / 1024 });
      } else if (code === 0) resolve({ seconds, stdout });
      else reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${stderr.slice(-500)}`));
    });
  });
}

function check(source, restored, who) {
  const got = treeDigest(restored);
  if (got.digest !== source.digest || got.files !== source.files) {
    throw new Error(`${who} restore differs from the source tree (${got.files} files, ${got.digest} vs ${source.files}, ${source.digest})`);
  }
}

export async function main() {
  const opts = options({ rounds: 3, backend: 'sqlite+fs', kdf: 'moderate,interactive', node: process.execPath, dir: '' });
  const kdfs = list(opts.kdf);
  requireBuild();
  ensureDebian('restic', 'restic');
  ensureDebian('/usr/bin/time', 'time');
  const coffer_ = process.env.BENCH_COFFER_CLI ?? path.join(DIST, 'cli', 'main.js'); // another build's CLI, to compare
  const node = opts.node;
  const nodeVersion = run(node, ['--version']).trim();
  // What `coffer backup` compresses with on that Node (src/client/compression.ts: zstd where node:zlib has it).
  const compression = run(node, [
    '-e',
    "process.stdout.write(typeof require('node:zlib').createZstdCompress === 'function' ? 'zstd' : 'gzip')",
  ]);
  run(node, [coffer_, 'backup', '--help']); // fails early when the client CLI is missing
  const started = Date.now();
  // Another Node or directory is another result (p6-node24, p6-shm for /dev/shm), next to the default one.
  const variant =
    (opts.node !== process.execPath ? `-node${nodeVersion.replace(/^v(\d+).*$/, '$1')}` : '') +
    (opts.dir ? `-${path.basename(opts.dir)}` : '');
  const work = opts.dir ? fs.mkdtempSync(path.join(opts.dir, 'coffer-bench-p6-')) : tempDir('coffer-bench-p6-');
  const tree = path.join(work, 'tree');
  const generated = generateTree(tree);
  const source = treeDigest(tree);
  const resticVersion = run('restic', ['version']).trim().split(' ').slice(0, 2).join(' ');
  const prepared = await prepareBackend(opts.backend);
  const server = await startCoffer(prepared, { logFile: logFile('p6-client-coffer.log') });
  const samples = { restic: [], ...Object.fromEntries(kdfs.map((kdf) => [`coffer-${kdf}`, []])) };
  let resticKdf = null;
  let cipherBytes = null;
  try {
    for (let r = 0; r < opts.rounds; r++) {
      const names = Object.keys(samples);
      const order = r % 2 === 0 ? names : [...names].reverse();
      for (const who of order) {
        const target = path.join(work, `restore-${who}-${r}`);
        if (who.startsWith('coffer')) {
          const [key] = await server.keys(1, 'pro');
          const env = { COFFER_URL: server.url, COFFER_API_KEY: key.apiKey, COFFER_PASSPHRASE: PASSPHRASE };
          await timed(node, [coffer_, 'init', '--kdf', who.slice('coffer-'.length)], { env });
          const { recipient } = JSON.parse((await timed(node, [coffer_, 'recipient', '--json'], { env })).stdout);
          // The backup host: URL, API key and recipient, no passphrase.
          const host = { COFFER_URL: server.url, COFFER_API_KEY: key.apiKey, COFFER_PASSPHRASE: '', COFFER_RECIPIENT: recipient };
          const backup = await timed(node, [coffer_, 'backup', tree, '--json'], { env: host, footprint: true });
          const detail = JSON.parse(backup.stdout);
          cipherBytes = detail.ciphertextSizeBytes;
          const restore = await timed(node, [coffer_, 'restore', detail.id, target], { env });
          check(source, target, 'coffer');
          samples[who].push({
            backup: backup.seconds,
            restore: restore.seconds,
            backupCpu: backup.cpuSeconds,
            backupRss: backup.peakRssMiB,
          });
        } else {
          const repo = path.join(work, `restic-repo-${r}`);
          const env = { RESTIC_REPOSITORY: repo, RESTIC_PASSWORD: PASSPHRASE, RESTIC_CACHE_DIR: path.join(work, `restic-cache-${r}`) };
          await timed('restic', ['init', '--repository-version', '2'], { env });
          if (!resticKdf) {
            const keyFile = fs.readdirSync(path.join(repo, 'keys'))[0];
            const { kdf, N, r: rr, p } = JSON.parse(fs.readFileSync(path.join(repo, 'keys', keyFile), 'utf8'));
            resticKdf = { kdf, N, r: rr, p, memoryMiB: round((128 * N * rr) / MiB, 0) };
          }
          const backup = await timed('restic', ['backup', '--quiet', tree], { env, footprint: true });
          const restore = await timed('restic', ['restore', 'latest', '--target', target], { env });
          check(source, path.join(target, tree), 'restic');
          samples.restic.push({
            backup: backup.seconds,
            restore: restore.seconds,
            backupCpu: backup.cpuSeconds,
            backupRss: backup.peakRssMiB,
          });
        }
        // Not removed until the end: on ext4 without a journal (this machine) every create skips, one by one, the
        // inodes of its block group freed in the last minute, so a restore right after removing the previous
        // one pays for that removal (0.5 ms per create instead of 0.04 ms): whichever tool came second lost.
      }
      log(
        `P6 round ${r + 1}: ` +
          names
            .map((n) => `${n} backup ${samples[n].at(-1).backup.toFixed(2)} s + restore ${samples[n].at(-1).restore.toFixed(2)} s`)
            .join('; '),
      );
    }
  } finally {
    await server.stop();
    await prepared.cleanup();
    fs.rmSync(work, { recursive: true, force: true });
  }

  const m = (who, pick) => median(samples[who].map(pick));
  const main_ = `coffer-${kdfs[0]}`;
  const coffers = kdfs.map((kdf) => `coffer-${kdf}`);
  const total = (who) => m(who, (x) => x.backup + x.restore);
  const rows = ['backup', 'restore', 'backup + restore'].map((step) => {
    const pick = step === 'backup + restore' ? (x) => x.backup + x.restore : (x) => x[step];
    const restic = m('restic', pick);
    return [step, ...coffers.flatMap((who) => [round(m(who, pick), 2), fmtRatio(ratio(restic, m(who, pick)))]), round(restic, 2)];
  });
  const speed = ratio(total('restic'), total(main_));
  // P9: the backup host's share of a small machine (no key derivation in either backup here: restic's scrypt aside).
  const cpu = (who) => m(who, (x) => x.backupCpu);
  const rss = (who) => m(who, (x) => x.backupRss);
  const cpuShare = cpu(main_) / cpu('restic');
  return writeResult({
    id: `p6${variant}`,
    name: `p6-client${variant}`,
    title: `P6 — client backup and restore${opts.node !== process.execPath ? `, the CLI on Node ${nodeVersion}` : ''}${opts.dir ? ` in ${opts.dir}` : ''}`,
    target:
      '`coffer backup` (sealed to a recipient) + `coffer restore` (Argon2id) at least twice as fast as `restic backup` + `restic restore` of the same tree',
    command: commandLine('p6-client.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `Wall time in seconds, ${generated.files} files, ${round(generated.bytes / MiB, 1)} MiB, median of ${opts.rounds} rounds (speed ratio = restic time / Coffer time; > 1 means Coffer is faster)`,
        columns: ['step', ...coffers.flatMap((who) => [`${who.replace('-', ' (Argon2id ')})`, 'speed ratio']), 'restic'],
        rows,
      },
      {
        title: `P9 — the backup's footprint: CPU seconds (user + system) and peak RSS of the process, median of ${opts.rounds} rounds`,
        columns: ['backup', 'CPU seconds', "share of restic's CPU", 'peak RSS (MiB)'],
        rows: [main_, 'restic'].map((who) => [
          `${who === 'restic' ? 'restic backup' : 'coffer backup (recipient)'}`,
          round(cpu(who), 2),
          `${round(cpu(who) / cpu('restic'), 2)}×`,
          round(rss(who), 0),
        ]),
      },
    ],
    verdicts: [
      {
        what: `P6 (the CLI on Node ${nodeVersion.replace(/^v(\d+).*$/, '$1')}, ${compression}): coffer backup (recipient) + restore (Argon2id ${kdfs[0]}) vs restic${opts.dir ? ` (in ${opts.dir})` : ''}`,
        value: `${round(total(main_), 2)} s vs ${round(total('restic'), 2)} s (${fmtRatio(speed)})`,
        target: '≥ 2.00×',
        met: speed >= 2,
      },
      {
        what: `P9 (the CLI on Node ${nodeVersion.replace(/^v(\d+).*$/, '$1')}): coffer backup's CPU time vs restic backup's, same tree`,
        value: `${round(cpu(main_), 2)} s vs ${round(cpu('restic'), 2)} s (${round(cpuShare, 2)}×)`,
        target: '≤ 0.50×',
        met: cpuShare <= 0.5,
      },
      {
        what: `P9 (the CLI on Node ${nodeVersion.replace(/^v(\d+).*$/, '$1')}): coffer backup's peak RSS`,
        value: `${round(rss(main_), 0)} MiB (restic ${round(rss('restic'), 0)} MiB)`,
        target: '≤ 100 MiB',
        met: rss(main_) <= 100,
      },
    ],
    notes: [
      `Key derivation: coffer backup: none (the data key is sealed to the recipient with X-Wing); coffer restore: Argon2id "moderate" (the default: opslimit 3, 256 MiB) or "interactive" (opslimit 2, 64 MiB), libsodium; restic in each command: ${resticVersion} ${resticKdf ? `${resticKdf.kdf} N=${resticKdf.N} r=${resticKdf.r} p=${resticKdf.p} (${resticKdf.memoryMiB} MiB), calibrated by restic init` : ''}.`,
      `Pipelines: Coffer (the CLI on Node ${nodeVersion.replace(/^v/, '')}) tar → ${compression} → XChaCha20-Poly1305 secretstream → one HTTP upload to a local server (${opts.backend}), the data key sealed to the recipient; ciphertext ${cipherBytes === null ? 'n/a' : `${round(cipherBytes / MiB, 1)} MiB`}. restic: content-defined chunking, dedup, zstd (repository v2), AES-256 + Poly1305, local repository.`,
    ],
    chart: {
      title: 'P6 — backup + restore of a 45 MiB tree, wall time (lower is better)',
      subtitle: `median of ${opts.rounds} rounds; speed ratio restic / Coffer = ${fmtRatio(speed)}`,
      unit: 'seconds',
      series: ['backup', 'restore'],
      groups: [
        ...coffers.map((who) => ({
          label: who.replace('-', ' (') + ')',
          note: fmtRatio(ratio(total('restic'), total(who))),
          values: [m(who, (x) => x.backup), m(who, (x) => x.restore)],
        })),
        { label: 'restic (baseline)', values: [m('restic', (x) => x.backup), m('restic', (x) => x.restore)] },
      ],
    },
    raw: { samples, tree: generated, resticKdf },
  });
}

runWhenMain(import.meta.url, main);
