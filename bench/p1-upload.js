/**
 * P1 — 50 MiB direct upload over loopback: Coffer's POST /api/backups/upload vs a bare node:http server piping
 * the same body to a file (target ≥ 0.8× on the fs store). Same client (curl) for both, rounds interleaved
 * (A B, B A, …), median of the rounds. Each backend (SQLite/PostgreSQL metadata × fs/S3 blobs) gets its own
 * baseline rounds at the same time. A third column, the baseline with fsync, shows what durability costs.
 *
 *   node bench/p1-upload.js [--rounds 5] [--backends sqlite+fs,postgres+fs,sqlite+s3,postgres+s3] [--size-mib 50]
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  BENCH_DIR,
  MiB,
  cpuSecondsOf,
  logFile,
  commandLine,
  list,
  log,
  median,
  options,
  requireBuild,
  round,
  startChild,
  tempDir,
  runWhenMain,
} from './lib/common.js';
import { accounts, createSlot, pgAvailable, prepareBackend, startCoffer } from './lib/coffer.js';
import { curl } from './lib/curl.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';

export const TARGET = 0.8;

export async function main() {
  const opts = options({ rounds: 5, backends: 'sqlite+fs,postgres+fs,sqlite+s3,postgres+s3', 'size-mib': 50 });
  requireBuild();
  const started = Date.now();
  const size = opts['size-mib'] * MiB;
  const work = tempDir('coffer-bench-p1-');
  const bodyFile = path.join(work, 'body.bin');
  fs.writeFileSync(bodyFile, crypto.randomBytes(size));
  const baselineDir = path.join(work, 'baseline');
  fs.mkdirSync(baselineDir);
  const baseline = await startChild(path.join(BENCH_DIR, 'lib', 'baseline-upload.js'), [baselineDir]);
  const hasPg = await pgAvailable();
  const rows = [];
  const raw = {};
  const notes = [];
  try {
    for (const backend of list(opts.backends)) {
      if (backend.startsWith('postgres') && !hasPg) {
        notes.push(`${backend}: skipped, PostgreSQL is not reachable`);
        continue;
      }
      const prepared = await prepareBackend(backend);
      const coffer = await startCoffer(prepared, { logFile: logFile(`${path.basename(import.meta.url, '.js')}-coffer-${backend}.log`) });
      try {
        const [account] = await accounts(coffer, 1);
        const cpu = { coffer: [], baseline: [], baselineFsync: [] };
        const uploadOnce = async () => {
          const id = await createSlot(account.call);
          const cpu0 = cpuSecondsOf(coffer.pid);
          const result = await curl(`${coffer.url}/api/backups/upload?backupId=${id}`, {
            method: 'POST',
            upload: bodyFile,
            headers: { authorization: `Bearer ${account.apiKey}`, 'content-type': 'application/octet-stream' },
          });
          if (result.status !== 201) throw new Error(`Coffer upload answered ${result.status}`);
          cpu.coffer.push(cpuSecondsOf(coffer.pid) - cpu0);
          await account.call('DELETE', `/api/backups/${id}`, { expect: 200 });
          return result.seconds;
        };
        const baselineOnce = async (fsync) => {
          const cpu0 = cpuSecondsOf(baseline.pid);
          const result = await curl(`${baseline.ready.url}/upload${fsync ? '?fsync=1' : ''}`, { method: 'POST', upload: bodyFile });
          if (result.status !== 201) throw new Error(`baseline upload answered ${result.status}`);
          cpu[fsync ? 'baselineFsync' : 'baseline'].push(cpuSecondsOf(baseline.pid) - cpu0);
          return result.seconds;
        };
        await uploadOnce(); // warm-up: JIT, first file and table pages
        await baselineOnce(false);
        for (const who of Object.keys(cpu)) cpu[who].length = 0;
        const samples = { coffer: [], baseline: [], baselineFsync: [] };
        for (let r = 0; r < opts.rounds; r++) {
          const order = r % 2 === 0 ? ['coffer', 'baseline', 'baselineFsync'] : ['baselineFsync', 'baseline', 'coffer'];
          for (const who of order) {
            const seconds = who === 'coffer' ? await uploadOnce() : await baselineOnce(who === 'baselineFsync');
            samples[who].push(size / MiB / seconds);
          }
        }
        const coffer_ = median(samples.coffer);
        const base = median(samples.baseline);
        const baseFsync = median(samples.baselineFsync);
        raw[backend] = { ...samples, cpuSeconds: cpu };
        const mean = (values) => (values.reduce((a, b) => a + b, 0) / values.length) * 1000;
        log(
          `P1 ${backend}: Coffer ${coffer_.toFixed(0)} MiB/s, baseline ${base.toFixed(0)} MiB/s (fsync ${baseFsync.toFixed(0)}) → ${fmtRatio(ratio(coffer_, base))}`,
        );
        rows.push({ backend, coffer: coffer_, base, baseFsync, cpuMs: { coffer: mean(cpu.coffer), base: mean(cpu.baseline) } });
      } finally {
        await coffer.stop();
        await prepared.cleanup();
      }
    }
  } finally {
    await baseline.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }

  const verdicts = rows.flatMap((row) => [
    {
      what: `P1 ${row.backend}: upload ≥ ${TARGET}× baseline`,
      value: fmtRatio(ratio(row.coffer, row.base)),
      target: `≥ ${TARGET}×${row.backend.endsWith('+fs') ? '' : ' (target is defined for fs)'}`,
      met: row.backend.endsWith('+fs') ? ratio(row.coffer, row.base) >= TARGET : null,
    },
    ...(row.backend.endsWith('+fs')
      ? [
          {
            what: `P1 ${row.backend} (proposed): upload ≥ ${TARGET}× the baseline with fsync (same durability)`,
            value: fmtRatio(ratio(row.coffer, row.baseFsync)),
            target: `≥ ${TARGET}×`,
            met: ratio(row.coffer, row.baseFsync) >= TARGET,
          },
        ]
      : []),
  ]);
  return writeResult({
    id: 'p1',
    name: 'p1-upload',
    title: 'P1 — 50 MiB direct upload',
    target: `≥ ${TARGET}× a bare node:http server piping the same body to a file (fs store)`,
    command: commandLine('p1-upload.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `Upload throughput, ${opts['size-mib']} MiB body, curl over loopback, median of ${opts.rounds} rounds (MiB/s)`,
        columns: [
          'backend',
          'Coffer',
          'node:http pipe (baseline)',
          'ratio',
          'node:http pipe + fsync',
          'ratio vs fsync baseline',
          'server CPU ms per upload: Coffer / baseline',
        ],
        rows: rows.map((row) => [
          row.backend,
          round(row.coffer, 0),
          round(row.base, 0),
          fmtRatio(ratio(row.coffer, row.base)),
          round(row.baseFsync, 0),
          fmtRatio(ratio(row.coffer, row.baseFsync)),
          `${round(row.cpuMs.coffer, 0)} / ${round(row.cpuMs.base, 0)}`,
        ]),
      },
    ],
    verdicts,
    notes,
    chart: {
      title: 'P1 — 50 MiB upload throughput (higher is better)',
      subtitle: `median of ${opts.rounds} rounds; ratio = Coffer / bare node:http pipe`,
      unit: 'MiB/s',
      series: ['Coffer', 'node:http pipe (baseline)', 'node:http pipe + fsync'],
      groups: rows.map((row) => ({
        label: row.backend,
        note: fmtRatio(ratio(row.coffer, row.base)),
        values: [row.coffer, row.base, row.baseFsync],
      })),
    },
    raw,
  });
}

runWhenMain(import.meta.url, main);
