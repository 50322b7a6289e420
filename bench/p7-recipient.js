/* global process */
/**
 * P7 — `coffer backup` sealed to a recipient vs with the passphrase, against one local Coffer server, on the same
 * trees: a small one (20 files, ~80 KiB, where the key derivation is most of the work) and P6's 45 MiB tree.
 * With the passphrase the CLI unwraps the master key first (Argon2id with the vault's cost: "moderate", the default,
 * is 3 passes over 256 MiB); with a recipient (COFFER_RECIPIENT) it derives nothing and seals the data key with
 * X-Wing (ML-KEM-768 + X25519) instead. Wall time of each command as a user runs it (process start to exit) and the
 * CPU time (user + system) and peak RSS of the CLI process (GNU time).
 *
 * One account (`coffer init --kdf <kdf>`, `coffer recipient`, not timed); the modes alternate within each round
 * (order reversed every other round); the server's clock moves 31 minutes after every backup (pro plan cadence).
 *
 *   node bench/p7-recipient.js [--rounds 5] [--kdf moderate]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  DIST,
  MiB,
  commandLine,
  ensureDebian,
  log,
  logFile,
  median,
  options,
  requireBuild,
  round,
  runWhenMain,
  tempDir,
} from './lib/common.js';
import { prepareBackend, startCoffer } from './lib/coffer.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';
import { generateTree } from './lib/tree.js';

const PASSPHRASE = 'correct horse battery staple, benchmark edition';

/**
 * Runs the CLI under GNU time (Debian's `time` package): resolves with {seconds (wall, from here), cpu (user + system
 * seconds of the CLI process), peakRss (bytes)}; rejects on a non-zero exit. CPU time depends far less than wall
 * time on what else the machine is running.
 */
function timed(args, env) {
  return new Promise((resolve, reject) => {
    // Nothing COFFER_* from the caller's environment: a host run must have no passphrase anywhere.
    const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('COFFER_')));
    const report = path.join(os.tmpdir(), `coffer-p7-time-${process.pid}.txt`);
    const started = process.hrtime.bigint();
    const child = spawn('/usr/bin/time', ['-f', '%U %S %M', '-o', report, process.execPath, path.join(DIST, 'cli', 'main.js'), ...args], {
      env: { ...base, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('exit', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (code !== 0) return reject(new Error(`coffer ${args.join(' ')} exited ${code}: ${stderr.slice(-500)}`));
      const [user, system, maxKiB] = fs.readFileSync(report, 'utf8').trim().split(/\s+/).slice(-3).map(Number);
      fs.rmSync(report, { force: true });
      resolve({ seconds, cpu: user + system, peakRss: maxKiB * 1024, stdout });
    });
  });
}

function smallTree(root) {
  fs.mkdirSync(root, { recursive: true });
  let bytes = 0;
  for (let i = 0; i < 20; i++) {
    const data = `file ${i}\n`.repeat(400);
    fs.writeFileSync(path.join(root, `file-${i}.txt`), data);
    bytes += data.length;
  }
  return { files: 20, bytes };
}

export async function main() {
  const opts = options({ rounds: 5, backend: 'sqlite+fs', kdf: 'moderate' });
  requireBuild();
  ensureDebian('/usr/bin/time', 'time');
  const started = Date.now();
  const work = tempDir('coffer-bench-p7-');
  const trees = {
    small: { root: path.join(work, 'small') },
    '45 MiB': { root: path.join(work, 'large') },
  };
  trees.small.info = smallTree(trees.small.root);
  trees['45 MiB'].info = generateTree(trees['45 MiB'].root);
  const prepared = await prepareBackend(opts.backend);
  const server = await startCoffer(prepared, { logFile: logFile('p7-recipient-coffer.log') });
  const samples = Object.fromEntries(Object.keys(trees).map((tree) => [tree, { passphrase: [], recipient: [] }]));
  try {
    const [key] = await server.keys(1, 'pro');
    const owner = { COFFER_URL: server.url, COFFER_API_KEY: key.apiKey, COFFER_PASSPHRASE: PASSPHRASE };
    await timed(['init', '--kdf', opts.kdf], owner);
    const recipient = JSON.parse((await timed(['recipient', '--json'], owner)).stdout).recipient;
    // The host: no passphrase in its environment at all.
    const host = { COFFER_URL: server.url, COFFER_API_KEY: key.apiKey, COFFER_RECIPIENT: recipient };
    const envOf = { passphrase: owner, recipient: host };
    for (let r = 0; r < opts.rounds; r++) {
      for (const [tree, { root }] of Object.entries(trees)) {
        const modes = r % 2 === 0 ? ['passphrase', 'recipient'] : ['recipient', 'passphrase'];
        for (const mode of modes) {
          const run = await timed(['backup', root, '--json'], envOf[mode]);
          const detail = JSON.parse(run.stdout);
          const sealed = typeof detail.recipientFingerprint === 'string';
          if (detail.status !== 'READY' || sealed !== (mode === 'recipient')) {
            throw new Error(`unexpected backup answer: ${run.stdout.slice(0, 300)}`);
          }
          samples[tree][mode].push({ seconds: run.seconds, cpu: run.cpu, peakRss: run.peakRss });
          await server.advance(31 * 60 * 1000);
        }
      }
      log(
        `P7 round ${r + 1}: ` +
          Object.keys(trees)
            .map(
              (tree) =>
                `${tree}: passphrase ${samples[tree].passphrase.at(-1).seconds.toFixed(2)} s, recipient ${samples[tree].recipient.at(-1).seconds.toFixed(2)} s`,
            )
            .join('; '),
      );
    }
  } finally {
    await server.stop();
    await prepared.cleanup();
    fs.rmSync(work, { recursive: true, force: true });
  }

  const m = (tree, mode, pick) => median(samples[tree][mode].map(pick));
  const rows = Object.entries(trees).map(([tree, { info }]) => {
    const pass = m(tree, 'passphrase', (x) => x.seconds);
    const rec = m(tree, 'recipient', (x) => x.seconds);
    const passCpu = m(tree, 'passphrase', (x) => x.cpu);
    const recCpu = m(tree, 'recipient', (x) => x.cpu);
    return [
      `${tree} (${info.files} files, ${round(info.bytes / MiB, 2)} MiB)`,
      round(pass, 2),
      round(rec, 2),
      fmtRatio(ratio(pass, rec)),
      round(passCpu, 2),
      round(recCpu, 2),
      fmtRatio(ratio(passCpu, recCpu)),
      round(m(tree, 'passphrase', (x) => x.peakRss) / MiB, 0),
      round(m(tree, 'recipient', (x) => x.peakRss) / MiB, 0),
    ];
  });
  const smallSpeed = ratio(
    m('small', 'passphrase', (x) => x.cpu),
    m('small', 'recipient', (x) => x.cpu),
  );
  return writeResult({
    id: 'p7',
    name: 'p7-recipient',
    title: 'P7 — backup with a recipient vs with the passphrase',
    target: 'a backup sealed to a recipient skips Argon2id: faster than one with the passphrase, on the same tree',
    command: commandLine('p7-recipient.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `\`coffer backup\`: wall time and CLI CPU time (user + system) in seconds, CLI peak RSS in MiB, median of ${opts.rounds} rounds (vault Argon2id ${opts.kdf}; ratios = passphrase / recipient, > 1 means the recipient is faster)`,
        columns: [
          'tree',
          'wall, passphrase',
          'wall, recipient',
          'wall ratio',
          'CPU, passphrase',
          'CPU, recipient',
          'CPU ratio',
          'peak RSS, passphrase',
          'peak RSS, recipient',
        ],
        rows,
      },
    ],
    verdicts: [
      {
        what: 'P7: small-tree backup CPU time, recipient vs passphrase',
        value: fmtRatio(smallSpeed),
        target: 'faster (> 1.00×)',
        met: smallSpeed > 1,
      },
    ],
    notes: [
      `With the passphrase: Argon2id ${opts.kdf} once per command to unwrap the master key, then the DEK wrapped with XChaCha20-Poly1305. With a recipient: no key derivation; the DEK sealed with X-Wing (pure JavaScript, @noble/post-quantum) and XChaCha20-Poly1305. Everything else (tar, gzip, secretstream, upload to a local server, ${opts.backend}) is the same.`,
    ],
    chart: {
      title: 'P7 — coffer backup, passphrase vs recipient, wall time (lower is better)',
      subtitle: `median of ${opts.rounds} rounds; vault Argon2id ${opts.kdf}`,
      unit: 'seconds',
      series: ['passphrase', 'recipient'],
      groups: Object.keys(trees).map((tree) => ({
        label: tree,
        note: fmtRatio(
          ratio(
            m(tree, 'passphrase', (x) => x.seconds),
            m(tree, 'recipient', (x) => x.seconds),
          ),
        ),
        values: [m(tree, 'passphrase', (x) => x.seconds), m(tree, 'recipient', (x) => x.seconds)],
      })),
    },
    raw: { samples, trees: Object.fromEntries(Object.entries(trees).map(([tree, { info }]) => [tree, info])) },
  });
}

runWhenMain(import.meta.url, main);
