/* global Buffer */
/**
 * P5 — memory under 16 concurrent 50 MiB direct uploads: growth of the server's RSS (sampled from /proc every
 * 20 ms) above its idle RSS, Coffer vs the bare node:http pipe-to-file server (target: growth ≤ 64 MiB).
 * Every round uses fresh server processes (so "idle" means the same thing each time), warmed by one small
 * upload; the 16 uploads come from this process (node:http, one shared 50 MiB buffer, one socket each).
 *
 *   node bench/p5-memory.js [--rounds 3] [--uploads 16] [--size-mib 50] [--backends sqlite+fs,sqlite+s3]
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import {
  BENCH_DIR,
  MiB,
  commandLine,
  list,
  log,
  logFile,
  median,
  options,
  requireBuild,
  round,
  rssOf,
  sampleRss,
  sleep,
  startChild,
  tempDir,
  runWhenMain,
} from './lib/common.js';
import { accounts, createSlot, prepareBackend, startCoffer } from './lib/coffer.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';

export const TARGET_GROWTH_MIB = 64;

function post(url, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const request = http.request(url, {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/octet-stream', 'content-length': body.length, ...headers },
    });
    request.on('response', (response) => {
      response.resume();
      response.on('end', () => (response.statusCode === 201 ? resolve() : reject(new Error(`${url}: ${response.statusCode}`))));
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** Idle RSS, then `jobs` started together; returns the peak growth above idle and the wall time. */
async function burst(pid, jobs) {
  await sleep(500);
  const idle = rssOf(pid);
  const sampler = sampleRss(pid, 20);
  const started = Date.now();
  await Promise.all(jobs.map((job) => job()));
  const seconds = (Date.now() - started) / 1000;
  await sleep(100);
  const { peak } = sampler.stop();
  return { idle, peak, growth: peak - idle, seconds };
}

export async function main() {
  const opts = options({ rounds: 3, uploads: 16, 'size-mib': 50, backends: 'sqlite+fs,sqlite+s3' });
  requireBuild();
  const started = Date.now();
  const size = opts['size-mib'] * MiB;
  const body = crypto.randomBytes(size);
  const work = tempDir('coffer-bench-p5-');
  const samples = { baseline: [] };
  try {
    for (let r = 0; r < opts.rounds; r++) {
      for (const backend of list(opts.backends)) {
        const prepared = await prepareBackend(backend);
        const coffer = await startCoffer(prepared, { logFile: logFile(`p5-memory-coffer-${backend}.log`) });
        try {
          const accs = await accounts(coffer, opts.uploads + 1);
          const slot = async (account) => `${coffer.url}/api/backups/upload?backupId=${await createSlot(account.call)}`;
          const auth = (account) => ({ authorization: `Bearer ${account.apiKey}` });
          await post(await slot(accs[0]), Buffer.alloc(64 * 1024), auth(accs[0])); // warm-up
          const urls = await Promise.all(accs.slice(1).map(slot));
          const result = await burst(
            coffer.pid,
            urls.map((url, i) => () => post(url, body, auth(accs[i + 1]))),
          );
          log(
            `P5 ${backend} round ${r + 1}: idle ${(result.idle / MiB).toFixed(0)} MiB, peak ${(result.peak / MiB).toFixed(0)} MiB, growth ${(result.growth / MiB).toFixed(0)} MiB, ${result.seconds.toFixed(1)} s`,
          );
          (samples[backend] ??= []).push(result);
        } finally {
          await coffer.stop();
          await prepared.cleanup();
        }
      }
      const dir = path.join(work, `baseline-${r}`);
      fs.mkdirSync(dir);
      const baseline = await startChild(path.join(BENCH_DIR, 'lib', 'baseline-upload.js'), [dir]);
      try {
        await post(`${baseline.ready.url}/upload`, Buffer.alloc(64 * 1024));
        const result = await burst(
          baseline.pid,
          Array.from({ length: opts.uploads }, () => () => post(`${baseline.ready.url}/upload`, body)),
        );
        log(
          `P5 baseline round ${r + 1}: idle ${(result.idle / MiB).toFixed(0)} MiB, peak ${(result.peak / MiB).toFixed(0)} MiB, growth ${(result.growth / MiB).toFixed(0)} MiB, ${result.seconds.toFixed(1)} s`,
        );
        samples.baseline.push(result);
      } finally {
        await baseline.stop();
      }
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }

  const summary = Object.fromEntries(
    Object.entries(samples).map(([name, runs]) => [
      name,
      {
        idle: median(runs.map((x) => x.idle)),
        peak: median(runs.map((x) => x.peak)),
        growth: median(runs.map((x) => x.growth)),
        seconds: median(runs.map((x) => x.seconds)),
      },
    ]),
  );
  const base = summary.baseline;
  const names = Object.keys(summary)
    .filter((n) => n !== 'baseline')
    .concat('baseline');
  const label = (name) => (name === 'baseline' ? 'node:http pipe (baseline)' : `Coffer ${name}`);
  const totalMiB = (opts.uploads * size) / MiB;
  return writeResult({
    id: 'p5',
    name: 'p5-memory',
    title: 'P5 — memory under concurrent uploads',
    target: `RSS growth ≤ ${TARGET_GROWTH_MIB} MiB under ${opts.uploads} concurrent ${opts['size-mib']} MiB uploads`,
    command: commandLine('p5-memory.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `${opts.uploads} concurrent ${opts['size-mib']} MiB uploads, server RSS sampled every 20 ms, fresh server each round, median of ${opts.rounds} rounds`,
        columns: ['server', 'RSS idle MiB', 'RSS peak MiB', 'growth MiB', 'growth vs baseline', 'aggregate MiB/s'],
        rows: names.map((name) => {
          const s = summary[name];
          return [
            label(name),
            round(s.idle / MiB, 0),
            round(s.peak / MiB, 0),
            round(s.growth / MiB, 1),
            name === 'baseline' ? '1.00×' : fmtRatio(ratio(s.growth, base.growth)),
            round(totalMiB / s.seconds, 0),
          ];
        }),
      },
    ],
    verdicts: names
      .filter((n) => n !== 'baseline')
      .map((name) => ({
        what: `P5 ${name}: RSS growth under ${opts.uploads} × ${opts['size-mib']} MiB uploads`,
        value: `${round(summary[name].growth / MiB, 1)} MiB`,
        target: `≤ ${TARGET_GROWTH_MIB} MiB`,
        met: summary[name].growth <= TARGET_GROWTH_MIB * MiB,
      })),
    chart: {
      title: `P5 — RSS growth under ${opts.uploads} concurrent ${opts['size-mib']} MiB uploads (lower is better)`,
      subtitle: `median of ${opts.rounds} rounds; dashed line = target`,
      unit: 'MiB above idle',
      series: ['RSS growth'],
      groups: names.map((name) => ({
        label: label(name),
        note: name === 'baseline' ? '' : fmtRatio(ratio(summary[name].growth, base.growth)),
        values: [summary[name].growth / MiB],
      })),
      target: { value: TARGET_GROWTH_MIB, label: `target ≤ ${TARGET_GROWTH_MIB} MiB` },
    },
    raw: samples,
  });
}

runWhenMain(import.meta.url, main);
