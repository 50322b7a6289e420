/* global process, console */
/**
 * P6 — the client end to end: `coffer backup` + `coffer restore` of a generated 45 MiB tree (3,000 small files
 * and three 11 MiB ones) against a local Coffer server, vs `restic backup` + `restic restore` of the same tree
 * into a local repository (Debian restic, installed with apt-get when missing). Wall time of each command as a
 * user runs it (process start to exit). Target: Coffer faster than restic.
 *
 * Each round uses a fresh account (`coffer init` with the default Argon2id "moderate" cost, not timed) and a
 * fresh restic repository (`restic init`, not timed; scrypt parameters are calibrated by restic and read back
 * from its key file): each timed command derives its key from the passphrase once, on both sides. Every
 * restore is checked against the source tree (SHA-256 over paths and contents), outside the timing.
 *
 *   node bench/p6-client.js [--rounds 3]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { DIST, MiB, commandLine, ensureDebian, log, logFile, median, options, requireBuild, round, run, tempDir } from './lib/common.js';
import { prepareBackend, startCoffer } from './lib/coffer.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';
import { generateTree, treeDigest } from './lib/tree.js';

const PASSPHRASE = 'correct horse battery staple, benchmark edition';

/** Runs a command, resolves with {seconds, stdout}; rejects on a non-zero exit. */
function timed(command, args, { env = {}, cwd } = {}) {
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
      if (code === 0) resolve({ seconds, stdout });
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
  const opts = options({ rounds: 3, backend: 'sqlite+fs' });
  requireBuild();
  ensureDebian('restic', 'restic');
  const coffer_ = path.join(DIST, 'cli', 'main.js');
  run(process.execPath, [coffer_, 'backup', '--help']); // fails early when the client CLI is missing
  const started = Date.now();
  const work = tempDir('coffer-bench-p6-');
  const tree = path.join(work, 'tree');
  const generated = generateTree(tree);
  const source = treeDigest(tree);
  const resticVersion = run('restic', ['version']).trim().split(' ').slice(0, 2).join(' ');
  const prepared = await prepareBackend(opts.backend);
  const server = await startCoffer(prepared, { logFile: logFile('p6-client-coffer.log') });
  const samples = { coffer: [], restic: [] };
  let resticKdf = null;
  let cipherBytes = null;
  try {
    for (let r = 0; r < opts.rounds; r++) {
      const order = r % 2 === 0 ? ['coffer', 'restic'] : ['restic', 'coffer'];
      for (const who of order) {
        const target = path.join(work, `restore-${who}-${r}`);
        if (who === 'coffer') {
          const [key] = await server.keys(1, 'pro');
          const env = { COFFER_URL: server.url, COFFER_API_KEY: key.apiKey, COFFER_PASSPHRASE: PASSPHRASE };
          await timed(process.execPath, [coffer_, 'init'], { env });
          const backup = await timed(process.execPath, [coffer_, 'backup', tree, '--json'], { env });
          const detail = JSON.parse(backup.stdout);
          cipherBytes = detail.ciphertextSizeBytes;
          const restore = await timed(process.execPath, [coffer_, 'restore', detail.id, target], { env });
          check(source, target, 'coffer');
          samples.coffer.push({ backup: backup.seconds, restore: restore.seconds });
        } else {
          const repo = path.join(work, `restic-repo-${r}`);
          const env = { RESTIC_REPOSITORY: repo, RESTIC_PASSWORD: PASSPHRASE, RESTIC_CACHE_DIR: path.join(work, `restic-cache-${r}`) };
          await timed('restic', ['init', '--repository-version', '2'], { env });
          if (!resticKdf) {
            const keyFile = fs.readdirSync(path.join(repo, 'keys'))[0];
            const { kdf, N, r: rr, p } = JSON.parse(fs.readFileSync(path.join(repo, 'keys', keyFile), 'utf8'));
            resticKdf = { kdf, N, r: rr, p, memoryMiB: round((128 * N * rr) / MiB, 0) };
          }
          const backup = await timed('restic', ['backup', '--quiet', tree], { env });
          const restore = await timed('restic', ['restore', 'latest', '--target', target], { env });
          check(source, path.join(target, tree), 'restic');
          samples.restic.push({ backup: backup.seconds, restore: restore.seconds });
        }
        fs.rmSync(target, { recursive: true, force: true });
      }
      const c = samples.coffer.at(-1);
      const s = samples.restic.at(-1);
      log(`P6 round ${r + 1}: coffer backup ${c.backup.toFixed(2)} s + restore ${c.restore.toFixed(2)} s; restic backup ${s.backup.toFixed(2)} s + restore ${s.restore.toFixed(2)} s`);
    }
  } finally {
    await server.stop();
    await prepared.cleanup();
    fs.rmSync(work, { recursive: true, force: true });
  }

  const m = (who, pick) => median(samples[who].map(pick));
  const sum = { coffer: m('coffer', (x) => x.backup + x.restore), restic: m('restic', (x) => x.backup + x.restore) };
  const rows = ['backup', 'restore'].map((step) => {
    const c = m('coffer', (x) => x[step]);
    const s = m('restic', (x) => x[step]);
    return [step, round(c, 2), round(s, 2), fmtRatio(ratio(s, c))];
  });
  rows.push(['backup + restore', round(sum.coffer, 2), round(sum.restic, 2), fmtRatio(ratio(sum.restic, sum.coffer))]);
  const speed = ratio(sum.restic, sum.coffer);
  return writeResult({
    id: 'p6',
    name: 'p6-client',
    title: 'P6 — client backup and restore',
    target: '`coffer backup` + `coffer restore` faster than `restic backup` + `restic restore` of the same tree',
    command: commandLine('p6-client.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `Wall time in seconds, ${generated.files} files, ${round(generated.bytes / MiB, 1)} MiB, median of ${opts.rounds} rounds (speed ratio = restic time / Coffer time; > 1 means Coffer is faster)`,
        columns: ['step', 'coffer', 'restic', 'speed ratio'],
        rows,
      },
    ],
    verdicts: [
      { what: 'P6: coffer backup + restore vs restic', value: `${round(sum.coffer, 2)} s vs ${round(sum.restic, 2)} s (${fmtRatio(speed)})`, target: 'faster (> 1.00×)', met: speed > 1 },
    ],
    notes: [
      `Key derivation, once per command on both sides: Coffer Argon2id "moderate" (opslimit 3, 256 MiB, libsodium); ${resticVersion} ${resticKdf ? `${resticKdf.kdf} N=${resticKdf.N} r=${resticKdf.r} p=${resticKdf.p} (${resticKdf.memoryMiB} MiB), calibrated by restic init` : ''}.`,
      `Pipelines: Coffer tar → gzip (level 6) → XChaCha20-Poly1305 secretstream → one HTTP upload to a local server (${opts.backend}); ciphertext ${cipherBytes === null ? 'n/a' : `${round(cipherBytes / MiB, 1)} MiB`}. restic: content-defined chunking, dedup, zstd (repository v2), AES-256 + Poly1305, local repository.`,
    ],
    chart: {
      title: 'P6 — backup + restore of a 45 MiB tree, wall time (lower is better)',
      subtitle: `median of ${opts.rounds} rounds; speed ratio restic / Coffer = ${fmtRatio(speed)}`,
      unit: 'seconds',
      series: ['backup', 'restore'],
      groups: [
        { label: 'coffer', values: [m('coffer', (x) => x.backup), m('coffer', (x) => x.restore)] },
        { label: `restic (baseline)`, values: [m('restic', (x) => x.backup), m('restic', (x) => x.restore)] },
      ],
    },
    raw: { samples, tree: generated, resticKdf },
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}
