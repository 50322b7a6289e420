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
 * Across nodes (`--nodes 2`, PostgreSQL backends only): that many Coffer processes on the same PostgreSQL schema,
 * so a status change made on one reaches the others through LISTEN/NOTIFY (src/events/pg-bus.ts). Every backup
 * gets its streams split evenly over the nodes (the "few streams" scenario: one per node), the changes are all
 * made through node A, and the delay is measured on every stream of every node; RSS, CPU and DB reads are taken
 * per node (DB reads per change = the sum over the nodes: node A's change request plus each other node's one read
 * of the record it fans out), and the cross-node hop: per change, its first arrival on another node minus its first
 * arrival on node A. Written as its own result (bench/results/p4-events-nodes.json, section p4-nodes):
 *
 *   node bench/p4-events.js --backends postgres+fs --nodes 2 [--rounds 2] [--streams 10000] …
 *
 * The 50,000-stream variant (RSS ≤ 1 GiB in one process) needs more file descriptors than the usual 20,000 in both
 * the server and the load process (raising the hard limit needs CAP_SYS_RESOURCE: on the 2-core VM `prlimit --nofile=70000`
 * fails with "Operation not permitted"), and sets the server's COFFER_MAX_CONNECTIONS above the stream count:
 *
 *   ulimit -n 120000 && node bench/p4-events.js --streams 50000 --rounds 1 --baseline=false
 */
import { spawnSync } from 'node:child_process';
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

/**
 * Coffer as a P4 target: backups with open slots, their event URLs (one per node) and the two changes, made
 * through the first node. reads() gives each node's statement counter.
 */
function cofferTarget(nodes) {
  const [first] = nodes;
  return {
    name: 'Coffer',
    pids: nodes.map((node) => node.pid),
    reads: () => Promise.all(nodes.map(async (node) => (await node.stats()).queries.reads)),
    startProfile: () => first.startProfile(),
    stopProfile: (file) => first.stopProfile(file),
    async prepare(count) {
      const accs = await accounts(first, count);
      return Promise.all(
        accs.map(async (account) => {
          const id = await createSlot(account.call);
          return {
            id,
            urls: nodes.map((node) => `${node.url}/api/backups/${id}/events`),
            headers: { authorization: `Bearer ${account.apiKey}` },
            changes: [() => uploadSmall(account.call, id), () => finalize(account.call, id, 1024)],
          };
        }),
      );
    },
  };
}

function baselineTarget(server) {
  const change = (id, status) =>
    fetch(`${server.ready.url}/change/${id}?status=${status}`, { method: 'POST' }).then((r) => r.arrayBuffer());
  return {
    name: 'node:http SSE fan-out',
    pids: [server.pid],
    reads: null,
    async prepare(count) {
      return Array.from({ length: count }, () => {
        const id = randomUUID();
        return {
          id,
          urls: [`${server.ready.url}/events/${id}`],
          headers: {},
          changes: [() => change(id, 'UPLOADED'), () => change(id, 'READY')],
        };
      });
    },
  };
}

const sum = (values) => values.reduce((a, b) => a + b, 0);
const diff = (after, before) => after.map((value, i) => value - before[i]);

/**
 * Opens `perNode` streams per node on each of `backups` backups, measures, changes every backup twice. Every figure
 * is also kept per node (`nodes[i]`); the top-level ones are over all streams (delays), the sum over the nodes (DB
 * reads), the largest node (RSS) or the first node, the one the changes go through (CPU, waiting for a CPU).
 */
async function scenario(target, load, { backups, perNode, windowS, spacingMs, profile }) {
  const entries = await target.prepare(backups);
  const { pids } = target;
  const rssIdle = pids.map((pid) => rssOf(pid));
  const samplers = pids.map((pid) => sampleRss(pid, 100));
  const opened = await load.request(
    { type: 'open', targets: entries.flatMap((e) => e.urls.map((url, tag) => ({ url, headers: e.headers, count: perNode, tag }))) },
    600_000,
  );
  if (opened.failed > 0) log(`${target.name}: ${opened.failed} streams failed to open, e.g. ${opened.failures.join('; ')}`);
  await sleep(1000);
  if (profile && target.startProfile) await target.startProfile();
  const reads0 = target.reads ? await target.reads() : null;
  const cpu0 = pids.map((pid) => cpuSecondsOf(pid));
  await sleep(windowS * 1000);
  const quietCpuShares = pids.map((pid, i) => (cpuSecondsOf(pid) - cpu0[i]) / windowS);
  const reads1 = target.reads ? await target.reads() : null;
  const rssOpen = pids.map((pid) => rssOf(pid));
  const phases = [];
  for (const [phase, status] of PHASES.entries()) {
    await load.request({ type: 'arrivals' });
    const sentAt = new Map();
    const readsBefore = target.reads ? await target.reads() : null;
    const cpuBefore = pids.map((pid) => cpuSecondsOf(pid));
    const schedBefore = pids.map((pid) => schedOf(pid));
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
    const delays = pids.map(() => []);
    // First arrival of this change on each node, per backup: node X's minus node A's is the cross-node hop.
    const first = pids.map(() => new Map());
    let arrived = 0;
    const deadline = now() + 15_000;
    while (arrived < expected && now() < deadline) {
      await sleep(200);
      for (const [id, got, at, tag = 0] of await load.request({ type: 'arrivals' })) {
        if (got === status && sentAt.has(id)) {
          delays[tag].push(at - sentAt.get(id));
          if (!(first[tag].get(id) <= at)) first[tag].set(id, at);
          arrived += 1;
        }
      }
    }
    const readsAfter = target.reads ? await target.reads() : null;
    const wallS = (now() - phaseStarted) / 1000;
    const all = delays.flat();
    const perNodeReads = readsAfter ? diff(readsAfter, readsBefore).map((n) => n / entries.length) : null;
    const nodes = pids.map((pid, i) => {
      const schedAfter = schedOf(pid);
      return {
        cpuShare: (cpuSecondsOf(pid) - cpuBefore[i]) / wallS,
        // CPU time per change beyond what the open streams cost when nothing changes (their periodic frames): what
        // handling and fanning out one change costs this node, far less sensitive to other load than the delay.
        cpuMsPerChange: ((cpuSecondsOf(pid) - cpuBefore[i] - quietCpuShares[i] * wallS) * 1000) / entries.length,
        // Share of the phase the main thread was ready to run but waited for a CPU (other processes had it).
        waitShare: schedAfter && schedBefore[i] ? (schedAfter.wait - schedBefore[i].wait) / wallS : null,
        expected: opened.openedByTag?.[i] ?? 0,
        arrived: delays[i].length,
        p50: percentile(delays[i], 50),
        p99: percentile(delays[i], 99),
        max: percentile(delays[i], 100),
        readsPerChange: perNodeReads ? perNodeReads[i] : null,
        hops: [...first[i]].filter(([id]) => first[0].has(id)).map(([id, at]) => at - first[0].get(id)),
      };
    });
    phases.push({
      cpuShare: nodes[0].cpuShare,
      waitShare: nodes[0].waitShare,
      status,
      expected,
      arrived: all.length,
      p50: percentile(all, 50),
      p99: percentile(all, 99),
      max: percentile(all, 100),
      readsPerChange: perNodeReads ? sum(perNodeReads) : null,
      requestP50: percentile(requestMs, 50),
      requestP99: percentile(requestMs, 99),
      nodes,
    });
  }
  if (profile && target.startProfile) log(`server profile of node A (quiet window + changes): ${await target.stopProfile(profile)}`);
  const peaks = samplers.map((sampler) => sampler.stop().peak);
  await load.request({ type: 'closeAll' });
  const steadyReads = reads1 ? diff(reads1, reads0).map((n) => n / windowS) : null;
  const nodes = pids.map((pid, i) => {
    const of = (pick) => phases.map((p) => pick(p.nodes[i]));
    return {
      streams: opened.openedByTag?.[i] ?? 0,
      rssIdle: rssIdle[i],
      rssOpen: rssOpen[i],
      rssPeak: peaks[i],
      steadyReadsPerSecond: steadyReads ? steadyReads[i] : null,
      readsPerChange: steadyReads ? median(of((n) => n.readsPerChange)) : null,
      p50: median(of((n) => n.p50)),
      p99: Math.max(...of((n) => n.p99)),
      max: Math.max(...of((n) => n.max)),
      cpuShare: median(of((n) => n.cpuShare)),
      waitShare: median(of((n) => n.waitShare)),
      cpuMsPerChange: median(of((n) => n.cpuMsPerChange)),
      hopP50: percentile(of((n) => n.hops).flat(), 50),
      hopP99: percentile(of((n) => n.hops).flat(), 99),
      quietCpuShare: quietCpuShares[i],
      missing: sum(of((n) => n.expected - n.arrived)),
    };
  });
  return {
    streams: opened.opened,
    failed: opened.failed,
    openSeconds: opened.ms / 1000,
    rssIdle: Math.max(...rssIdle),
    rssOpen: Math.max(...rssOpen),
    rssPeak: Math.max(...peaks),
    steadyReadsPerSecond: steadyReads ? sum(steadyReads) : null,
    readsPerChange: target.reads ? median(phases.map((p) => p.readsPerChange)) : null,
    phases,
    p50: median(phases.map((p) => p.p50)),
    p99: Math.max(...phases.map((p) => p.p99)),
    max: Math.max(...phases.map((p) => p.max)),
    requestP50: median(phases.map((p) => p.requestP50)),
    cpuShare: median(phases.map((p) => p.cpuShare)),
    waitShare: median(phases.map((p) => p.waitShare)),
    quietCpuShare: quietCpuShares[0],
    requestP99: Math.max(...phases.map((p) => p.requestP99)),
    missing: phases.reduce((n, p) => n + (p.expected - p.arrived), 0),
    nodes,
  };
}

const NODE_NAMES = 'ABCDEFGH';
const nodeName = (i) => NODE_NAMES[i] ?? String(i + 1);

/** The hard limit of open files per process (50,000 streams need more than that where it is lower). */
function hardFileLimit() {
  const result = spawnSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : 'unknown';
}

export async function main() {
  const opts = options({
    rounds: 2,
    streams: 10_000,
    backups: 100,
    window: 5,
    spacing: 20,
    backends: 'sqlite+fs',
    nodes: 1,
    baseline: true,
    profile: '',
  });
  requireBuild();
  const started = Date.now();
  const backends = list(opts.backends);
  if (!Number.isInteger(opts.nodes) || opts.nodes < 1 || opts.nodes > NODE_NAMES.length)
    throw new Error(`--nodes must be 1 to ${NODE_NAMES.length}, got ${opts.nodes}`);
  const multi = opts.nodes > 1;
  if (multi && backends.some((b) => !b.startsWith('postgres'))) {
    throw new Error(
      `--nodes ${opts.nodes} needs PostgreSQL backends (the nodes hear each other's changes through its LISTEN/NOTIFY), not ${backends.filter((b) => !b.startsWith('postgres')).join(', ')}`,
    );
  }
  const perBackup = Math.ceil(opts.streams / opts.backups);
  const perNode = Math.ceil(perBackup / opts.nodes);
  const streamsPerNode = perNode * opts.backups;
  const hasPg = await pgAvailable();
  const load = await startChild(path.join(BENCH_DIR, 'lib', 'sse-load.js'), [], { logFile: logFile('p4-sse-load.log') });
  const results = {};
  const notes = [
    'Server CPU is user + system time of the server process (from /proc) per second of wall time: "quiet" is the window with every stream open and no change (the 2 s status frames), "changes" the two change phases. When the machine is shared, a server that gets less CPU than it asks for queues everything, which shows first in the delay: "waiting for a CPU" is the share of the change phases its main thread was runnable but not running (/proc/<pid>/schedstat).',
    multi
      ? 'Delay = arrival of the new status on a stream − the moment the harness sent the change request to node A (an upload of 1 KiB, then a finalize; reference: a POST that only changes the status). It includes the request itself ("change request"). On node A the change reaches its streams from the local bus; on the other nodes it travels as a PostgreSQL NOTIFY after the commit, and each node reads the record once for all its streams.'
      : 'Delay = arrival of the new status on a stream − the moment the harness sent the change request (Coffer: an upload of 1 KiB, then a finalize; reference: a POST that only changes the status). It includes the request itself, whose own latency is shown as "change request": on Coffer that is authentication, the blob write with its fsyncs and the SQLite commit (synchronous = FULL), which the bare fan-out does not do.',
  ];
  if (multi) {
    notes.push(
      `${opts.nodes} Coffer processes (bench/lib/coffer-proc.js) on one PostgreSQL schema; every backup has ${perNode} streams on each node; all changes go through node A; one load process opens every stream. "DB reads per change" sums the statement counters of all nodes (node A: the change request's own reads; every other node: its one read of the record for its streams); the per-node column splits it. "Server CPU ms per change beyond quiet" = (the node's CPU time during a change phase − its quiet-window CPU share × the phase's length) / changes: on node A the change request and its fan-out, on the others the notification, the one read and the fan-out; it depends far less on other load than the delay does.`,
    );
  }
  const settings = { windowS: opts.window, spacingMs: opts.spacing, backups: opts.backups };
  try {
    for (let r = 0; r < opts.rounds; r++) {
      for (const backend of backends) {
        if (backend.startsWith('postgres') && !hasPg) {
          if (r === 0) notes.push(`${backend}: skipped, PostgreSQL is not reachable`);
          continue;
        }
        const prepared = await prepareBackend(backend);
        const nodes = [];
        try {
          // All streams come from one load process (one address), `perNode` of them per account and node: lift the caps.
          const env = {
            COFFER_SSE_MAX_PER_ACCOUNT: String(perNode),
            COFFER_SSE_MAX_PER_ADDRESS: String(streamsPerNode + opts.backups),
            COFFER_MAX_CONNECTIONS: String(Math.max(20_000, streamsPerNode + opts.backups + 1000)),
          };
          // One after the other: the first applies the migrations.
          for (let i = 0; i < opts.nodes; i++) {
            nodes.push(
              await startCoffer(prepared, {
                env,
                logFile: logFile(`p4-events-coffer-${backend}${multi ? `-node-${nodeName(i)}` : ''}.log`),
              }),
            );
          }
          const target = cofferTarget(nodes);
          const few = await scenario(target, load, { ...settings, perNode: 1 });
          const many = await scenario(target, load, { ...settings, perNode, profile: r === 0 && opts.profile ? opts.profile : null });
          log(
            `P4 ${backend}${multi ? ` × ${opts.nodes} nodes` : ''} round ${r + 1}: ${many.streams} streams (opened in ${many.openSeconds.toFixed(1)} s), ` +
              `RSS peak ${many.nodes.map((n) => (n.rssPeak / MiB).toFixed(0)).join(' / ')} MiB, ` +
              `reads/s ${round(few.steadyReadsPerSecond, 2)} → ${round(many.steadyReadsPerSecond, 2)}, reads/change ${round(few.readsPerChange, 2)} → ${round(many.readsPerChange, 2)}, ` +
              `delay p50 ${many.p50.toFixed(1)} ms p99 ${many.p99.toFixed(1)} ms${multi ? ` (per node ${many.nodes.map((n) => n.p99.toFixed(1)).join(' / ')})` : ''}, missing ${many.missing}`,
          );
          (results[backend] ??= []).push({ few, many });
        } finally {
          for (const node of [...nodes].reverse()) await node.stop();
          await prepared.cleanup();
        }
      }
      if (opts.baseline) {
        const server = await startChild(path.join(BENCH_DIR, 'lib', 'baseline-sse.js'));
        try {
          const many = await scenario(baselineTarget(server), load, { ...settings, perNode: perBackup });
          log(
            `P4 baseline round ${r + 1}: ${many.streams} streams, RSS peak ${(many.rssPeak / MiB).toFixed(0)} MiB, delay p50 ${many.p50.toFixed(1)} ms p99 ${many.p99.toFixed(1)} ms`,
          );
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
  const pct = (share) => `${round(share * 100, 0)}%`;
  const perNodeText = (values, format) => values.map(format).join(' / ');
  for (const [name, runs] of Object.entries(results)) {
    const isBase = name === 'baseline';
    const nodeCount = runs[0].many.nodes.length;
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
      readsFew: isBase ? null : med(runs, (x) => x.few.steadyReadsPerSecond),
      readsMany: isBase ? null : med(runs, (x) => x.many.steadyReadsPerSecond),
      perChangeFew: isBase ? null : med(runs, (x) => x.few.readsPerChange),
      perChangeMany: isBase ? null : med(runs, (x) => x.many.readsPerChange),
      fewStreams: isBase ? null : med(runs, (x) => x.few.streams),
      nodes: Array.from({ length: nodeCount }, (_, i) => {
        const pick = (f) => med(runs, (x) => f(x.many.nodes[i]));
        return {
          streams: pick((n) => n.streams),
          rssIdle: pick((n) => n.rssIdle),
          rssPeak: pick((n) => n.rssPeak),
          p50: pick((n) => n.p50),
          p99: pick((n) => n.p99),
          readsPerChange: isBase ? null : pick((n) => n.readsPerChange),
          cpuShare: pick((n) => n.cpuShare),
          quietCpuShare: pick((n) => n.quietCpuShare),
          waitShare: pick((n) => n.waitShare),
          cpuMsPerChange: pick((n) => n.cpuMsPerChange),
          hopP50: pick((n) => n.hopP50),
          hopP99: pick((n) => n.hopP99),
        };
      }),
    };
    summary[name] = s;
    const label = isBase ? 'node:http SSE fan-out (reference, one process)' : `Coffer ${name}${multi ? `, ${nodeCount} nodes` : ''}`;
    const reads = s.readsFew === null ? '—' : `${round(s.readsFew, 2)} → ${round(s.readsMany, 2)}`;
    const perChange = s.perChangeFew === null ? '—' : `${round(s.perChangeFew, 2)} → ${round(s.perChangeMany, 2)}`;
    const request = `${round(s.requestP50, 1)} / ${round(s.requestP99, 1)}`;
    if (multi) {
      rows.push([
        label,
        perNodeText(s.nodes, (n) => n.streams),
        round(s.openSeconds, 1),
        perNodeText(s.nodes, (n) => round(n.rssIdle / MiB, 0)),
        perNodeText(s.nodes, (n) => round(n.rssPeak / MiB, 0)),
        reads,
        perChange,
        isBase ? '—' : perNodeText(s.nodes, (n) => round(n.readsPerChange, 2)),
        round(s.p50, 1),
        round(s.p99, 1),
        perNodeText(s.nodes, (n) => round(n.p99, 1)),
        isBase ? '—' : perNodeText(s.nodes.slice(1), (n) => `${round(n.hopP50, 1)} / ${round(n.hopP99, 1)}`),
        round(s.max, 1),
        request,
        perNodeText(s.nodes, (n) => `${pct(n.quietCpuShare)} / ${pct(n.cpuShare)}`),
        perNodeText(s.nodes, (n) => round(n.cpuMsPerChange, 2)),
        perNodeText(s.nodes, (n) => pct(n.waitShare)),
        s.missing,
      ]);
    } else {
      rows.push([
        label,
        s.streams,
        round(s.openSeconds, 1),
        round(s.rssIdle / MiB, 0),
        round(s.rssPeak / MiB, 0),
        reads,
        perChange,
        round(s.p50, 1),
        round(s.p99, 1),
        round(s.max, 1),
        request,
        `${pct(s.quietCpuShare)} / ${pct(s.cpuShare)}`,
        pct(s.waitShare),
        s.missing,
      ]);
    }
    if (isBase) continue;
    const rssTarget = rssTargetFor(multi ? streamsPerNode : opts.streams);
    const what = multi ? `P4 ${name}, ${nodeCount} nodes` : `P4 ${name}`;
    if (multi) {
      verdicts.push({
        what: `${what}: server RSS per node with ${perNodeText(s.nodes, (n) => n.streams)} streams (peak)`,
        value: `${perNodeText(s.nodes, (n) => round(n.rssPeak / MiB, 0))} MiB`,
        target: `≤ ${rssTarget} MiB each`,
        met: s.nodes.every((n) => n.rssPeak <= rssTarget * MiB),
      });
    } else {
      verdicts.push({
        what: `${what}: server RSS with ${s.streams} streams (peak)`,
        value: `${round(s.rssPeak / MiB, 0)} MiB`,
        target: `≤ ${rssTarget} MiB`,
        met: s.rssPeak <= rssTarget * MiB,
      });
    }
    if (!multi && s.streams < 50_000) {
      // The issue's 50,000 streams in one process: opened only where the open-file limit allows (ulimit -Hn).
      const perStream = (s.rssPeak - s.rssIdle) / s.streams;
      verdicts.push({
        what: `${what}: server RSS with 50,000 streams in one process (extrapolated from ${s.streams}: the hard open-file limit here is ${hardFileLimit()})`,
        value: `~${round((s.rssIdle + perStream * 50_000) / MiB, 0)} MiB (${round(perStream / 1024, 1)} KiB per stream)`,
        target: '≤ 1024 MiB',
        met: null,
      });
    }
    const independent = s.readsMany <= s.readsFew + 0.5 && s.perChangeMany <= s.perChangeFew * 1.1 + 0.05;
    verdicts.push({
      what: `${what}: DB reads independent of stream count (${s.fewStreams} → ${s.streams} streams${multi ? ', all nodes' : ''})`,
      value: `${round(s.readsFew, 2)} → ${round(s.readsMany, 2)} reads/s idle; ${round(s.perChangeFew, 2)} → ${round(s.perChangeMany, 2)} reads per change`,
      target: 'no growth',
      met: independent,
    });
    // Across nodes the verdict takes the worst node's p99 (every node's streams must make it, not their mix).
    const p99 = multi ? Math.max(s.p99, ...s.nodes.map((n) => n.p99)) : s.p99;
    verdicts.push({
      what: multi ? `${what}: change on node A → all streams on every node, p99 of the worst node` : `${what}: change → all streams, p99`,
      value: `${round(p99, 1)} ms${multi ? ` (per node ${perNodeText(s.nodes, (n) => round(n.p99, 1))})` : ''} (${s.missing} missing)`,
      target: `≤ ${TARGET_P99_MS} ms`,
      met: p99 <= TARGET_P99_MS && s.missing === 0,
    });
  }
  const base = summary.baseline;
  if (base) {
    for (const [name, s] of Object.entries(summary)) {
      if (name === 'baseline') continue;
      notes.push(
        multi
          ? `${name}, ${s.nodes.length} nodes vs the bare node:http fan-out holding every stream in one process: RSS of the largest node ${fmtRatio(ratio(s.rssPeak, base.rssPeak))}, delay p99 ${fmtRatio(ratio(s.p99, base.p99))} (lower is better here).`
          : `${name} vs the bare node:http fan-out: RSS ${fmtRatio(ratio(s.rssPeak, base.rssPeak))}, delay p99 ${fmtRatio(ratio(s.p99, base.p99))} (lower is better here).`,
      );
    }
  }
  const label = (name) => (name === 'baseline' ? 'node:http fan-out' : `Coffer ${name}`);
  /** Chart groups: one per server, or with several nodes one per node. */
  const groups = (values) =>
    Object.entries(summary).flatMap(([name, s]) =>
      multi && name !== 'baseline'
        ? s.nodes.map((n, i) => ({ label: `${label(name)} node ${nodeName(i)}`, note: `${n.streams} streams`, values: values(n) }))
        : [{ label: label(name), note: `${s.streams} streams`, values: values(s) }],
    );
  const streamsText = opts.streams.toLocaleString('en-US');
  const rssTarget = rssTargetFor(multi ? streamsPerNode : opts.streams);
  return writeResult({
    id: multi ? 'p4-nodes' : 'p4',
    name: multi ? 'p4-events-nodes' : 'p4-events',
    title: multi ? `P4 — ${streamsText} event streams over ${opts.nodes} nodes (PostgreSQL)` : 'P4 — 10,000 open event streams',
    target: `RSS ≤ ${rssTarget} MiB${multi ? ' per node' : ''}; DB reads/s independent of stream count; change → all streams p99 ≤ ${TARGET_P99_MS} ms`,
    command: commandLine('p4-events.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: multi
          ? `${opts.streams} streams over ${opts.backups} backups, ${perNode} per backup on each of ${opts.nodes} nodes (A / B …), from one load process; ${opts.backups} × 2 status changes through node A, ${opts.spacing} ms apart; median of ${opts.rounds} rounds`
          : `${opts.streams} streams over ${opts.backups} backups from one load process; ${opts.backups} × 2 status changes ${opts.spacing} ms apart; median of ${opts.rounds} rounds`,
        columns: multi
          ? [
              'server',
              'streams per node',
              'open s',
              'RSS idle MiB per node',
              'RSS peak MiB per node',
              `DB reads/s idle, all nodes (${opts.backups * opts.nodes} → ${opts.streams} streams)`,
              'DB reads per change, all nodes (same)',
              'DB reads per change per node',
              'delay p50 ms',
              'delay p99 ms',
              'delay p99 ms per node',
              'node A → other node, first arrival of a change, p50 / p99 ms',
              'delay max ms',
              'change request p50 / p99 ms',
              'server CPU per node, % of a core: quiet / changes',
              'server CPU ms per change beyond quiet, per node',
              'main thread waiting for a CPU during changes, per node',
              'missing',
            ]
          : [
              'server',
              'streams',
              'open s',
              'RSS idle MiB',
              'RSS peak MiB',
              `DB reads/s idle (${opts.backups} → ${opts.streams} streams)`,
              'DB reads per change (same)',
              'delay p50 ms',
              'delay p99 ms',
              'delay max ms',
              'change request p50 / p99 ms',
              'server CPU, % of a core: quiet / changes',
              'server main thread waiting for a CPU during changes',
              'missing',
            ],
        rows,
      },
    ],
    verdicts,
    notes,
    chart: {
      panels: [
        {
          title: `P4 — ${streamsText} open event streams${multi ? ` over ${opts.nodes} nodes` : ''}: server peak RSS (lower is better)`,
          subtitle: `median of ${opts.rounds} rounds; dashed line = target`,
          unit: 'MiB',
          series: ['peak RSS'],
          groups: groups((x) => [x.rssPeak / MiB]),
          target: { value: rssTarget, label: `target ≤ ${rssTarget} MiB` },
        },
        {
          title: `Status change → arrival on every stream${multi ? ', per node' : ''} (lower is better)`,
          subtitle: `${opts.backups} backups × 2 changes${multi ? ' through node A' : ''}; dashed line = p99 target`,
          unit: 'ms',
          series: ['p50', 'p99'],
          groups: groups((x) => [x.p50, x.p99]),
          target: { value: TARGET_P99_MS, label: `p99 target ≤ ${TARGET_P99_MS} ms` },
        },
      ],
    },
    raw: results,
  });
}

runWhenMain(import.meta.url, main);
