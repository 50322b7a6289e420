/**
 * P1 — 50 MiB direct upload over loopback: Coffer's POST /api/backups/upload vs a bare node:http server piping
 * the same body to a file (target ≥ 0.8× on the fs store). Same client (curl) for both, rounds interleaved
 * (A B, B A, …), median of the rounds. Each backend (SQLite/PostgreSQL metadata × fs/S3 blobs) gets its own
 * baseline rounds at the same time. A third column, the baseline with fsync, shows what durability costs.
 *
 * P1-S3 (issue 38), with Ceph's RADOS Gateway as the store (where Ceph is installed): the same bytes through Coffer's
 * negotiated presigned upload as a client does it (create the slot, s3-presigned start / part(s), PUT(s) to the
 * presigned URL(s), complete — timed together) vs a PutObject straight to the gateway with the AWS SDK (target ≥ 0.8×).
 *
 *   node bench/p1-upload.js [--rounds 5] [--backends sqlite+fs,postgres+fs,sqlite+s3,postgres+s3] [--size-mib 50]
 *                           [--s3-backends sqlite+ceph,postgres+ceph] [--part-mib 16] [--part-concurrency 4]
 *   (--s3-backends '' skips P1-S3; --part-mib 0 skips its multipart row)
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { DeleteObjectCommand } from '@aws-sdk/client-s3';
import {
  BENCH_DIR,
  MiB,
  cpuSecondsOf,
  cpuTimeOf,
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
import { accounts, cephInstalled, createSlot, pgAvailable, prepareBackend, startCoffer } from './lib/coffer.js';
import { curl } from './lib/curl.js';
import { fileSource, offersPresignedUpload, presignedUpload, sdkPut, storeClient } from './lib/presigned.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';

export const TARGET = 0.8;

export async function main() {
  const opts = options({
    rounds: 5,
    backends: 'sqlite+fs,postgres+fs,sqlite+s3,postgres+s3',
    'size-mib': 50,
    's3-backends': 'sqlite+ceph,postgres+ceph',
    'part-mib': 16,
    'part-concurrency': 4,
  });
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
  let s3 = { rows: [], verdicts: [], notes: [], raw: {} };
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
    s3 = await s3Rows(opts, { size, bodyFile, hasPg });
  } finally {
    await baseline.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }

  Object.assign(raw, s3.raw);
  notes.push(...s3.notes);
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
  verdicts.push(...s3.verdicts);
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
      ...(s3.rows.length ? [s3Table(opts, s3.rows)] : []),
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

// ── P1-S3 (issue 38): Coffer's negotiated presigned upload vs an AWS SDK PUT straight to the gateway, on Ceph ──────

/**
 * Per backend in --s3-backends (a fresh Ceph cluster each, Coffer with COFFER_S3_PRESIGNED=on and the gateway as its
 * public endpoint): rounds interleaved (A B C, C B A, …) of the AWS SDK PutObject (baseline), Coffer single (start
 * with the size, one PUT) and, with --part-mib, Coffer multipart (--part-mib parts, --part-concurrency in flight).
 * Server CPU per upload: Coffer's CPU time (/proc schedstat) around the timed upload (Ceph's daemons not counted).
 */
async function s3Rows(opts, { size, bodyFile, hasPg }) {
  const out = { rows: [], verdicts: [], notes: [], raw: {} };
  const backends = list(opts['s3-backends']);
  if (backends.length === 0) return out;
  if (!cephInstalled()) {
    out.notes.push('P1-S3: skipped, Ceph is not installed (apt-get install ceph-mon ceph-osd radosgw ceph-common)');
    return out;
  }
  const partBytes = Math.round(opts['part-mib'] * MiB);
  const source = fileSource(bodyFile);
  for (const backend of backends) {
    if (!backend.endsWith('+ceph')) throw new Error(`--s3-backends takes sqlite+ceph / postgres+ceph, got ${backend}`);
    if (backend.startsWith('postgres') && !hasPg) {
      out.notes.push(`P1-S3 ${backend}: skipped, PostgreSQL is not reachable`);
      continue;
    }
    const prepared = await prepareBackend(backend);
    let coffer = null;
    try {
      const env = { COFFER_S3_PRESIGNED: 'on', COFFER_S3_PUBLIC_ENDPOINT: prepared.env.COFFER_S3_ENDPOINT };
      coffer = await startCoffer(prepared, { env, logFile: logFile(`p1-upload-coffer-${backend}.log`) });
      const [account] = await accounts(coffer, 1);
      const probe = await account.call('POST', '/api/backups', { expect: 201 });
      await account.call('DELETE', `/api/backups/${probe.body.backupId}`, { expect: 200 });
      if (!offersPresignedUpload(probe.headers)) {
        out.notes.push(
          `P1-S3 ${backend}: skipped, the server does not announce s3-presigned-upload on create (the presigned upload is not built in)`,
        );
        continue;
      }
      const store = storeClient(prepared.env);
      const cpu = { sdk: [], single: [], multipart: [] };
      const apiMs = { single: [], multipart: [] };
      const once = async (who) => {
        if (who === 'sdk') {
          const key = `bench/p1-baseline-${crypto.randomUUID()}.bin`;
          const t0 = performance.now();
          await sdkPut(store, key, bodyFile, size);
          const seconds = (performance.now() - t0) / 1000;
          await store.client.send(new DeleteObjectCommand({ Bucket: store.bucket, Key: key }));
          return seconds;
        }
        const cpu0 = cpuTimeOf(coffer.pid);
        const t0 = performance.now();
        const id = await createSlot(account.call);
        const timings = {};
        const done = await presignedUpload(account.call, id, size, source, {
          partBytes: who === 'multipart' ? partBytes : 0,
          concurrency: opts['part-concurrency'],
          timings,
        });
        const seconds = (performance.now() - t0) / 1000;
        // Coffer's own part of the time: create, start, complete (multipart: the part signatures overlap the PUTs).
        apiMs[who].push(seconds * 1000 - timings.transferMs);
        cpu[who].push(cpuTimeOf(coffer.pid) - cpu0);
        if (done.size !== size) throw new Error(`P1-S3 ${backend}: complete answered size ${done.size}, sent ${size}`);
        await account.call('DELETE', `/api/backups/${id}`, { expect: 200 });
        return seconds;
      };
      const kinds = ['sdk', 'single', ...(partBytes > 0 && partBytes < size ? ['multipart'] : [])];
      for (const who of kinds) await once(who); // warm-up: JIT, connections, the gateway's first writes
      for (const who of kinds) cpu[who].length = 0;
      for (const who of Object.keys(apiMs)) apiMs[who].length = 0;
      const samples = Object.fromEntries(kinds.map((who) => [who, []]));
      for (let r = 0; r < opts.rounds; r++) {
        for (const who of r % 2 === 0 ? kinds : [...kinds].reverse()) samples[who].push(size / MiB / (await once(who)));
      }
      const mibps = Object.fromEntries(kinds.map((who) => [who, median(samples[who])]));
      const cpuMs = Object.fromEntries(kinds.map((who) => [who, (cpu[who].reduce((a, b) => a + b, 0) / cpu[who].length) * 1000]));
      const api = Object.fromEntries(Object.entries(apiMs).map(([who, values]) => [who, median(values)]));
      out.raw[`s3:${backend}`] = { samples, cpuSeconds: cpu, apiMs };
      log(
        `P1-S3 ${backend}: SDK PUT ${mibps.sdk.toFixed(0)} MiB/s, Coffer single ${mibps.single.toFixed(0)} MiB/s (${fmtRatio(ratio(mibps.single, mibps.sdk))}, ` +
          `server CPU ${cpuMs.single.toFixed(1)} ms, Coffer's requests ${api.single.toFixed(0)} ms)${mibps.multipart ? `, multipart ${mibps.multipart.toFixed(0)} MiB/s (${fmtRatio(ratio(mibps.multipart, mibps.sdk))}, server CPU ${cpuMs.multipart.toFixed(1)} ms)` : ''}`,
      );
      out.rows.push({ backend, mibps, cpuMs, api });
      out.verdicts.push({
        what: `P1-S3 ${backend}: a ${opts['size-mib']} MB upload through Coffer's negotiated path ≥ ${TARGET}× an AWS SDK PUT straight to the gateway`,
        value: `${fmtRatio(ratio(mibps.single, mibps.sdk))} (${round(mibps.single, 0)} vs ${round(mibps.sdk, 0)} MiB/s; Coffer's requests ${round(api.single, 0)} ms and ${round(cpuMs.single, 1)} ms of its CPU per upload)`,
        target: `≥ ${TARGET}×`,
        met: ratio(mibps.single, mibps.sdk) >= TARGET,
      });
    } finally {
      await coffer?.stop();
      await prepared.cleanup();
    }
  }
  out.notes.push(
    "P1-S3: Ceph's RADOS Gateway (one host, memstore, test/helpers/ceph.ts) on loopback as the store, Coffer with COFFER_S3_PRESIGNED=on. " +
      "Coffer's time runs from POST /api/backups to complete's answer: create, s3-presigned.start (with the size: single mode), the PUT of the file to the presigned URL (node:http, exactly the signed headers), s3-presigned.complete (the server HEADs the object and records the upload); " +
      `multipart: start without a size, then per ${opts['part-mib']} MiB part a s3-presigned.part and its PUT, ${opts['part-concurrency']} parts in flight, then complete (the server completes the multipart upload, then HEADs). ` +
      'Baseline: PutObjectCommand of a read stream of the same file with its ContentLength, the AWS SDK configured as Coffer configures its own (path style, checksums when required), no Coffer involved. ' +
      "Server CPU: Coffer's CPU time over each upload (/proc schedstat of all its threads, to the nanosecond), the mean over the rounds; Ceph's daemons are not counted.",
  );
  return out;
}

function s3Table(opts, rows) {
  const multipart = rows.some((row) => row.mibps.multipart);
  return {
    title: `P1-S3: ${opts['size-mib']} MiB upload to Ceph's RADOS Gateway, median of ${opts.rounds} rounds (MiB/s)`,
    columns: [
      'backend',
      'AWS SDK PutObject straight to the gateway (baseline)',
      'Coffer negotiated, single PUT',
      'ratio',
      ...(multipart
        ? [`Coffer negotiated, multipart (${opts['part-mib']} MiB parts, ${opts['part-concurrency']} in flight)`, 'ratio']
        : []),
      `Coffer server CPU ms per upload: single${multipart ? ' / multipart' : ''}`,
      `time in Coffer's requests ms (create, start, complete): single${multipart ? ' / multipart' : ''}`,
    ],
    rows: rows.map((row) => [
      row.backend,
      round(row.mibps.sdk, 0),
      round(row.mibps.single, 0),
      fmtRatio(ratio(row.mibps.single, row.mibps.sdk)),
      ...(multipart ? [round(row.mibps.multipart, 0), fmtRatio(ratio(row.mibps.multipart, row.mibps.sdk))] : []),
      `${round(row.cpuMs.single, 1)}${multipart ? ` / ${round(row.cpuMs.multipart, 1)}` : ''}`,
      `${round(row.api.single, 0)}${multipart ? ` / ${round(row.api.multipart, 0)}` : ''}`,
    ]),
  };
}

runWhenMain(import.meta.url, main);
