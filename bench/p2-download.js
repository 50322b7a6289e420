/* global process, console */
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
import { MiB, logFile, commandLine, list, log, median, options, requireBuild, round, tempDir } from './lib/common.js';
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
  const hasPg = await pgAvailable();
  const rows = [];
  const raw = {};
  const notes = [`nginx ${nginx.version}, 1 worker process, sendfile on (Debian's default)`];
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
        const get = async (who) => {
          const result =
            who === 'coffer'
              ? await curl(`${coffer.url}/api/backups/${id}/content`, { headers: { authorization: `Bearer ${account.apiKey}` } })
              : await curl(`${nginx.url}/blob.bin`);
          if (result.status !== 200 || result.bytes !== size) throw new Error(`${who} download: ${result.status}, ${result.bytes} bytes`);
          return result.seconds;
        };
        await get('coffer'); // warm-up
        await get('nginx');
        const samples = { coffer: [], nginx: [] };
        for (let r = 0; r < opts.rounds; r++) {
          const times = { coffer: [], nginx: [] };
          for (let i = 0; i < opts['per-round']; i++) {
            for (const who of (r + i) % 2 === 0 ? ['coffer', 'nginx'] : ['nginx', 'coffer']) times[who].push(await get(who));
          }
          for (const who of ['coffer', 'nginx']) {
            const mean = times[who].reduce((a, b) => a + b, 0) / times[who].length;
            samples[who].push(size / MiB / mean);
          }
        }
        raw[backend] = samples;
        const row = { backend, coffer: median(samples.coffer), nginx: median(samples.nginx) };
        log(`P2 ${backend}: Coffer ${row.coffer.toFixed(0)} MiB/s, nginx ${row.nginx.toFixed(0)} MiB/s → ${fmtRatio(ratio(row.coffer, row.nginx))}`);
        rows.push(row);
      } finally {
        await coffer.stop();
        await prepared.cleanup();
      }
    }
  } finally {
    await nginx.stop();
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
        columns: ['backend', 'Coffer', 'nginx (baseline)', 'ratio'],
        rows: rows.map((row) => [row.backend, round(row.coffer, 0), round(row.nginx, 0), fmtRatio(ratio(row.coffer, row.nginx))]),
      },
    ],
    verdicts: rows.map((row) => ({
      what: `P2 ${row.backend}: download ≥ ${TARGET}× nginx`,
      value: fmtRatio(ratio(row.coffer, row.nginx)),
      target: `≥ ${TARGET}×`,
      met: ratio(row.coffer, row.nginx) >= TARGET,
    })),
    notes,
    chart: {
      title: 'P2 — 50 MiB download throughput (higher is better)',
      subtitle: `median of ${opts.rounds} rounds; ratio = Coffer / nginx`,
      unit: 'MiB/s',
      series: ['Coffer', 'nginx (baseline)'],
      groups: rows.map((row) => ({ label: row.backend, note: fmtRatio(ratio(row.coffer, row.nginx)), values: [row.coffer, row.nginx] })),
    },
    raw,
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
