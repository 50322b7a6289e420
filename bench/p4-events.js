/* global fetch */
/**
 * P4 — 10,000 open event streams on one Coffer process: server RSS (≤ 512 MiB), database reads per second
 * from Coffer's own statement counter (must not grow with the number of streams), and the delay from a status
 * change to its arrival on every stream (p99 ≤ 250 ms). The streams come from one separate load process
 * (bench/lib/sse-load.js: raw node:http + eventsource-parser).
 *
 * Each round, on a fresh server: `--backups` backups (one per account) get a slot; first one stream each
 * ("few streams"), then `--streams` streams spread over new backups ("many streams"). With the streams open:
 * a quiet window measures reads/s, then every backup is changed twice, `--spacing` ms apart (upload →
 * UPLOADED, finalize → READY, which also ends its streams); the delay is taken from the moment the harness
 * sends the change request to the moment the new status arrives on each stream (an upper bound: it includes
 * the API request itself). The same streams and changes run against a bare node:http SSE fan-out
 * (bench/lib/baseline-sse.js) for reference.
 *
 *   node bench/p4-events.js [--rounds 2] [--streams 10000] [--backups 100] [--window 5] [--backends sqlite+fs]
 *                           [--baseline=false] [--profile /tmp/p4.cpuprofile]  (CPU profile of the first round's server)
 *
 * The 50,000-stream variant (RSS ≤ 1 GiB in one process) needs more file descriptors than the usual 20,000 in both
 * the server and the load process, and lifts the server's connection cap for the benchmark only:
 *
 *   ulimit -n 120000 && node bench/p4-events.js --streams 50000 --rounds 1 --baseline=false
 */
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  BENCH_DIR,
  MiB,
  cpuSecondsOf,
  schedOf,
  commandLine,
  list,
  log,
  logFile,
  median,
  options,
  percentile,
  requireBuild,
  round,
  rssOf,
  sampleRss,
  sleep,
  startChild,
  runWhenMain,
} from './lib/common.js';
import { accounts, createSlot, finalize, pgAvailable, prepareBackend, startCoffer, uploadSmall } from './lib/coffer.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';

export const TARGET_RSS_MIB = 512;
/** Above 10,000 streams the RSS target is the 50,000-stream one: 1 GiB. */
export const TARGET_RSS_50K_MIB = 1024;
const rssTargetFor = (streams) => (streams > 10_000 ? TARGET_RSS_50K_MIB : TARGET_RSS_MIB);
export const TARGET_P99_MS = 250;
const now = () => performance.timeOrigin + performance.now();
const PHASES = ['UPLOADED', 'READY'];

/** Coffer as a P4 target: backups with open slots, their event URLs and the two changes. */
function cofferTarget(coffer) {
  return {
    name: 'Coffer',
    pid: coffer.pid,
    reads: async () => (await coffer.stats()).queries.reads,
    startProfile: () => coffer.startProfile(),
    stopProfile: (file) => coffer.stopProfile(file),
    async prepare(count) {
      const accs = await accounts(coffer, count);
      return Promise.all(
        accs.map(async (account) => {
          const id = await createSlot(account.call);
          return {
            id,
            url: `${coffer.url}/api/backups/${id}/events`,
            headers: { authorization: `Bearer ${account.apiKey}` },
            changes: [() => uploadSmall(account.call, id), () => finalize(account.call, id, 1024)],
          };
        }),
      );
    },
  };
}

function baselineTarget(server) {
  const change = (id, status) => fetch(`${server.ready.url}/change/${id}?status=${status}`, { method: 'POST' }).then((r) => r.arrayBuffer());
  return {
    name: 'node:http SSE fan-out',
    pid: server.pid,
    reads: null,
    async prepare(count) {
      return Array.from({ length: count }, () => {
        const id = randomUUID();
        return { id, url: `${server.ready.url}/events/${id}`, headers: {}, changes: [() => change(id, 'UPLOADED'), () => change(id, 'READY')] };
      });
    },
  };
}

/** Opens `perBackup` streams on each of `backups` backups, measures, changes every backup twice. */
async function scenario(target, load, { backups, perBackup, windowS, spacingMs, profile }) {
  const entries = await target.prepare(backups);
  const rssIdle = rssOf(target.pid);
  const sampler = sampleRss(target.pid, 100);
  const opened = await load.request({ type: 'open', targets: entries.map((e) => ({ url: e.url, headers: e.headers, count: perBackup })) }, 600_000);
  if (opened.failed > 0) log(`${target.name}: ${opened.failed} streams failed to open, e.g. ${opened.failures.join('; ')}`);
  await sleep(1000);
  if (profile && target.startProfile) await target.startProfile();
  const reads0 = target.reads ? await target.reads() : null;
  const cpu0 = cpuSecondsOf(target.pid);
  await sleep(windowS * 1000);
  const quietCpuShare = (cpuSecondsOf(target.pid) - cpu0) / windowS;
  const reads1 = target.reads ? await target.reads() : null;
  const rssOpen = rssOf(target.pid);
  const phases = [];
  for (const [phase, status] of PHASES.entries()) {
    await load.request({ type: 'arrivals' });
    const sentAt = new Map();
    const readsBefore = target.reads ? await target.reads() : null;
    const cpuBefore = cpuSecondsOf(target.pid);
    const schedBefore = schedOf(target.pid);
    const phaseStarted = now();
    const requests = [];
    const requestMs = [];
    for (const entry of entries) {
      const t0 = now();
      sentAt.set(entry.id, t0);
      requests.push(entry.changes[phase]().then(() => requestMs.push(now() - t0)));
      await sleep(spacingMs);
    }
    await Promise.all(requests);
    const expected = opened.opened;
    const delays = [];
    const deadline = now() + 15_000;
    while (delays.length < expected && now() < deadline) {
      await sleep(200);
      for (const [id, got, at] of await load.request({ type: 'arrivals' })) {
        if (got === status && sentAt.has(id)) delays.push(at - sentAt.get(id));
      }
    }
    const readsAfter = target.reads ? await target.reads() : null;
    const wallS = (now() - phaseStarted) / 1000;
    const schedAfter = schedOf(target.pid);
    phases.push({
      cpuShare: (cpuSecondsOf(target.pid) - cpuBefore) / wallS,
      // Share of the phase the main thread was ready to run but waited for a CPU (other processes had it).
      waitShare: schedAfter && schedBefore ? (schedAfter.wait - schedBefore.wait) / wallS : null,
      status,
      expected,
      arrived: delays.length,
      p50: percentile(delays, 50),
      p99: percentile(delays, 99),
      max: percentile(delays, 100),
      readsPerChange: target.reads ? (readsAfter - readsBefore) / entries.length : null,
      requestP50: percentile(requestMs, 50),
      requestP99: percentile(requestMs, 99),
    });
  }
  if (profile && target.startProfile) log(`server profile (quiet window + changes): ${await target.stopProfile(profile)}`);
  const { peak } = sampler.stop();
  await load.request({ type: 'closeAll' });
  const all = phases.flatMap((p) => [p]);
  return {
    streams: opened.opened,
    failed: opened.failed,
    openSeconds: opened.ms / 1000,
    rssIdle,
    rssOpen,
    rssPeak: peak,
    steadyReadsPerSecond: target.reads ? (reads1 - reads0) / windowS : null,
    readsPerChange: target.reads ? median(phases.map((p) => p.readsPerChange)) : null,
    phases,
    p50: median(all.map((p) => p.p50)),
    p99: Math.max(...all.map((p) => p.p99)),
    max: Math.max(...all.map((p) => p.max)),
    requestP50: median(phases.map((p) => p.requestP50)),
    cpuShare: median(phases.map((p) => p.cpuShare)),
    waitShare: median(phases.map((p) => p.waitShare)),
    quietCpuShare,
    requestP99: Math.max(...phases.map((p) => p.requestP99)),
    missing: phases.reduce((n, p) => n + (p.expected - p.arrived), 0),
  };
}

export async function main() {
  const opts = options({ rounds: 2, streams: 10_000, backups: 100, window: 5, spacing: 20, backends: 'sqlite+fs', baseline: true, profile: '' });
  requireBuild();
  const started = Date.now();
  const perBackup = Math.ceil(opts.streams / opts.backups);
  const hasPg = await pgAvailable();
  const load = await startChild(path.join(BENCH_DIR, 'lib', 'sse-load.js'), [], { logFile: logFile('p4-sse-load.log') });
  const results = {};
  const notes = [
    'Server CPU is user + system time of the server process (from /proc) per second of wall time: "quiet" is the window with every stream open and no change (the 2 s status frames), "changes" the two change phases. When the machine is shared, a server that gets less CPU than it asks for queues everything, which shows first in the delay: "waiting for a CPU" is the share of the change phases its main thread was runnable but not running (/proc/<pid>/schedstat).',
    'Delay = arrival of the new status on a stream − the moment the harness sent the change request (Coffer: an upload of 1 KiB, then a finalize; reference: a POST that only changes the status). It includes the request itself, whose own latency is shown as "change request": on Coffer that is authentication, the blob write with its fsyncs and the SQLite commit (synchronous = FULL), which the bare fan-out does not do.',
  ];
  const settings = { windowS: opts.window, spacingMs: opts.spacing, backups: opts.backups };
  try {
    for (let r = 0; r < opts.rounds; r++) {
      for (const backend of list(opts.backends)) {
        if (backend.startsWith('postgres') && !hasPg) {
          if (r === 0) notes.push(`${backend}: skipped, PostgreSQL is not reachable`);
          continue;
        }
        const prepared = await prepareBackend(backend);
        // All streams come from one load process (one address), `perBackup` of them per account: lift the caps.
        const coffer = await startCoffer(prepared, {
          env: {
            COFFER_SSE_MAX_PER_ACCOUNT: String(perBackup),
            COFFER_SSE_MAX_PER_ADDRESS: String(opts.streams + opts.backups),
            COFFER_MAX_CONNECTIONS: String(Math.max(20_000, opts.streams + opts.backups + 1000)),
          },
          logFile: logFile(`p4-events-coffer-${backend}.log`),
        });
        try {
          const target = cofferTarget(coffer);
          const few = await scenario(target, load, { ...settings, perBackup: 1 });
          const many = await scenario(target, load, { ...settings, perBackup, profile: r === 0 && opts.profile ? opts.profile : null });
          log(`P4 ${backend} round ${r + 1}: ${many.streams} streams (opened in ${many.openSeconds.toFixed(1)} s), RSS peak ${(many.rssPeak / MiB).toFixed(0)} MiB, ` +
            `reads/s ${few.steadyReadsPerSecond} → ${many.steadyReadsPerSecond}, reads/change ${few.readsPerChange} → ${many.readsPerChange}, ` +
            `delay p50 ${many.p50.toFixed(1)} ms p99 ${many.p99.toFixed(1)} ms, missing ${many.missing}`);
          (results[backend] ??= []).push({ few, many });
        } finally {
          await coffer.stop();
          await prepared.cleanup();
        }
      }
      if (opts.baseline) {
        const server = await startChild(path.join(BENCH_DIR, 'lib', 'baseline-sse.js'));
        try {
          const many = await scenario(baselineTarget(server), load, { ...settings, perBackup });
          log(`P4 baseline round ${r + 1}: ${many.streams} streams, RSS peak ${(many.rssPeak / MiB).toFixed(0)} MiB, delay p50 ${many.p50.toFixed(1)} ms p99 ${many.p99.toFixed(1)} ms`);
          (results.baseline ??= []).push({ many });
        } finally {
          await server.stop();
        }
      }
    }
  } finally {
    await load.stop();
  }

  const med = (runs, pick) => median(runs.map(pick));
  const rows = [];
  const verdicts = [];
  const summary = {};
  for (const [name, runs] of Object.entries(results)) {
    const s = {
      streams: med(runs, (x) => x.many.streams),
      openSeconds: med(runs, (x) => x.many.openSeconds),
      rssIdle: med(runs, (x) => x.many.rssIdle),
      rssPeak: med(runs, (x) => x.many.rssPeak),
      p50: med(runs, (x) => x.many.p50),
      p99: med(runs, (x) => x.many.p99),
      max: med(runs, (x) => x.many.max),
      missing: med(runs, (x) => x.many.missing),
      requestP50: med(runs, (x) => x.many.requestP50),
      requestP99: med(runs, (x) => x.many.requestP99),
      cpuShare: med(runs, (x) => x.many.cpuShare),
      waitShare: med(runs, (x) => x.many.waitShare),
      quietCpuShare: med(runs, (x) => x.many.quietCpuShare),
      readsFew: name === 'baseline' ? null : med(runs, (x) => x.few.steadyReadsPerSecond),
      readsMany: name === 'baseline' ? null : med(runs, (x) => x.many.steadyReadsPerSecond),
      perChangeFew: name === 'baseline' ? null : med(runs, (x) => x.few.readsPerChange),
      perChangeMany: name === 'baseline' ? null : med(runs, (x) => x.many.readsPerChange),
      fewStreams: name === 'baseline' ? null : med(runs, (x) => x.few.streams),
    };
    summary[name] = s;
    const label = name === 'baseline' ? 'node:http SSE fan-out (reference)' : `Coffer ${name}`;
    rows.push([
      label,
      s.streams,
      round(s.openSeconds, 1),
      round(s.rssIdle / MiB, 0),
      round(s.rssPeak / MiB, 0),
      s.readsFew === null ? '—' : `${round(s.readsFew, 2)} → ${round(s.readsMany, 2)}`,
      s.perChangeFew === null ? '—' : `${round(s.perChangeFew, 2)} → ${round(s.perChangeMany, 2)}`,
      round(s.p50, 1),
      round(s.p99, 1),
      round(s.max, 1),
      `${round(s.requestP50, 1)} / ${round(s.requestP99, 1)}`,
      `${round(s.quietCpuShare * 100, 0)}% / ${round(s.cpuShare * 100, 0)}%`,
      `${round(s.waitShare * 100, 0)}%`,
      s.missing,
    ]);
    if (name === 'baseline') continue;
    const rssTarget = rssTargetFor(opts.streams);
    verdicts.push({ what: `P4 ${name}: server RSS with ${s.streams} streams (peak)`, value: `${round(s.rssPeak / MiB, 0)} MiB`, target: `≤ ${rssTarget} MiB`, met: s.rssPeak <= rssTarget * MiB });
    const independent = s.readsMany <= s.readsFew + 0.5 && s.perChangeMany <= s.perChangeFew * 1.1 + 0.05;
    verdicts.push({
      what: `P4 ${name}: DB reads independent of stream count (${s.fewStreams} → ${s.streams} streams)`,
      value: `${round(s.readsFew, 2)} → ${round(s.readsMany, 2)} reads/s idle; ${round(s.perChangeFew, 2)} → ${round(s.perChangeMany, 2)} reads per change`,
      target: 'no growth',
      met: independent,
    });
    verdicts.push({ what: `P4 ${name}: change → all streams, p99`, value: `${round(s.p99, 1)} ms (${s.missing} missing)`, target: `≤ ${TARGET_P99_MS} ms`, met: s.p99 <= TARGET_P99_MS && s.missing === 0 });
  }
  const base = summary.baseline;
  if (base) {
    for (const [name, s] of Object.entries(summary)) {
      if (name === 'baseline') continue;
      notes.push(`${name} vs the bare node:http fan-out: RSS ${fmtRatio(ratio(s.rssPeak, base.rssPeak))}, delay p99 ${fmtRatio(ratio(s.p99, base.p99))} (lower is better here).`);
    }
  }
  const label = (name) => (name === 'baseline' ? 'node:http fan-out' : `Coffer ${name}`);
  return writeResult({
    id: 'p4',
    name: 'p4-events',
    title: 'P4 — 10,000 open event streams',
    target: `RSS ≤ ${rssTargetFor(opts.streams)} MiB; DB reads/s independent of stream count; change → all streams p99 ≤ ${TARGET_P99_MS} ms`,
    command: commandLine('p4-events.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `${opts.streams} streams over ${opts.backups} backups from one load process; ${opts.backups} × 2 status changes ${opts.spacing} ms apart; median of ${opts.rounds} rounds`,
        columns: ['server', 'streams', 'open s', 'RSS idle MiB', 'RSS peak MiB', `DB reads/s idle (${opts.backups} → ${opts.streams} streams)`, 'DB reads per change (same)', 'delay p50 ms', 'delay p99 ms', 'delay max ms', 'change request p50 / p99 ms', 'server CPU, % of a core: quiet / changes', 'server main thread waiting for a CPU during changes', 'missing'],
        rows,
      },
    ],
    verdicts,
    notes,
    chart: {
      panels: [
        {
          title: `P4 — ${opts.streams.toLocaleString('en-US')} open event streams: server peak RSS (lower is better)`,
          subtitle: `median of ${opts.rounds} rounds; dashed line = target`,
          unit: 'MiB',
          series: ['peak RSS'],
          groups: Object.entries(summary).map(([name, s]) => ({ label: label(name), note: `${s.streams} streams`, values: [s.rssPeak / MiB] })),
          target: { value: rssTargetFor(opts.streams), label: `target ≤ ${rssTargetFor(opts.streams)} MiB` },
        },
        {
          title: 'Status change → arrival on every stream (lower is better)',
          subtitle: `${opts.backups} backups × 2 changes; dashed line = p99 target`,
          unit: 'ms',
          series: ['p50', 'p99'],
          groups: Object.entries(summary).map(([name, s]) => ({ label: label(name), values: [s.p50, s.p99] })),
          target: { value: TARGET_P99_MS, label: `p99 target ≤ ${TARGET_P99_MS} ms` },
        },
      ],
    },
    raw: results,
  });
}

runWhenMain(import.meta.url, main);
