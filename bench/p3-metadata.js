/**
 * P3 — metadata reads: autocannon (64 connections) against GET /api/backups (an account with 20 READY records)
 * and GET /api/backup-account, vs a Fastify hello-world started the same way (own process, loopback).
 * Targets (issue 17): list req/s ≥ 0.3× and account req/s ≥ 0.5× hello-world in the same run, p99 < 10 ms, on
 * sqlite+fs and postgres+fs. The "database statements per request" column shows what the metadata cache leaves
 * to the database (0: every request answered from memory). Each round runs the three endpoints back to
 * back (rotating the order); the table shows the median of the rounds. autocannon runs in this process and
 * shares the 2 cores with the server under test: the same for Coffer and the baseline.
 *
 *   node bench/p3-metadata.js [--rounds 3] [--duration 3] [--connections 64] [--backends sqlite+fs,postgres+fs]
 *                             [--profile /tmp/p3]  (CPU profiles of the server's first list and account runs:
 *                                                   /tmp/p3-<backend>-<list|account>.cpuprofile)
 */
import path from 'node:path';
import autocannon from 'autocannon';
import {
  BENCH_DIR,
  commandLine,
  cpuSecondsOf,
  list,
  log,
  logFile,
  median,
  options,
  requireBuild,
  round,
  startChild,
  runWhenMain,
} from './lib/common.js';
import { accounts, createSlot, finalize, pgAvailable, prepareBackend, startCoffer, uploadSmall } from './lib/coffer.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';

/** The least req/s of each endpoint, as a ratio to hello-world's in the same run. */
export const TARGET_RATIO = { list: 0.3, account: 0.5 };
export const TARGET_P99_MS = 10;

/** One autocannon run; `pid` is the server process, whose CPU time per request is read from /proc. */
function cannon(url, { connections, duration, headers = {}, pid }) {
  const cpu0 = pid ? cpuSecondsOf(pid) : null;
  return new Promise((resolve, reject) => {
    autocannon({ url, connections, duration, headers, pipelining: 1 }, (error, result) => {
      if (error) return reject(error);
      const cpuUs = pid ? ((cpuSecondsOf(pid) - cpu0) / result.requests.total) * 1e6 : NaN;
      const bad = result.non2xx + result.errors + result.timeouts;
      if (bad > 0) return reject(new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`));
      resolve({ rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, total: result.requests.total, cpuUs });
    });
  });
}

export async function main() {
  const opts = options({ rounds: 3, duration: 3, connections: 64, backends: 'sqlite+fs,postgres+fs', records: 20, profile: '' });
  requireBuild();
  const started = Date.now();
  const hello = await startChild(path.join(BENCH_DIR, 'lib', 'hello-fastify.js'));
  const hasPg = await pgAvailable();
  const rows = [];
  const raw = {};
  const notes = [
    'The hand-written reference (SQLite backends only) does the same reads with nothing else: Bearer → SHA-256 → api_keys row, then the list query (8 columns) or the account + vault rows, on prepared statements of the same SQLite driver, serialized by Fastify. It is not a target, it splits the gap: hello-world → reference is what the work costs on this stack, reference → Coffer is what Coffer adds (Kysely, hooks, metrics, logging setup, pruning check, schema serialization).',
    'Server CPU per request = user + system time of the server process during the run (from /proc) / requests answered: less sensitive to other load on the machine than req/s.',
  ];
  const load = { connections: opts.connections, duration: opts.duration };
  try {
    for (const backend of list(opts.backends)) {
      if (backend.startsWith('postgres') && !hasPg) {
        notes.push(`${backend}: skipped, PostgreSQL is not reachable`);
        continue;
      }
      const prepared = await prepareBackend(backend);
      const coffer = await startCoffer(prepared, { logFile: logFile(`p3-metadata-coffer-${backend}.log`) });
      try {
        const [account] = await accounts(coffer, 1);
        for (let i = 0; i < opts.records; i++) {
          const id = await createSlot(account.call);
          await finalize(account.call, id, await uploadSmall(account.call, id));
          await coffer.advance(31 * 60_000); // the pro plan allows one READY backup per 30 minutes
        }
        const listed = await account.call('GET', '/api/backups', { expect: 200 });
        if (listed.body.backups.length !== opts.records)
          throw new Error(`expected ${opts.records} records, got ${listed.body.backups.length}`);
        const headers = { authorization: `Bearer ${account.apiKey}` };
        // The hand-written reference reads Coffer's own SQLite file (read-only), so the rows are the same.
        const reference =
          prepared.meta === 'sqlite'
            ? await startChild(path.join(BENCH_DIR, 'lib', 'hello-fastify.js'), [path.join(prepared.dataDir, 'coffer.sqlite')])
            : null;
        const targets = {
          hello: { url: `${hello.ready.url}/`, headers: {}, pid: hello.pid },
          list: { url: `${coffer.url}/api/backups`, headers, pid: coffer.pid, coffer },
          account: { url: `${coffer.url}/api/backup-account`, headers, pid: coffer.pid, coffer },
          ...(reference
            ? {
                refList: { url: `${reference.ready.url}/ref/list`, headers, pid: reference.pid },
                refAccount: { url: `${reference.ready.url}/ref/account`, headers, pid: reference.pid },
              }
            : {}),
        };
        // Warm-up: one short run of each (JIT, connection pools, page cache).
        for (const target of Object.values(targets)) await cannon(target.url, { ...load, duration: 1, headers: target.headers });
        const names = Object.keys(targets);
        const samples = Object.fromEntries(names.map((name) => [name, []]));
        for (let r = 0; r < opts.rounds; r++) {
          const order = names.slice(r % names.length).concat(names.slice(0, r % names.length));
          for (const name of order) {
            const { coffer: server } = targets[name];
            const profile = opts.profile && r === 0 && server ? `${opts.profile}-${backend}-${name}.cpuprofile` : null;
            if (profile) await server.startProfile();
            const before = server ? (await server.stats()).queries : null;
            const sample = await cannon(targets[name].url, { ...load, headers: targets[name].headers, pid: targets[name].pid });
            if (before) {
              const after = (await server.stats()).queries;
              sample.statements = (after.reads + after.writes + after.other - before.reads - before.writes - before.other) / sample.total;
            }
            if (profile) log(`server profile: ${await server.stopProfile(profile)}`);
            samples[name].push(sample);
          }
        }
        raw[backend] = samples;
        const summary = Object.fromEntries(
          names.map((name) => [
            name,
            {
              rps: median(samples[name].map((s) => s.rps)),
              p99: median(samples[name].map((s) => s.p99)),
              p50: median(samples[name].map((s) => s.p50)),
              cpuUs: median(samples[name].map((s) => s.cpuUs)),
              statements: median(samples[name].map((s) => s.statements ?? NaN)),
            },
          ]),
        );
        await reference?.stop();
        log(
          `P3 ${backend}: hello ${summary.hello.rps.toFixed(0)} req/s; list ${summary.list.rps.toFixed(0)} req/s p99 ${summary.list.p99} ms; account ${summary.account.rps.toFixed(0)} req/s p99 ${summary.account.p99} ms`,
        );
        rows.push({ backend, ...summary, names });
      } finally {
        await coffer.stop();
        await prepared.cleanup();
      }
    }
  } finally {
    await hello.stop();
  }

  const verdicts = [];
  for (const row of rows) {
    for (const name of ['list', 'account']) {
      const r = ratio(row[name].rps, row.hello.rps);
      const least = TARGET_RATIO[name];
      verdicts.push({
        what: `P3 ${row.backend} ${name}: req/s ≥ ${least}× hello-world`,
        value: fmtRatio(r),
        target: `≥ ${least}×`,
        met: r >= least,
      });
      verdicts.push({
        what: `P3 ${row.backend} ${name}: p99 at ${opts.connections} connections`,
        value: `${row[name].p99} ms`,
        target: `< ${TARGET_P99_MS} ms`,
        met: row[name].p99 < TARGET_P99_MS,
      });
    }
  }
  const label = {
    list: `GET /api/backups (${opts.records} records)`,
    account: 'GET /api/backup-account',
    hello: 'Fastify hello-world (baseline)',
    refList: 'reference: same list, hand-written',
    refAccount: 'reference: same account read, hand-written',
  };
  const versus = { list: 'refList', account: 'refAccount' };
  return writeResult({
    id: 'p3',
    name: 'p3-metadata',
    title: 'P3 — metadata reads',
    target: `list ≥ ${TARGET_RATIO.list}×, account ≥ ${TARGET_RATIO.account}× Fastify hello-world req/s in the same run; p99 < ${TARGET_P99_MS} ms at ${opts.connections} connections`,
    command: commandLine('p3-metadata.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `autocannon, ${opts.connections} connections, ${opts.duration} s per run, median of ${opts.rounds} rounds`,
        columns: [
          'backend',
          'endpoint',
          'req/s',
          'ratio to hello-world',
          'ratio to hand-written reference',
          'p50 ms',
          'p99 ms',
          'server CPU µs per request',
          'database statements per request',
        ],
        rows: rows.flatMap((row) =>
          ['list', 'account', 'hello', 'refList', 'refAccount']
            .filter((name) => row[name])
            .map((name) => [
              row.backend,
              label[name],
              round(row[name].rps, 0),
              fmtRatio(ratio(row[name].rps, row.hello.rps)),
              versus[name] && row[versus[name]] ? fmtRatio(ratio(row[name].rps, row[versus[name]].rps)) : '',
              row[name].p50,
              row[name].p99,
              round(row[name].cpuUs, 0),
              Number.isNaN(row[name].statements) ? '' : round(row[name].statements, 3),
            ]),
        ),
      },
    ],
    verdicts,
    notes,
    chart: {
      panels: [
        {
          title: 'P3 — metadata reads: requests per second (higher is better)',
          subtitle: `autocannon, ${opts.connections} connections, median of ${opts.rounds} rounds; notes = list / account ratio to hello-world; dashed = ${TARGET_RATIO.list}× hello-world, the list target (first backend)`,
          unit: 'requests per second',
          series: [label.list, label.account, label.hello],
          groups: rows.map((row) => ({
            label: row.backend,
            note: `${fmtRatio(ratio(row.list.rps, row.hello.rps))} / ${fmtRatio(ratio(row.account.rps, row.hello.rps))}`,
            values: [row.list.rps, row.account.rps, row.hello.rps],
          })),
          target: rows[0] ? { value: rows[0].hello.rps * TARGET_RATIO.list, label: `${TARGET_RATIO.list}× hello-world` } : undefined,
        },
        {
          title: `p99 latency at ${opts.connections} connections (lower is better)`,
          subtitle: `dashed = target < ${TARGET_P99_MS} ms`,
          unit: 'ms',
          series: [label.list, label.account, label.hello],
          groups: rows.map((row) => ({ label: row.backend, values: [row.list.p99, row.account.p99, row.hello.p99] })),
          target: { value: TARGET_P99_MS, label: `${TARGET_P99_MS} ms` },
        },
      ],
    },
    raw,
  });
}

runWhenMain(import.meta.url, main);
