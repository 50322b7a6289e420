/* global fetch, AbortController, TextDecoderStream */
/**
 * P8 — a fleet on one node: N simulated backup hosts (each its own pro account, made by the harness) run the whole
 * cycle in a loop against Coffer for a measured window: create a slot (POST /api/backups), upload an archive of
 * 1 MiB (the direct upload), finalize, list (GET /api/backups), and watch the backup on its event stream until
 * READY. Reported: sustained cycles per second, p50/p99 of each step, server CPU per cycle and peak RSS per node.
 * Baseline in the same run: nginx (WebDAV PUT, one worker) accepting the same 1 MiB bodies from the same number of
 * concurrent clients. Target: cycles/s ≥ 0.5× nginx's PUT/s on sqlite+fs. On PostgreSQL the fleet also runs over
 * 2 nodes (two Coffer processes on one schema and one bucket, the hosts split between them): the scaling table.
 *
 * The pro plan allows one backup per 30 minutes per account: the harness moves the servers' clocks (all nodes by the
 * same amount) whenever a host's next create would otherwise be refused, and never so far that a slot still in
 * flight would pass its upload window (1 hour). A refusal (429, 409, stream cap) is not a cycle: counted apart.
 *
 *   node bench/p8-fleet.js [--hosts 64] [--duration 20] [--warmup 3] [--rounds 2] [--size-mib 1]
 *                          [--backends sqlite+fs,postgres+s3] [--nodes 1,2] (node counts for PostgreSQL backends)
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import {
  MiB,
  commandLine,
  cpuSecondsOf,
  list,
  log,
  logFile,
  median,
  options,
  percentile,
  requireBuild,
  round,
  runWhenMain,
  sampleRss,
  sleep,
  tempDir,
} from './lib/common.js';
import { accounts, api, finalizeBody, pgAvailable, prepareBackend, startCoffer } from './lib/coffer.js';
import { startNginx } from './lib/nginx.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';

export const TARGET = 0.5;
const PRO_INTERVAL_MS = 30 * 60_000;
/**
 * The servers' upload window (COFFER_UPLOAD_WINDOW, default 1 hour), raised so the moved clock never expires a slot of
 * a host that is a few cycles behind the others: with 1 hour, no host could start a second cycle past a slow one.
 */
const UPLOAD_WINDOW = '24h';
const UPLOAD_WINDOW_MS = 24 * 60 * 60_000;
/** A create is asked for this long after the cadence allows it; an advance stays this far from a slot's expiry. */
const CADENCE_SLACK_MS = 1000;
const EXPIRY_SAFETY_MS = 5 * 60_000;
const EPOCH_SLACK_MS = 5 * 60_000;
const STEPS = ['slot', 'upload', 'finalize', 'list', 'watch', 'cycle'];
const STEP_LABELS = {
  slot: 'slot',
  upload: 'upload',
  finalize: 'finalize',
  list: 'list',
  watch: 'finalize sent → READY on the stream',
  cycle: 'whole cycle',
};
const NODE_NAMES = 'ABCDEFGH';

/**
 * The servers' clock as the fleet moves it. `confirmed` is what every node has applied (cadence checks use it, so a
 * create is never sent early); `pending` includes an advance still on its way (a slot's creation time is recorded
 * with it, an upper bound). An advance that would take the oldest slot in flight within EXPIRY_SAFETY_MS of its
 * upload window waits until that slot is finalized.
 */
function fleetClock(nodes) {
  let confirmed = 0;
  let pending = 0;
  let chain = Promise.resolve();
  const inFlight = new Map();
  let waiters = [];
  const clock = {
    advances: 0,
    confirmedNow: () => Date.now() + confirmed,
    pendingNow: () => Date.now() + pending,
    begin(host) {
      inFlight.set(host, clock.confirmedNow());
    },
    end(host) {
      inFlight.delete(host);
      const woken = waiters;
      waiters = [];
      for (const wake of woken) wake();
    },
    /**
     * Moves the clock to where a host whose last backup was created at `lastCreate` (server time) may create again,
     * unless that would bring a slot in flight near its expiry; returns whether it is (or will be) there.
     */
    request(lastCreate) {
      const target = lastCreate + PRO_INTERVAL_MS + CADENCE_SLACK_MS;
      if (clock.pendingNow() >= target) return true;
      if (target + EXPIRY_SAFETY_MS > Math.min(...inFlight.values()) + UPLOAD_WINDOW_MS) return false;
      chain = chain.then(async () => {
        const short = target - clock.confirmedNow();
        if (short <= 0) return;
        // Past the target by EPOCH_SLACK_MS when the slots in flight leave room: the advance then also serves every host
        // that created after this one (seconds of real time), not only this one.
        const roomy = clock.confirmedNow() + short + EPOCH_SLACK_MS + EXPIRY_SAFETY_MS <= Math.min(...inFlight.values()) + UPLOAD_WINDOW_MS;
        const need = roomy ? short + EPOCH_SLACK_MS : short;
        pending += need;
        await Promise.all(nodes.map((node) => node.advance(need)));
        confirmed += need;
        clock.advances += 1;
      });
      return true;
    },
    /** Resolves once the cadence allows a host whose last backup was created at `lastCreate` (server time). */
    async allow(lastCreate) {
      while (clock.confirmedNow() < lastCreate + PRO_INTERVAL_MS + CADENCE_SLACK_MS) {
        if (!clock.request(lastCreate)) await new Promise((resolve) => waiters.push(resolve));
        await chain;
      }
    },
  };
  return clock;
}

/** Follows a backup's event stream (as `coffer watch` does: fetch + eventsource-parser); `ready` resolves at READY. */
function watchUntilReady(url, apiKey) {
  const controller = new AbortController();
  const ready = (async () => {
    const response = await fetch(url, {
      headers: { authorization: `Bearer ${apiKey}`, accept: 'text/event-stream' },
      signal: controller.signal,
    });
    if (response.status !== 200) throw Object.assign(new Error(`events answered ${response.status}`), { status: response.status });
    const reader = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) throw new Error('the event stream ended before READY');
        if (value.event === 'backup.stream.error') throw Object.assign(new Error(`stream refused: ${value.data}`), { refusal: 'stream' });
        if (value.event === 'backup.status' && /"status":"READY"/.test(value.data)) return performance.now();
      }
    } finally {
      controller.abort();
    }
  })();
  // Settled either way, so a stream that fails before the host awaits it is not an unhandled rejection.
  return {
    settled: ready.then(
      (at) => ({ at }),
      (error) => ({ error }),
    ),
    abort: () => controller.abort(),
  };
}

/**
 * Runs the fleet: every host loops over the cycle until the window ends (warm-up, then `durationS` measured).
 * Cycles that end inside the measured window count; their step times are the samples. Per node: CPU seconds and
 * peak RSS over the measured window.
 */
async function runFleet(nodes, hosts, { body, warmupS, durationS }) {
  const clock = fleetClock(nodes);
  const samples = Object.fromEntries(STEPS.map((step) => [step, []]));
  const cyclesPerNode = nodes.map(() => 0);
  const refusals = { cadence: 0, inProgress: 0, stream: 0 };
  const errors = [];
  let measureFrom = Infinity;
  let measureTo = Infinity;
  let stopping = false;

  const clockWaits = [];
  const cycle = async (host) => {
    const waitFrom = performance.now();
    await clock.allow(host.lastCreate);
    const t0 = performance.now();
    if (t0 >= measureFrom && t0 <= measureTo) clockWaits.push(t0 - waitFrom);
    clock.begin(host);
    let stream = null;
    let id = null;
    try {
      const created = await host.call('POST', '/api/backups');
      if (created.status === 429) {
        refusals.cadence += 1;
        host.lastCreate = clock.pendingNow();
        return;
      }
      if (created.status === 409) {
        refusals.inProgress += 1;
        const stale = created.body?.details?.backupId;
        if (stale) await host.call('DELETE', `/api/backups/${stale}`);
        return;
      }
      if (created.status !== 201) throw new Error(`create answered ${created.status} ${JSON.stringify(created.body).slice(0, 200)}`);
      host.lastCreate = clock.pendingNow();
      id = created.body.backupId;
      const t1 = performance.now();
      // Opened as soon as the slot exists, as a host following its backup would; it runs beside the upload.
      stream = watchUntilReady(`${host.url}/api/backups/${id}/events`, host.apiKey);
      await host.call('POST', `/api/backups/upload?backupId=${id}`, {
        body,
        headers: { 'content-type': 'application/octet-stream' },
        expect: 201,
      });
      const t2 = performance.now();
      await host.call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(body.length), expect: 200 });
      const t3 = performance.now();
      clock.end(host);
      // Asked now, the advance for this host's next create is usually done before it needs it.
      clock.request(host.lastCreate);
      await host.call('GET', '/api/backups', { expect: 200 });
      const t4 = performance.now();
      const watched = await stream.settled;
      if (watched.error) throw watched.error;
      const t5 = Math.max(t4, watched.at);
      if (t5 >= measureFrom && t5 <= measureTo) {
        samples.slot.push(t1 - t0);
        samples.upload.push(t2 - t1);
        samples.finalize.push(t3 - t2);
        samples.list.push(t4 - t3);
        samples.watch.push(watched.at - t2);
        samples.cycle.push(t5 - t0);
        cyclesPerNode[host.node] += 1;
      }
    } catch (error) {
      stream?.abort();
      if (error.refusal === 'stream') refusals.stream += 1;
      else errors.push(error.message);
      if (errors.length > 20) throw new Error(`the fleet fails: ${errors.slice(0, 3).join('; ')}`);
      if (id) await host.call('DELETE', `/api/backups/${id}`).catch(() => undefined);
      await sleep(50);
    } finally {
      clock.end(host);
    }
  };

  const loops = hosts.map(async (host) => {
    while (!stopping) await cycle(host);
  });
  let failure = null;
  const failed = Promise.all(loops).catch((error) => (failure = error));
  await Promise.race([sleep(warmupS * 1000), failed]);
  const samplers = nodes.map((node) => sampleRss(node.pid, 100));
  const cpu0 = nodes.map((node) => cpuSecondsOf(node.pid));
  measureFrom = performance.now();
  await Promise.race([sleep(durationS * 1000), failed]);
  measureTo = performance.now();
  const cpu = nodes.map((node, i) => cpuSecondsOf(node.pid) - cpu0[i]);
  const rssPeak = samplers.map((sampler) => sampler.stop().peak);
  stopping = true;
  await Promise.all(loops).catch(() => undefined);
  if (failure) throw failure;
  const seconds = (measureTo - measureFrom) / 1000;
  const cycles = cyclesPerNode.reduce((a, b) => a + b, 0);
  return {
    seconds,
    cycles,
    cyclesPerSecond: cycles / seconds,
    steps: Object.fromEntries(STEPS.map((step) => [step, { p50: percentile(samples[step], 50), p99: percentile(samples[step], 99) }])),
    cpuMsPerCycle: (cpu.reduce((a, b) => a + b, 0) * 1000) / cycles,
    nodes: nodes.map((_, i) => ({
      cycles: cyclesPerNode[i],
      cpuSeconds: cpu[i],
      cpuMsPerCycle: (cpu[i] * 1000) / cyclesPerNode[i],
      rssPeak: rssPeak[i],
    })),
    refusals,
    errors: errors.length,
    errorSamples: errors.slice(0, 3),
    clockAdvances: clock.advances,
    clockWaitP99: percentile(clockWaits, 99),
  };
}

/** The baseline: `clients` concurrent clients PUT the same body to nginx (WebDAV), each to a file of its own. */
async function runNginx(nginx, clients, { body, warmupS, durationS }) {
  const latencies = [];
  let measureFrom = Infinity;
  let measureTo = Infinity;
  let stopping = false;
  let puts = 0;
  const loops = Array.from({ length: clients }, async (_, i) => {
    while (!stopping) {
      const t0 = performance.now();
      const response = await fetch(`${nginx.url}/fleet/host-${i}.bin`, {
        method: 'PUT',
        body,
        headers: { 'content-type': 'application/octet-stream' },
      });
      await response.arrayBuffer();
      if (response.status !== 201 && response.status !== 204) throw new Error(`nginx PUT answered ${response.status}`);
      const t1 = performance.now();
      if (t1 >= measureFrom && t1 <= measureTo) {
        puts += 1;
        latencies.push(t1 - t0);
      }
    }
  });
  let failure = null;
  const failed = Promise.all(loops).catch((error) => (failure = error));
  const pids = [nginx.pid, nginx.workerPid].filter(Boolean);
  await Promise.race([sleep(warmupS * 1000), failed]);
  const sampler = sampleRss(nginx.workerPid ?? nginx.pid, 100);
  const cpu0 = pids.map((pid) => cpuSecondsOf(pid));
  measureFrom = performance.now();
  await Promise.race([sleep(durationS * 1000), failed]);
  measureTo = performance.now();
  const cpu = pids.reduce((sum, pid, i) => sum + cpuSecondsOf(pid) - cpu0[i], 0);
  const rssPeak = sampler.stop().peak;
  stopping = true;
  await Promise.all(loops).catch(() => undefined);
  if (failure) throw failure;
  const seconds = (measureTo - measureFrom) / 1000;
  return {
    seconds,
    puts,
    putsPerSecond: puts / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpuMsPerPut: (cpu * 1000) / puts,
    rssPeak,
  };
}

/** One fleet run on a fresh backend: `nodeCount` Coffer processes, the hosts split over them (host i → node i mod n). */
async function fleetOn(backend, nodeCount, settings) {
  const prepared = await prepareBackend(backend);
  const nodes = [];
  try {
    // Every event stream comes from this one process (one address): room for one per host.
    const env = { COFFER_SSE_MAX_PER_ADDRESS: String(Math.max(500, settings.hosts * 2)), COFFER_UPLOAD_WINDOW: UPLOAD_WINDOW };
    // One after the other: the first applies the migrations.
    for (let i = 0; i < nodeCount; i++) {
      nodes.push(
        await startCoffer(prepared, {
          env,
          logFile: logFile(`p8-fleet-coffer-${backend}${nodeCount > 1 ? `-node-${NODE_NAMES[i]}` : ''}.log`),
        }),
      );
    }
    const made = await accounts(nodes[0], settings.hosts);
    const hosts = made.map((account, i) => {
      const node = i % nodeCount;
      return { ...account, node, url: nodes[node].url, call: api(nodes[node].url, account.apiKey), lastCreate: -Infinity };
    });
    return await runFleet(nodes, hosts, settings);
  } finally {
    for (const node of [...nodes].reverse()) await node.stop();
    await prepared.cleanup();
  }
}

export async function main() {
  const opts = options({ hosts: 64, duration: 20, warmup: 3, rounds: 2, 'size-mib': 1, backends: 'sqlite+fs,postgres+s3', nodes: '1,2' });
  requireBuild();
  const started = Date.now();
  const nodeCounts = list(opts.nodes).map(Number);
  if (nodeCounts.some((n) => !Number.isInteger(n) || n < 1 || n > NODE_NAMES.length))
    throw new Error(`--nodes takes node counts 1 to ${NODE_NAMES.length}, got ${opts.nodes}`);
  const hasPg = await pgAvailable();
  const notes = [];
  const configs = [];
  for (const backend of list(opts.backends)) {
    if (backend.startsWith('postgres')) {
      if (!hasPg) notes.push(`${backend}: skipped, PostgreSQL is not reachable`);
      else for (const nodes of nodeCounts) configs.push({ backend, nodes });
    } else {
      // Several nodes share their metadata only through PostgreSQL.
      configs.push({ backend, nodes: 1 });
    }
  }
  const key = (config) => `${config.backend}${config.nodes > 1 ? ` × ${config.nodes} nodes` : ''}`;
  const body = crypto.randomBytes(Math.round(opts['size-mib'] * MiB));
  const settings = { hosts: opts.hosts, body, warmupS: opts.warmup, durationS: opts.duration };
  const davRoot = tempDir('coffer-bench-p8-dav-');
  const results = { nginx: [] };
  let nginx = null;
  try {
    nginx = await startNginx(null, {
      site: {
        server: `root ${davRoot};\n    location / {\n      dav_methods PUT;\n      create_full_put_path on;\n      client_max_body_size ${Math.ceil(opts['size-mib']) + 1}m;\n    }`,
      },
    });
    for (let r = 0; r < opts.rounds; r++) {
      // Interleaved: nginx first in even rounds, last in odd ones.
      const order = r % 2 === 0 ? ['nginx', ...configs] : [...configs, 'nginx'];
      for (const what of order) {
        if (what === 'nginx') {
          const run = await runNginx(nginx, opts.hosts, settings);
          log(
            `P8 nginx round ${r + 1}: ${run.puts} PUTs, ${run.putsPerSecond.toFixed(1)} PUT/s, p99 ${run.p99.toFixed(1)} ms, CPU ${run.cpuMsPerPut.toFixed(2)} ms per PUT`,
          );
          results.nginx.push(run);
        } else {
          const run = await fleetOn(what.backend, what.nodes, settings);
          const { cadence, inProgress, stream } = run.refusals;
          log(
            `P8 ${key(what)} round ${r + 1}: ${run.cycles} cycles, ${run.cyclesPerSecond.toFixed(1)} cycles/s, cycle p99 ${run.steps.cycle.p99.toFixed(1)} ms, ` +
              `CPU ${run.cpuMsPerCycle.toFixed(2)} ms per cycle, refused ${cadence}/${inProgress}/${stream}, errors ${run.errors}${run.errors ? ` (${run.errorSamples.join('; ')})` : ''}`,
          );
          (results[key(what)] ??= []).push(run);
        }
      }
    }
  } finally {
    await nginx?.stop();
    fs.rmSync(davRoot, { recursive: true, force: true });
  }

  const med = (runs, pick) => median(runs.map(pick));
  const base = {
    putsPerSecond: med(results.nginx, (x) => x.putsPerSecond),
    p50: med(results.nginx, (x) => x.p50),
    p99: med(results.nginx, (x) => x.p99),
    cpuMsPerPut: med(results.nginx, (x) => x.cpuMsPerPut),
    rssPeak: med(results.nginx, (x) => x.rssPeak),
  };
  const summary = configs.map((config) => {
    const runs = results[key(config)];
    const sum = (pick) => runs.reduce((n, x) => n + pick(x), 0);
    return {
      backend: config.backend,
      nodeCount: config.nodes,
      name: key(config),
      cyclesPerSecond: med(runs, (x) => x.cyclesPerSecond),
      steps: Object.fromEntries(
        STEPS.map((step) => [step, { p50: med(runs, (x) => x.steps[step].p50), p99: med(runs, (x) => x.steps[step].p99) }]),
      ),
      cpuMsPerCycle: med(runs, (x) => x.cpuMsPerCycle),
      nodeStats: Array.from({ length: config.nodes }, (_, i) => ({
        cpuMsPerCycle: med(runs, (x) => x.nodes[i].cpuMsPerCycle),
        rssPeak: Math.max(...runs.map((x) => x.nodes[i].rssPeak)),
        cycles: med(runs, (x) => x.nodes[i].cycles),
      })),
      refusals: {
        cadence: sum((x) => x.refusals.cadence),
        inProgress: sum((x) => x.refusals.inProgress),
        stream: sum((x) => x.refusals.stream),
      },
      errors: sum((x) => x.errors),
      clockAdvances: med(runs, (x) => x.clockAdvances),
      clockWaitP99: med(runs, (x) => x.clockWaitP99),
    };
  });
  const perNode = (s, format) => s.nodeStats.map(format).join(' / ');
  const ms = (v) => round(v, 1);
  const steps = (s) => STEPS.map((step) => `${ms(s.steps[step].p50)} / ${ms(s.steps[step].p99)}`);
  const refused = (s) => `${s.refusals.cadence} / ${s.refusals.inProgress} / ${s.refusals.stream}`;
  const fleetRows = summary.map((s) => [
    `Coffer ${s.name}`,
    round(s.cyclesPerSecond, 1),
    fmtRatio(ratio(s.cyclesPerSecond, base.putsPerSecond)),
    ...steps(s),
    `${round(s.cpuMsPerCycle, 2)}${s.nodeCount > 1 ? ` (${perNode(s, (n) => round(n.cpuMsPerCycle, 2))})` : ''}`,
    perNode(s, (n) => round(n.rssPeak / MiB, 0)),
    refused(s),
    s.errors,
  ]);
  fleetRows.push([
    'nginx WebDAV PUT (baseline)',
    round(base.putsPerSecond, 1),
    '1.00×',
    '—',
    `${ms(base.p50)} / ${ms(base.p99)}`,
    '—',
    '—',
    '—',
    `${ms(base.p50)} / ${ms(base.p99)}`,
    round(base.cpuMsPerPut, 2),
    round(base.rssPeak / MiB, 0),
    '—',
    0,
  ]);
  const scaling = summary.filter((s) => s.backend.startsWith('postgres'));
  const scalingRows = scaling.map((s) => {
    const one = scaling.find((x) => x.backend === s.backend && x.nodeCount === 1);
    return [
      s.backend,
      s.nodeCount,
      round(s.cyclesPerSecond, 1),
      one ? fmtRatio(ratio(s.cyclesPerSecond, one.cyclesPerSecond)) : 'n/a',
      ...STEPS.map((step) => ms(s.steps[step].p99)),
      perNode(s, (n) => round(n.cpuMsPerCycle, 2)),
      perNode(s, (n) => n.cycles),
      perNode(s, (n) => round(n.rssPeak / MiB, 0)),
    ];
  });

  const verdicts = [];
  for (const s of summary.filter((x) => x.nodeCount === 1)) {
    const r = ratio(s.cyclesPerSecond, base.putsPerSecond);
    const onTarget = s.backend === 'sqlite+fs';
    verdicts.push({
      what: onTarget
        ? `P8 ${s.backend}: fleet cycles/s ≥ ${TARGET}× nginx PUT/s`
        : `P8 ${s.backend}: fleet cycles/s vs nginx PUT/s (information)`,
      value: `${fmtRatio(r)} (${round(s.cyclesPerSecond, 1)} cycles/s vs ${round(base.putsPerSecond, 1)} PUT/s; refused ${refused(s)}, errors ${s.errors})`,
      target: onTarget ? `≥ ${TARGET}×, no refusals` : 'n/a (the target is defined for sqlite+fs)',
      met: onTarget ? r >= TARGET && s.refusals.cadence + s.refusals.inProgress + s.refusals.stream === 0 && s.errors === 0 : null,
    });
  }
  for (const s of scaling.filter((x) => x.nodeCount > 1)) {
    const one = scaling.find((x) => x.backend === s.backend && x.nodeCount === 1);
    verdicts.push({
      what: `P8 ${s.backend}: ${s.nodeCount} nodes vs 1 node (information)`,
      value: one
        ? `${fmtRatio(ratio(s.cyclesPerSecond, one.cyclesPerSecond))} cycles/s (${round(one.cyclesPerSecond, 1)} → ${round(s.cyclesPerSecond, 1)}), cycle p99 ${ms(one.steps.cycle.p99)} → ${ms(s.steps.cycle.p99)} ms`
        : `${round(s.cyclesPerSecond, 1)} cycles/s`,
      target: 'n/a',
      met: null,
    });
  }
  notes.push(
    `Each host is its own pro account (one backup per 30 minutes): the harness moves every node's clock by the same amount when a host's backup is finalized, to a few minutes past where its next create is allowed (so one advance serves every host that created meanwhile), never so far that a slot in flight nears its upload window (raised from 1 hour to ${UPLOAD_WINDOW}, so hosts a few cycles behind the others do not hold the clock back; it only sets the slots' expiresAt) (${summary.map((s) => `${s.name}: ${s.clockAdvances} advances per round, a host's wait for one before its create p99 ${ms(s.clockWaitP99)} ms`).join('; ')}). "refused" counts 429 (cadence) / 409 (upload in progress) / event streams over the cap; none of them is a cycle. Every finalized backup stays READY (pro retention: 90 days of server time), so each host's list grows by one entry per cycle.`,
    'Cycle: POST /api/backups → event stream opened at once (fetch + eventsource-parser, as `coffer watch` reads it) → direct upload of the archive → finalize → GET /api/backups → READY on the stream. "finalize sent → READY on the stream" runs from the finalize request to the READY frame on the stream opened at the start (it includes the finalize itself, as P4 measures its delay). Cycles that end inside the measured window count; cycles/s = those / the window.',
    "Server CPU is user + system time from /proc of the Coffer process(es) over the measured window, divided by the cycles completed (per node: its own hosts' cycles); PostgreSQL and s3rver are not counted. nginx: master + worker per PUT. All clients (the fleet, the nginx PUTs) run in this one Node process, sharing the machine's cores with the servers.",
    'nginx-light, one worker, `dav_methods PUT; create_full_put_path on;` — each client PUTs the same body to a file of its own (replaced each time), no authentication, no database.',
  );
  if (scaling.some((s) => s.nodeCount > 1)) {
    notes.push(
      'Several nodes: Coffer processes on one PostgreSQL schema and one bucket; host i talks only to node i mod n (its API calls and its event stream), as behind a sticky load balancer.',
    );
  }
  const duration = `${opts.duration} s measured after ${opts.warmup} s warm-up, median of ${opts.rounds} rounds`;
  return writeResult({
    id: 'p8',
    name: 'p8-fleet',
    title: 'P8 — a fleet on one node',
    target: `${opts.hosts} hosts running the whole backup cycle: cycles/s ≥ ${TARGET}× nginx's PUT/s of the same ${opts['size-mib']} MiB bodies (sqlite+fs); scaling 1 → 2 nodes on PostgreSQL`,
    command: commandLine('p8-fleet.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `${opts.hosts} hosts, ${opts['size-mib']} MiB archives, ${duration}; step times p50 / p99 ms`,
        columns: [
          'server',
          'cycles/s (nginx: PUT/s)',
          'ratio to nginx',
          ...STEPS.map((step) => STEP_LABELS[step]),
          'server CPU ms per cycle (per node)',
          'peak RSS MiB per node',
          'refused (429 / 409 / stream cap)',
          'errors',
        ],
        rows: fleetRows,
      },
      ...(scalingRows.length
        ? [
            {
              title: `Scale-out on PostgreSQL: ${opts.hosts} hosts split over the nodes; p99 ms per step`,
              columns: [
                'backend',
                'nodes',
                'cycles/s',
                'vs 1 node',
                ...STEPS.map((step) => `${STEP_LABELS[step]} p99`),
                'CPU ms per cycle per node',
                'cycles per node',
                'peak RSS MiB per node',
              ],
              rows: scalingRows,
            },
          ]
        : []),
    ],
    verdicts,
    notes,
    chart: {
      title: `P8 — ${opts.hosts} hosts: whole backup cycles per second vs nginx PUTs (higher is better)`,
      subtitle: `${duration}; ratio = cycles/s ÷ nginx PUT/s`,
      unit: '/s',
      series: ['cycles/s (nginx: PUT/s)'],
      groups: [
        ...summary.map((s) => ({
          label: `Coffer ${s.name}`,
          note: fmtRatio(ratio(s.cyclesPerSecond, base.putsPerSecond)),
          values: [s.cyclesPerSecond],
        })),
        { label: 'nginx WebDAV PUT', note: '', values: [base.putsPerSecond] },
      ],
    },
    raw: results,
  });
}

runWhenMain(import.meta.url, main);
