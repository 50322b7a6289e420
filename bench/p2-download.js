/**
 * P2 — 50 MiB download: Coffer's GET /api/backups/{id}/content vs nginx serving the same file (target ≥ 0.8×).
 * On the fs store nginx serves the very blob file Coffer stores (a hard link to it); on S3 a copy of the same
 * bytes. Same client (curl) for both; each round downloads `--per-round` times from each side (interleaved)
 * and keeps the round's mean; the table shows the median of the rounds.
 *
 *   node bench/p2-download.js [--rounds 5] [--per-round 3] [--backends sqlite+fs,postgres+fs,sqlite+s3,postgres+s3]
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { BENCH_DIR, MiB, cpuSecondsOf, logFile, commandLine, list, log, median, options, requireBuild, round, startChild, tempDir, runWhenMain } from './lib/common.js';
import { accounts, createSlot, finalize, pgAvailable, prepareBackend, startCoffer } from './lib/coffer.js';
import { curl } from './lib/curl.js';
import { startNginx } from './lib/nginx.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';

export const TARGET = 0.8;

function findFiles(dir) {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name));
}

export async function main() {
  const opts = options({ rounds: 5, 'per-round': 3, backends: 'sqlite+fs,postgres+fs,sqlite+s3,postgres+s3', 'size-mib': 50 });
  requireBuild();
  const started = Date.now();
  const size = opts['size-mib'] * MiB;
  const work = tempDir('coffer-bench-p2-');
  const bodyFile = path.join(work, 'body.bin');
  fs.writeFileSync(bodyFile, crypto.randomBytes(size));
  const root = path.join(work, 'www');
  fs.mkdirSync(root);
  const nginx = await startNginx(root);
  // Reference: what bare Node does with the same file (no sendfile), 1 MiB reads like Coffer's fs store.
  const bare = await startChild(path.join(BENCH_DIR, 'lib', 'baseline-download.js'), [path.join(root, 'blob.bin')]);
  const hasPg = await pgAvailable();
  const rows = [];
  const raw = {};
  const notes = [
    `nginx ${nginx.version}, 1 worker process, sendfile on (Debian's default).`,
    'Server CPU per download is read from /proc (user + system time of the serving process, nginx: its worker) around each request; unlike throughput it hardly depends on what else the machine is doing.',
    'The reference column is a bare node:http server streaming the same file with 1 MiB reads: Node has no sendfile(2) path for HTTP responses, so it copies every byte file → user space → socket, which nginx does not.',
  ];
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
        const id = await createSlot(account.call);
        const uploaded = await curl(`${coffer.url}/api/backups/upload?backupId=${id}`, {
          method: 'POST',
          upload: bodyFile,
          headers: { authorization: `Bearer ${account.apiKey}`, 'content-type': 'application/octet-stream' },
        });
        if (uploaded.status !== 201) throw new Error(`upload answered ${uploaded.status}`);
        await finalize(account.call, id, size);
        const served = path.join(root, 'blob.bin');
        fs.rmSync(served, { force: true });
        if (prepared.blobs === 'fs') {
          const [blob] = findFiles(path.join(prepared.dataDir, 'blobs'));
          fs.linkSync(blob, served);
        } else {
          fs.copyFileSync(bodyFile, served);
        }
        const pids = { coffer: coffer.pid, nginx: nginx.workerPid ?? nginx.pid, node: bare.pid };
        const cpu = { coffer: [], nginx: [], node: [] };
        const get = async (who) => {
          const cpu0 = cpuSecondsOf(pids[who]);
          const result =
            who === 'coffer'
              ? await curl(`${coffer.url}/api/backups/${id}/content`, { headers: { authorization: `Bearer ${account.apiKey}` } })
              : who === 'nginx'
                ? await curl(`${nginx.url}/blob.bin`)
                : await curl(`${bare.ready.url}/`);
          if (result.status !== 200 || result.bytes !== size) throw new Error(`${who} download: ${result.status}, ${result.bytes} bytes`);
          cpu[who].push(cpuSecondsOf(pids[who]) - cpu0);
          return result.seconds;
        };
        await get('coffer'); // warm-up
        await get('nginx');
        await get('node');
        for (const who of Object.keys(cpu)) cpu[who].length = 0;
        const samples = { coffer: [], nginx: [], node: [] };
        for (let r = 0; r < opts.rounds; r++) {
          const times = { coffer: [], nginx: [], node: [] };
          for (let i = 0; i < opts['per-round']; i++) {
            for (const who of (r + i) % 2 === 0 ? ['coffer', 'nginx', 'node'] : ['node', 'nginx', 'coffer']) times[who].push(await get(who));
          }
          for (const who of ['coffer', 'nginx', 'node']) {
            const mean = times[who].reduce((a, b) => a + b, 0) / times[who].length;
            samples[who].push(size / MiB / mean);
          }
        }
        raw[backend] = { ...samples, cpuSeconds: cpu };
        const mean = (values) => values.reduce((a, b) => a + b, 0) / values.length;
        const row = {
          backend,
          coffer: median(samples.coffer),
          nginx: median(samples.nginx),
          node: median(samples.node),
          cpuMs: { coffer: mean(cpu.coffer) * 1000, nginx: mean(cpu.nginx) * 1000, node: mean(cpu.node) * 1000 },
        };
        log(`P2 ${backend}: Coffer ${row.coffer.toFixed(0)} MiB/s, nginx ${row.nginx.toFixed(0)} MiB/s → ${fmtRatio(ratio(row.coffer, row.nginx))}`);
        rows.push(row);
      } finally {
        await coffer.stop();
        await prepared.cleanup();
      }
    }
  } finally {
    await nginx.stop();
    await bare.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }

  return writeResult({
    id: 'p2',
    name: 'p2-download',
    title: 'P2 — 50 MiB download',
    target: `≥ ${TARGET}× nginx serving the same file`,
    command: commandLine('p2-download.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `Download throughput, ${opts['size-mib']} MiB, curl over loopback, median of ${opts.rounds} rounds × ${opts['per-round']} downloads (MiB/s)`,
        columns: ['backend', 'Coffer', 'nginx (baseline)', 'ratio', 'bare node:http file stream (reference)', 'Coffer / bare node', 'bare node / nginx', 'server CPU ms per download: Coffer / nginx / bare node'],
        rows: rows.map((row) => [
          row.backend,
          round(row.coffer, 0),
          round(row.nginx, 0),
          fmtRatio(ratio(row.coffer, row.nginx)),
          round(row.node, 0),
          fmtRatio(ratio(row.coffer, row.node)),
          fmtRatio(ratio(row.node, row.nginx)),
          `${round(row.cpuMs.coffer, 0)} / ${round(row.cpuMs.nginx, 0)} / ${round(row.cpuMs.node, 0)}`,
        ]),
      },
    ],
    verdicts: rows.flatMap((row) => [
      {
        what: `P2 ${row.backend}: download ≥ ${TARGET}× nginx`,
        value: fmtRatio(ratio(row.coffer, row.nginx)),
        target: `≥ ${TARGET}×`,
        met: ratio(row.coffer, row.nginx) >= TARGET,
      },
      ...(row.backend.endsWith('+fs')
        ? [
            {
              what: `P2 ${row.backend} (proposed): download ≥ ${TARGET}× a bare Node file stream (Node has no sendfile)`,
              value: fmtRatio(ratio(row.coffer, row.node)),
              target: `≥ ${TARGET}×`,
              met: ratio(row.coffer, row.node) >= TARGET,
            },
          ]
        : []),
    ]),
    notes,
    chart: {
      title: 'P2 — 50 MiB download throughput (higher is better)',
      subtitle: `median of ${opts.rounds} rounds; ratio = Coffer / nginx`,
      unit: 'MiB/s',
      series: ['Coffer', 'nginx (baseline)', 'bare node:http file stream (reference)'],
      groups: rows.map((row) => ({ label: row.backend, note: fmtRatio(ratio(row.coffer, row.nginx)), values: [row.coffer, row.nginx, row.node] })),
    },
    raw,
  });
}

runWhenMain(import.meta.url, main);
