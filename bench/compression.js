/* global process */
/**
 * zstd vs gzip for `coffer backup` + `coffer restore` of the P6 tree (bench/lib/tree.js: 3,000 small text files
 * and three 11 MiB files, about 45 MiB) against a local Coffer server (on this Node). gzip is the baseline: the
 * zstd figures are also given as ratios to it. Each round makes one backup with each compression (fresh account,
 * `coffer init --kdf min`, not timed, so Argon2id is out of the figures) and restores it, checked against the
 * source tree outside the timing. Wall time and the CLI's CPU time (user + system, GNU time; less sensitive to other
 * load) of each command.
 *
 * zstd backups need a Node whose node:zlib has zstd (22.15 or later). The CLI runs on the first of these that has
 * it: --node, this Node, $COFFER_BENCH_ZSTD_NODE, node24/node23/node22 on the PATH, the Nodes of nvm, fnm, volta,
 * n and asdf; gzip then runs on the same Node, so the two columns compare like with like. When no Node with zstd is
 * found, gzip is measured on --node (or this Node) and the zstd row says why it is missing: the script does not fail.
 * A restore of a zstd backup is also timed with this Node when it has no zstd (the pure-JavaScript decoder, fzstd).
 *
 *   node bench/compression.js [--node /path/to/node24/bin/node] [--rounds 3]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DIST, MiB, commandLine, ensureDebian, log, median, options, requireBuild, round, runWhenMain, tempDir } from './lib/common.js';
import { prepareBackend, startCoffer } from './lib/coffer.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';
import { candidateNodes, probe } from './lib/nodes.js';
import { generateTree, treeDigest } from './lib/tree.js';

const PASSPHRASE = 'compression benchmark passphrase';
const CLI = path.join(DIST, 'cli', 'main.js');

/** Runs `node CLI …args` under GNU time: {seconds (wall), cpu (user + system of the CLI), stdout}; rejects on failure. */
function timed(node, args, env) {
  return new Promise((resolve, reject) => {
    const report = path.join(os.tmpdir(), `coffer-compression-time-${process.pid}.txt`);
    const started = process.hrtime.bigint();
    const child = spawn('/usr/bin/time', ['-f', '%U %S', '-o', report, node, CLI, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('exit', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const times = fs.existsSync(report) ? fs.readFileSync(report, 'utf8').trim().split(/\s+/).slice(-2).map(Number) : [NaN, NaN];
      fs.rmSync(report, { force: true });
      if (code === 0) resolve({ seconds, cpu: times[0] + times[1], stdout });
      else reject(new Error(`coffer ${args.join(' ')} on ${node} exited ${code}: ${stderr.slice(-500)}`));
    });
  });
}

export async function main() {
  const opts = options({ rounds: 3, node: '', backend: 'sqlite+fs' });
  requireBuild();
  ensureDebian('/usr/bin/time', 'time');
  const started = Date.now();
  const candidates = candidateNodes(opts.node);
  const probed = candidates.map(probe).filter(Boolean);
  const zstdNode = probed.find((p) => p.zstd) ?? null;
  const cliNode = zstdNode ?? probe(opts.node || process.execPath);
  if (!cliNode) throw new Error(`--node ${opts.node} does not run`);
  const here = probe(process.execPath);
  const compressions = zstdNode ? ['gzip', 'zstd'] : ['gzip'];
  const notes = [
    `CLI on Node ${cliNode.version} (${cliNode.node}); server on Node ${process.version}; \`coffer init --kdf min\`; ${opts.backend}.`,
  ];
  if (!zstdNode) {
    notes.push(
      `zstd not measured: no Node with zstd in node:zlib (22.15 or later) was found (tried ${probed.map((p) => `${p.node} ${p.version}`).join(', ') || 'none'}); give one with --node or COFFER_BENCH_ZSTD_NODE.`,
    );
    log(notes.at(-1));
  }
  const work = tempDir('coffer-bench-compression-');
  const tree = path.join(work, 'tree');
  generateTree(tree);
  const source = treeDigest(tree);
  const prepared = await prepareBackend(opts.backend);
  const server = await startCoffer(prepared, {});
  const samples = { gzip: [], zstd: [] };
  try {
    for (let r = 0; r < Number(opts.rounds); r++) {
      for (const compression of r % 2 === 0 ? compressions : [...compressions].reverse()) {
        const [key] = await server.keys(1, 'pro');
        const env = { COFFER_URL: server.url, COFFER_API_KEY: key.apiKey, COFFER_PASSPHRASE: PASSPHRASE, COFFER_KDF: 'min' };
        await timed(cliNode.node, ['init'], env);
        const backup = await timed(cliNode.node, ['backup', tree, '--compression', compression, '--json'], env);
        const detail = JSON.parse(backup.stdout);
        const target = path.join(work, `restore-${compression}-${r}`);
        const restore = await timed(cliNode.node, ['restore', detail.id, target], env);
        if (treeDigest(target).digest !== source.digest) throw new Error(`${compression} restore differs from the source`);
        fs.rmSync(target, { recursive: true, force: true });
        let fallback = null;
        if (compression === 'zstd' && !here.zstd) {
          fallback = await timed(process.execPath, ['restore', detail.id, target], env);
          if (treeDigest(target).digest !== source.digest) throw new Error('zstd restore (fzstd) differs from the source');
          fs.rmSync(target, { recursive: true, force: true });
        }
        samples[compression].push({ backup, restore, fallback, bytes: detail.ciphertextSizeBytes });
        log(
          `round ${r + 1} ${compression}: backup ${backup.seconds.toFixed(2)} s (CPU ${backup.cpu.toFixed(2)} s), restore ${restore.seconds.toFixed(2)} s` +
            (fallback ? `, restore on ${process.version} (fzstd) ${fallback.seconds.toFixed(2)} s` : '') +
            `, ${detail.ciphertextSizeBytes} bytes encrypted`,
        );
      }
    }
  } finally {
    await server.stop();
    await prepared.cleanup();
    fs.rmSync(work, { recursive: true, force: true });
  }

  const m = (c, pick) => median(samples[c].map(pick));
  const row = (c) => {
    if (samples[c].length === 0) return [c, '—', '—', '—', '—', '—', '—', 'not measured (no Node with zstd)'];
    const vs = (pick) => (c === 'gzip' ? '1.00×' : fmtRatio(ratio(m('gzip', pick), m(c, pick))));
    const fallback = samples[c].some((s) => s.fallback)
      ? `${round(
          m(c, (s) => s.fallback.seconds),
          2,
        )} s`
      : c === 'zstd'
        ? '(native)'
        : '(native zlib)';
    return [
      c,
      round(samples[c][0].bytes / MiB, 1),
      `${round(
        m(c, (s) => s.backup.seconds),
        2,
      )} / ${round(
        m(c, (s) => s.backup.cpu),
        2,
      )}`,
      `${vs((s) => s.backup.seconds)} / ${vs((s) => s.backup.cpu)}`,
      `${round(
        m(c, (s) => s.restore.seconds),
        2,
      )} / ${round(
        m(c, (s) => s.restore.cpu),
        2,
      )}`,
      `${vs((s) => s.restore.seconds)} / ${vs((s) => s.restore.cpu)}`,
      `${round(
        m(c, (s) => s.backup.seconds + s.restore.seconds),
        2,
      )}`,
      fallback,
    ];
  };
  const seconds = (c, pick) => (samples[c].length ? m(c, pick) : 0);
  return writeResult({
    id: 'compression',
    name: 'compression',
    title: 'Compression — zstd vs gzip, coffer backup + restore',
    target: 'none (informs the default compression; docs/client.md)',
    command: commandLine('compression.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `P6 tree (${source.files} files, 45 MiB), medians of ${opts.rounds} rounds; seconds as wall / CLI CPU; ratios = gzip / zstd (> 1: zstd is faster)`,
        columns: [
          'compression',
          'encrypted MiB',
          'backup s',
          'backup vs gzip',
          'restore s',
          'restore vs gzip',
          'backup + restore s (wall)',
          `restore on Node ${process.version} (fzstd) s`,
        ],
        rows: ['gzip', 'zstd'].map(row),
      },
    ],
    verdicts: [],
    notes,
    chart: {
      title: 'coffer backup + restore of the P6 tree, gzip vs zstd (lower is better)',
      subtitle: `CLI on Node ${cliNode.version}, median of ${opts.rounds} rounds`,
      unit: 'seconds',
      series: ['backup', 'restore'],
      groups: compressions.map((c) => ({ label: c, values: [seconds(c, (s) => s.backup.seconds), seconds(c, (s) => s.restore.seconds)] })),
    },
    raw: { samples, cliNode, probed },
  });
}

runWhenMain(import.meta.url, main);
