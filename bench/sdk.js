/* global process */
/**
 * SDK — the package an application embeds (issue 36), measured two ways:
 *
 * 1. The browser bundle: the SDK's browser entry (dist/client/browser.js, the file the served package holds) bundled
 *    as an application's bundler does it (esbuild: platform browser, ESM, minified, nothing external), gzipped at
 *    level 6, whole and without libsodium's WebAssembly (the libsodium-sumo package, whose JavaScript carries the
 *    module inline, left external), against the budget in bench/sdk-budget.json (its `why` says where it comes from).
 * 2. Backup + restore of P6's tree (bench/lib/tree.js: 3,000 small files and three 11 MiB ones) through the SDK on
 *    Node (bench/lib/sdk-app.js: `connect` → `writer(recipient).backup(dir)`, `unlock({ passphrase })` →
 *    `restoreTo`) side by side with the `coffer` CLI (`coffer backup` with the recipient, `coffer restore` with the
 *    passphrase), in the same run against the same server and account, interleaved, each a whole process timed from
 *    start to exit, each restore checked against the source (outside the timing).
 *
 * 3. In Chromium (bench/lib/sdk-browser.js): a restore of the same tree's backup through the SDK's browser entry on a
 *    page of its own, side by side with the console's restore ("Decrypt and save"), both unlocking with the
 *    passphrase; --browser=false leaves it out (it is left out where /usr/bin/chromium is missing).
 *
 *   node bench/sdk.js [--rounds 3] [--kdf moderate] [--backend sqlite+fs] [--browser=false]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import {
  BENCH_DIR,
  DIST,
  MiB,
  commandLine,
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
import { browserRestores } from './lib/sdk-browser.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';
import { generateTree, treeDigest } from './lib/tree.js';

const PASSPHRASE = 'correct horse battery staple, benchmark edition';
const CLI = path.join(DIST, 'cli', 'main.js');
const SDK_APP = path.join(BENCH_DIR, 'lib', 'sdk-app.js');
const BROWSER_ENTRY = path.join(DIST, 'client', 'browser.js');
/** The package whose JavaScript carries libsodium's WebAssembly module (base64, inline). */
const LIBSODIUM_WASM = 'libsodium-sumo';
const BUDGET = JSON.parse(fs.readFileSync(path.join(BENCH_DIR, 'sdk-budget.json'), 'utf8'));
/** The pro plan allows one backup per 30 minutes; the server's clock is moved past it before each backup. */
const CADENCE_MS = 31 * 60 * 1000;

/** The browser entry bundled as an application's bundler does it; `external` leaves packages out. */
async function bundledBytes(external) {
  const result = await build({
    entryPoints: [BROWSER_ENTRY],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    minify: true,
    write: false,
    logLevel: 'silent',
    external,
  });
  const code = result.outputFiles[0].contents;
  return { bytes: code.length, gzipBytes: gzipSync(code, { level: 6 }).length };
}

/** Runs a process to its exit: {seconds, stdout}; rejects on a non-zero exit. */
function timed(args, env) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('exit', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (code === 0) resolve({ seconds, stdout });
      else reject(new Error(`node ${args.join(' ')} exited ${code}: ${stderr.slice(-500)}`));
    });
  });
}

function check(source, restored, who) {
  const got = treeDigest(restored);
  if (got.digest !== source.digest || got.files !== source.files) {
    throw new Error(`${who}'s restore differs from the source tree (${got.files} files vs ${source.files})`);
  }
}

/** The commands of each client: the CLI's, and the application's on the SDK. */
const CLIENTS = {
  cli: { backup: (tree) => [CLI, 'backup', tree, '--json'], restore: (id, target) => [CLI, 'restore', id, target] },
  sdk: { backup: (tree) => [SDK_APP, 'backup', tree], restore: (id, target) => [SDK_APP, 'restore', id, target] },
};

/** `rounds` of backup + restore by each client, interleaved (the order flips each round). */
async function backupAndRestore({ rounds, backend, kdf, browser }, work) {
  const tree = path.join(work, 'tree');
  const generated = generateTree(tree);
  const source = treeDigest(tree);
  const prepared = await prepareBackend(backend);
  const server = await startCoffer(prepared, { logFile: logFile('sdk-coffer.log') });
  const samples = { cli: [], sdk: [] };
  let inBrowser = null;
  try {
    const [key] = await server.keys(1, 'pro');
    const owner = { COFFER_URL: server.url, COFFER_API_KEY: key.apiKey, COFFER_PASSPHRASE: PASSPHRASE };
    await timed([CLI, 'init', '--kdf', kdf], owner);
    const { recipient } = JSON.parse((await timed([CLI, 'recipient', '--json'], owner)).stdout);
    const host = { ...owner, COFFER_PASSPHRASE: '', COFFER_RECIPIENT: recipient };
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? ['cli', 'sdk'] : ['sdk', 'cli'];
      for (const who of order) {
        await server.advance(CADENCE_MS);
        const backup = await timed(CLIENTS[who].backup(tree), host);
        const target = path.join(work, `restore-${who}-${r}`);
        const restore = await timed(CLIENTS[who].restore(JSON.parse(backup.stdout).id, target), owner);
        check(source, target, who);
        samples[who].push({ backup: backup.seconds, restore: restore.seconds });
      }
      log(
        `SDK round ${r + 1}: ${order.map((w) => `${w} ${samples[w].at(-1).backup.toFixed(2)} + ${samples[w].at(-1).restore.toFixed(2)} s`).join('; ')}`,
      );
    }
    if (browser) {
      // The newest backup of the tree (the same bytes whichever client made it), restored in Chromium.
      const [newest] = JSON.parse((await timed([CLI, 'list', '--json'], owner)).stdout).backups;
      inBrowser = await browserRestores({
        url: server.url,
        apiKey: key.apiKey,
        passphrase: PASSPHRASE,
        backupId: newest.id,
        expectedBytes: generated.bytes,
        rounds,
        log,
      });
    }
  } finally {
    await server.stop();
    await prepared.cleanup();
  }
  return { samples, generated, inBrowser };
}

export async function main() {
  const opts = options({ rounds: 3, backend: 'sqlite+fs', kdf: 'moderate', browser: fs.existsSync('/usr/bin/chromium') });
  requireBuild();
  const started = Date.now();
  const whole = await bundledBytes([]);
  const withoutWasm = await bundledBytes([LIBSODIUM_WASM]);
  log(`SDK browser bundle: ${whole.gzipBytes} B gzip (${withoutWasm.gzipBytes} B without libsodium's WebAssembly)`);

  const work = tempDir('coffer-bench-sdk-');
  let measured;
  try {
    measured = await backupAndRestore(opts, work);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  const { samples, generated, inBrowser } = measured;
  const m = (who, pick) => median(samples[who].map(pick));
  const steps = { backup: (x) => x.backup, restore: (x) => x.restore, 'backup + restore': (x) => x.backup + x.restore };
  const total = (who) => m(who, steps['backup + restore']);
  const speed = ratio(total('cli'), total('sdk'));
  const browserSpeed = inBrowser ? ratio(median(inBrowser.console), median(inBrowser.sdk)) : NaN;
  const KiB = (bytes) => `${round(bytes / 1024, 1)} KiB`;
  return writeResult({
    id: 'sdk',
    name: 'sdk',
    title: 'SDK — browser bundle size, and backup + restore through the SDK vs the CLI',
    target: 'browser bundle within bench/sdk-budget.json; the SDK on Node as fast as the CLI (within 10 %)',
    command: commandLine('sdk.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: 'The browser entry bundled by esbuild (minified, ESM), gzip level 6',
        columns: ['bundle', 'minified', 'gzip', 'budget (gzip)'],
        rows: [
          ['whole (libsodium’s WebAssembly inline)', KiB(whole.bytes), KiB(whole.gzipBytes), KiB(BUDGET.gzipBytes)],
          [
            'without libsodium’s WebAssembly (libsodium-sumo external)',
            KiB(withoutWasm.bytes),
            KiB(withoutWasm.gzipBytes),
            KiB(BUDGET.gzipBytesWithoutWasm),
          ],
        ],
      },
      {
        title: `Wall time in seconds of each process, ${generated.files} files, ${round(generated.bytes / MiB, 1)} MiB, median of ${opts.rounds} rounds (speed ratio = CLI time / SDK time; > 1 means the SDK is faster)`,
        columns: ['step', 'coffer CLI', 'SDK on Node', 'speed ratio'],
        rows: Object.entries(steps).map(([step, pick]) => [
          step,
          round(m('cli', pick), 2),
          round(m('sdk', pick), 2),
          fmtRatio(ratio(m('cli', pick), m('sdk', pick))),
        ]),
      },
      ...(inBrowser
        ? [
            {
              title: `Restore of the same backup in Chromium, seconds in the page (unlock with Argon2id ${opts.kdf} included), median of ${opts.rounds} rounds (speed ratio = console time / SDK time)`,
              columns: ['restore', 'console', 'SDK browser entry', 'speed ratio'],
              rows: [
                [
                  'unlock + download + decrypt + verify',
                  round(median(inBrowser.console), 2),
                  round(median(inBrowser.sdk), 2),
                  fmtRatio(browserSpeed),
                ],
              ],
            },
          ]
        : []),
    ],
    verdicts: [
      {
        what: 'SDK browser bundle, gzip (whole)',
        value: KiB(whole.gzipBytes),
        target: `≤ ${KiB(BUDGET.gzipBytes)}`,
        met: whole.gzipBytes <= BUDGET.gzipBytes,
      },
      {
        what: 'SDK browser bundle, gzip, without libsodium’s WebAssembly',
        value: KiB(withoutWasm.gzipBytes),
        target: `≤ ${KiB(BUDGET.gzipBytesWithoutWasm)}`,
        met: withoutWasm.gzipBytes <= BUDGET.gzipBytesWithoutWasm,
      },
      {
        what: `SDK on Node: backup (recipient) + restore (Argon2id ${opts.kdf}) of P6's tree vs the CLI`,
        value: `${round(total('sdk'), 2)} s vs ${round(total('cli'), 2)} s (${fmtRatio(speed)})`,
        target: '≥ 0.90×',
        met: speed >= 0.9,
      },
      ...(inBrowser
        ? [
            {
              what: "SDK in Chromium: restore of P6's tree vs the console's restore",
              value: `${round(median(inBrowser.sdk), 2)} s vs ${round(median(inBrowser.console), 2)} s (${fmtRatio(browserSpeed)})`,
              target: '≥ 0.90×',
              met: browserSpeed >= 0.9,
            },
          ]
        : []),
    ],
    notes: [
      `Budget: ${BUDGET.why}`,
      'Both clients run the same pipelines (the SDK\u2019s directory backup and restoreTo are the CLI\u2019s runBackup and runRestore); the CLI runs from its esbuild bundle (dist/cli/main.js), the SDK application from the unbundled modules the package holds.',
    ],
    chart: {
      title: 'SDK — backup + restore of P6’s tree, wall time (lower is better)',
      subtitle: `median of ${opts.rounds} rounds; speed ratio CLI / SDK = ${fmtRatio(speed)}`,
      unit: 'seconds',
      series: ['backup', 'restore'],
      groups: [
        { label: 'SDK on Node', note: fmtRatio(speed), values: [m('sdk', steps.backup), m('sdk', steps.restore)] },
        { label: 'coffer CLI (baseline)', values: [m('cli', steps.backup), m('cli', steps.restore)] },
      ],
    },
    raw: { samples, inBrowser, tree: generated, bundle: { whole, withoutWasm }, budget: BUDGET },
  });
}

runWhenMain(import.meta.url, main);
