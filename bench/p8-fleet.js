/**
 * P8 — a fleet on one node: N simulated backup hosts (each its own pro account, made by the harness) run the whole
 * cycle in a loop against Coffer for a measured window: create a slot (POST /api/backups), upload an archive of
 * 1 MiB (the direct upload), finalize, list (GET /api/backups), and watch the backup on its event stream until
 * READY. Reported: sustained cycles per second, p50/p99 of each step, server CPU per cycle and peak RSS per node.
 * Baseline in the same run: nginx (WebDAV PUT, one worker) accepting the same 1 MiB bodies from the same number of
 * concurrent clients. Target: cycles/s ≥ 0.5× nginx's PUT/s on sqlite+fs. On PostgreSQL the fleet also runs over
 * 2 nodes (two Coffer processes on one schema and one bucket, the hosts split between them): the scaling table.
 * PostgreSQL's blobs go to a real S3, Ceph's RADOS Gateway (postgres+ceph), where Ceph is installed; else to s3rver.
 * On an S3 store the fleet runs twice in each round (issue 38): with today's direct upload (the bytes through Coffer,
 * presigned transfers off) and with the presigned upload (COFFER_S3_PRESIGNED=on, the gateway as the public endpoint:
 * start with the size, the body PUT to the store, complete). Targets on postgres+ceph: Coffer's CPU per cycle ≤ 5 ms
 * (presigned) and cycles/s (presigned) ≥ 2× cycles/s (direct, same run).
 *
 * The clients (the hosts, the nginx PUTs) run in a load generator of their own, bench/lib/fleet-gen.js, one process
 * that drives both servers in turn; its CPU per cycle (per PUT) is reported beside the servers'.
 *
 * The pro plan allows one backup per 30 minutes per account: the generator moves the servers' clocks (all nodes by the
 * same amount, through this process) whenever a host's next create would otherwise be refused, and never so far that a
 * slot still in flight would pass its upload window. A refusal (429, 409, stream cap) is not a cycle: counted apart.
 *
 *   node bench/p8-fleet.js [--hosts 64] [--duration 20] [--warmup 3] [--rounds 2] [--size-mib 1]
 *                          [--backends sqlite+fs,postgres+ceph] [--nodes 1,2] (node counts for PostgreSQL backends)
 *                          [--transfers direct,presigned] (upload paths on S3 stores; fs always runs direct)
 *                          [--profile /tmp/p8.cpuprofile] (CPU profile of the first round's first server, measured window)
 *                          [--profile-of 'postgres+ceph (presigned)'] (which configuration --profile profiles: its name)
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  BENCH_DIR,
  MiB,
  commandLine,
  cpuSecondsOf,
  list,
  log,
  logFile,
  median,
  options,
  requireBuild,
  round,
  runWhenMain,
  sampleRss,
  sleep,
  startChild,
  tempDir,
} from './lib/common.js';
import { accounts, cephInstalled, pgAvailable, prepareBackend, startCoffer } from './lib/coffer.js';
import { STEPS, UPLOAD_WINDOW } from './lib/fleet-gen.js';
import { startNginx } from './lib/nginx.js';
import { fmtRatio, ratio, writeResult } from './lib/report.js';

export const TARGET = 0.5;
/** Issue 38, postgres+ceph: Coffer's CPU per cycle with the presigned upload, and its cycles/s over the direct path's. */
export const CPU_TARGET_MS = 5;
export const PRESIGNED_SPEEDUP = 2;
const STEP_LABELS = {
  slot: 'slot',
  upload: 'upload',
  finalize: 'finalize',
  list: 'list',
  watch: 'finalize sent → READY on the stream',
  cycle: 'whole cycle',
};
const NODE_NAMES = 'ABCDEFGH';

/** The load generator (bench/lib/fleet-gen.js), its own process; it drives both the fleet and the nginx baseline. */
export async function startGenerator() {
  const child = await startChild(path.join(BENCH_DIR, 'lib', 'fleet-gen.js'), [], { logFile: logFile('p8-fleet-generator.log') });
  let nodes = [];
  let onFailure = () => undefined;
  child.on('message', (message) => {
    if (message?.advance !== undefined) {
      Promise.all(nodes.map((node) => node.advance(message.advance))).then(
        () => child.send({ cid: message.cid }),
        (error) => child.send({ cid: message.cid, error: error.message }),
      );
    } else if (message?.failure) {
      onFailure(new Error(message.failure));
    }
  });
  /**
   * One run: the generator's loops start (warm-up), then the measured window, marked in the generator and around
   * it here: the servers' CPU (/proc) and peak RSS, the generator's own CPU. `servers`: [{pid}] whose CPU counts.
   */
  const measure = async (start, { servers, clockNodes = [], warmupS, durationS, profile }) => {
    nodes = clockNodes;
    const failed = new Promise((_, reject) => (onFailure = reject));
    failed.catch(() => undefined);
    const during = (promise) => Promise.race([promise, failed]);
    await during(child.request(start));
    await during(sleep(warmupS * 1000));
    const samplers = servers.map((server) => sampleRss(server.rssPid ?? server.pid, 100));
    if (profile) await clockNodes[0].startProfile();
    const queries0 = clockNodes[0] ? (await clockNodes[0].stats()).queries : null;
    const cpu0 = servers.map((server) => server.pids.reduce((sum, pid) => sum + cpuSecondsOf(pid), 0));
    await during(child.request({ type: 'mark' }));
    await during(sleep(durationS * 1000));
    const cpu = servers.map((server, i) => server.pids.reduce((sum, pid) => sum + cpuSecondsOf(pid), 0) - cpu0[i]);
    const stopped = child.request({ type: 'stop' });
    if (profile) log(`server profile of node A (measured window): ${await clockNodes[0].stopProfile(profile)}`);
    const queries1 = clockNodes[0] ? (await clockNodes[0].stats()).queries : null;
    const rssPeak = samplers.map((sampler) => sampler.stop().peak);
    const result = await stopped;
    onFailure = () => undefined;
    return {
      ...result,
      cpu,
      rssPeak,
      queries: queries0 && Object.fromEntries(Object.keys(queries1).map((k) => [k, queries1[k] - queries0[k]])),
    };
  };
  return { pid: child.pid, measure, stop: () => child.stop() };
}

/**
 * Runs the fleet: every host loops over the cycle until the window ends (warm-up, then `durationS` measured).
 * Cycles that end inside the measured window count; their step times are the samples. Per node: CPU seconds and
 * peak RSS over the measured window; the generator's CPU per cycle beside them.
 */
export async function runFleet(generator, nodes, hosts, { bodyFile, warmupS, durationS, profile, transfer = 'direct' }) {
  const servers = nodes.map((node) => ({ pid: node.pid, pids: [node.pid] }));
  const run = await generator.measure(
    { type: 'start', mode: 'fleet', hosts, bodyFile, nodeCount: nodes.length, transfer },
    { servers, clockNodes: nodes, warmupS, durationS, profile },
  );
  const { seconds, cycles, cpu } = run;
  return {
    seconds,
    cycles,
    cyclesPerSecond: cycles / seconds,
    steps: run.steps,
    cpuMsPerCycle: (cpu.reduce((a, b) => a + b, 0) * 1000) / cycles,
    clientCpuMsPerCycle: run.clientCpuMs / cycles,
    nodes: nodes.map((_, i) => ({
      cycles: run.cyclesPerNode[i],
      cpuSeconds: cpu[i],
      cpuMsPerCycle: (cpu[i] * 1000) / run.cyclesPerNode[i],
      rssPeak: run.rssPeak[i],
    })),
    refusals: run.refusals,
    errors: run.errors,
    errorSamples: run.errorSamples,
    queriesPerCycle: Object.fromEntries(Object.entries(run.queries).map(([k, v]) => [k, round(v / run.cyclesPerNode[0], 2)])),
    clockAdvances: run.clockAdvances,
    clockWaitP99: run.clockWaitP99,
  };
}

/** The baseline: `clients` concurrent clients PUT the same body to nginx (WebDAV), each to a file of its own. */
async function runNginx(generator, nginx, clients, { bodyFile, warmupS, durationS }) {
  const server = { pid: nginx.pid, rssPid: nginx.workerPid ?? nginx.pid, pids: [nginx.pid, nginx.workerPid].filter(Boolean) };
  const run = await generator.measure(
    { type: 'start', mode: 'nginx', url: nginx.url, clients, bodyFile },
    { servers: [server], warmupS, durationS },
  );
  const { seconds, puts } = run;
  return {
    seconds,
    puts,
    putsPerSecond: puts / seconds,
    p50: run.p50,
    p99: run.p99,
    cpuMsPerPut: (run.cpu[0] * 1000) / puts,
    clientCpuMsPerPut: run.clientCpuMs / puts,
    rssPeak: run.rssPeak[0],
  };
}

/** One fleet run on a fresh backend: `nodeCount` Coffer processes, the hosts split over them (host i → node i mod n). */
export async function fleetOn(generator, backend, nodeCount, settings) {
  const prepared = await prepareBackend(backend);
  const nodes = [];
  try {
    // Every event stream comes from this one process (one address): room for one per host.
    const env = { COFFER_SSE_MAX_PER_ADDRESS: String(Math.max(500, settings.hosts * 2)), COFFER_UPLOAD_WINDOW: UPLOAD_WINDOW };
    // The presigned upload (issue 38): the load generator reaches the gateway where Coffer does.
    if (settings.transfer === 'presigned') {
      Object.assign(env, { COFFER_S3_PRESIGNED: 'on', COFFER_S3_PUBLIC_ENDPOINT: prepared.env.COFFER_S3_ENDPOINT });
    }
    // One after the other: the first applies the migrations.
    for (let i = 0; i < nodeCount; i++) {
      nodes.push(
        await startCoffer(prepared, {
          env,
          logFile: logFile(
            `p8-fleet-coffer-${backend}${settings.transfer === 'presigned' ? '-presigned' : ''}${nodeCount > 1 ? `-node-${NODE_NAMES[i]}` : ''}.log`,
          ),
        }),
      );
    }
    const made = await accounts(nodes[0], settings.hosts);
    const hosts = made.map((account, i) => {
      const node = i % nodeCount;
      return { apiKey: account.apiKey, node, url: nodes[node].url };
    });
    return await runFleet(generator, nodes, hosts, settings);
  } finally {
    for (const node of [...nodes].reverse()) await node.stop();
    await prepared.cleanup();
  }
}

export async function main() {
  const opts = options({
    hosts: 64,
    duration: 20,
    warmup: 3,
    rounds: 2,
    'size-mib': 1,
    backends: '',
    nodes: '1,2',
    transfers: 'direct,presigned',
    profile: '',
    'profile-of': '',
  });
  requireBuild();
  const started = Date.now();
  const nodeCounts = list(opts.nodes).map(Number);
  if (nodeCounts.some((n) => !Number.isInteger(n) || n < 1 || n > NODE_NAMES.length))
    throw new Error(`--nodes takes node counts 1 to ${NODE_NAMES.length}, got ${opts.nodes}`);
  const hasPg = await pgAvailable();
  const notes = [];
  if (!opts.backends) {
    const ceph = cephInstalled();
    opts.backends = ceph ? 'sqlite+fs,postgres+ceph' : 'sqlite+fs,postgres+s3';
    if (!ceph)
      notes.push('postgres+ceph: Ceph is not installed (apt-get install ceph-mon ceph-osd radosgw ceph-common); s3rver stands in for S3');
  }
  const transfers = list(opts.transfers);
  if (transfers.length === 0 || transfers.some((t) => !['direct', 'presigned'].includes(t)))
    throw new Error(`--transfers takes direct and/or presigned, got ${opts.transfers}`);
  const configs = [];
  for (const backend of list(opts.backends)) {
    // The presigned upload exists on S3 stores only; fs runs the direct path whatever --transfers says.
    const paths = backend.endsWith('+fs') ? ['direct'] : transfers;
    if (backend.startsWith('postgres')) {
      if (!hasPg) notes.push(`${backend}: skipped, PostgreSQL is not reachable`);
      else for (const transfer of paths) for (const nodes of nodeCounts) configs.push({ backend, nodes, transfer });
    } else {
      // Several nodes share their metadata only through PostgreSQL.
      for (const transfer of paths) configs.push({ backend, nodes: 1, transfer });
    }
  }
  const key = (config) =>
    `${config.backend}${config.transfer === 'presigned' ? ' (presigned)' : ''}${config.nodes > 1 ? ` × ${config.nodes} nodes` : ''}`;
  const profiled = opts['profile-of'] ? configs.find((config) => key(config) === opts['profile-of']) : configs[0];
  if (opts.profile && !profiled) throw new Error(`--profile-of names no configuration (known: ${configs.map(key).join(', ')})`);
  const davRoot = tempDir('coffer-bench-p8-dav-');
  // The same random body for every request of both servers; the generator reads it from this file.
  const bodyFile = path.join(davRoot, 'body.bin');
  fs.writeFileSync(bodyFile, crypto.randomBytes(Math.round(opts['size-mib'] * MiB)));
  const settings = { hosts: opts.hosts, bodyFile, warmupS: opts.warmup, durationS: opts.duration };
  const results = { nginx: [] };
  let nginx = null;
  let generator = null;
  try {
    generator = await startGenerator();
    nginx = await startNginx(null, {
      site: {
        server: `root ${davRoot}/dav;\n    location / {\n      dav_methods PUT;\n      create_full_put_path on;\n      client_max_body_size ${Math.ceil(opts['size-mib']) + 1}m;\n    }`,
      },
    });
    for (let r = 0; r < opts.rounds; r++) {
      // Interleaved: nginx first in even rounds, last in odd ones.
      const order = r % 2 === 0 ? ['nginx', ...configs] : [...configs, 'nginx'];
      for (const what of order) {
        if (what === 'nginx') {
          const run = await runNginx(generator, nginx, opts.hosts, settings);
          log(
            `P8 nginx round ${r + 1}: ${run.puts} PUTs, ${run.putsPerSecond.toFixed(1)} PUT/s, p99 ${run.p99.toFixed(1)} ms, CPU ${run.cpuMsPerPut.toFixed(2)} ms per PUT (generator ${run.clientCpuMsPerPut.toFixed(2)} ms)`,
          );
          results.nginx.push(run);
        } else {
          const profile = opts.profile && r === 0 && what === profiled ? opts.profile : null;
          const run = await fleetOn(generator, what.backend, what.nodes, { ...settings, profile, transfer: what.transfer });
          const { cadence, inProgress, stream } = run.refusals;
          log(
            `P8 ${key(what)} round ${r + 1}: ${run.cycles} cycles, ${run.cyclesPerSecond.toFixed(1)} cycles/s, cycle p99 ${run.steps.cycle.p99.toFixed(1)} ms, ` +
              `CPU ${run.cpuMsPerCycle.toFixed(2)} ms per cycle (generator ${run.clientCpuMsPerCycle.toFixed(2)} ms; node A statements per cycle ${JSON.stringify(run.queriesPerCycle)}), refused ${cadence}/${inProgress}/${stream}, errors ${run.errors}${run.errors ? ` (${run.errorSamples.join('; ')})` : ''}`,
          );
          (results[key(what)] ??= []).push(run);
        }
      }
    }
  } finally {
    await generator?.stop();
    await nginx?.stop();
    fs.rmSync(davRoot, { recursive: true, force: true });
  }

  const med = (runs, pick) => median(runs.map(pick));
  const base = {
    putsPerSecond: med(results.nginx, (x) => x.putsPerSecond),
    p50: med(results.nginx, (x) => x.p50),
    p99: med(results.nginx, (x) => x.p99),
    cpuMsPerPut: med(results.nginx, (x) => x.cpuMsPerPut),
    clientCpuMsPerPut: med(results.nginx, (x) => x.clientCpuMsPerPut),
    rssPeak: med(results.nginx, (x) => x.rssPeak),
  };
  const summary = configs.map((config) => {
    const runs = results[key(config)];
    const sum = (pick) => runs.reduce((n, x) => n + pick(x), 0);
    return {
      backend: config.backend,
      transfer: config.transfer,
      nodeCount: config.nodes,
      name: key(config),
      cyclesPerSecond: med(runs, (x) => x.cyclesPerSecond),
      steps: Object.fromEntries(
        STEPS.map((step) => [step, { p50: med(runs, (x) => x.steps[step].p50), p99: med(runs, (x) => x.steps[step].p99) }]),
      ),
      cpuMsPerCycle: med(runs, (x) => x.cpuMsPerCycle),
      clientCpuMsPerCycle: med(runs, (x) => x.clientCpuMsPerCycle),
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
    round(s.clientCpuMsPerCycle, 2),
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
    round(base.clientCpuMsPerPut, 2),
    round(base.rssPeak / MiB, 0),
    '—',
    0,
  ]);
  const scaling = summary.filter((s) => s.backend.startsWith('postgres'));
  const oneNode = (s) => scaling.find((x) => x.backend === s.backend && x.transfer === s.transfer && x.nodeCount === 1);
  const scalingRows = scaling.map((s) => {
    const one = oneNode(s);
    return [
      `${s.backend}${s.transfer === 'presigned' ? ' (presigned)' : ''}`,
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
        : `P8 ${s.name}: fleet cycles/s vs nginx PUT/s (information)`,
      value: `${fmtRatio(r)} (${round(s.cyclesPerSecond, 1)} cycles/s vs ${round(base.putsPerSecond, 1)} PUT/s; refused ${refused(s)}, errors ${s.errors})`,
      target: onTarget ? `≥ ${TARGET}×, no refusals` : 'n/a (the target is defined for sqlite+fs)',
      met: onTarget ? r >= TARGET && s.refusals.cadence + s.refusals.inProgress + s.refusals.stream === 0 && s.errors === 0 : null,
    });
  }
  for (const s of scaling.filter((x) => x.nodeCount > 1)) {
    const one = oneNode(s);
    verdicts.push({
      what: `P8 ${s.name.replace(/ × \d+ nodes$/, '')}: ${s.nodeCount} nodes vs 1 node (information)`,
      value: one
        ? `${fmtRatio(ratio(s.cyclesPerSecond, one.cyclesPerSecond))} cycles/s (${round(one.cyclesPerSecond, 1)} → ${round(s.cyclesPerSecond, 1)}), cycle p99 ${ms(one.steps.cycle.p99)} → ${ms(s.steps.cycle.p99)} ms`
        : `${round(s.cyclesPerSecond, 1)} cycles/s`,
      target: 'n/a',
      met: null,
    });
  }
  // Issue 38: the presigned upload on an S3 store against today's direct path, both measured in this run.
  for (const presigned of summary.filter((x) => x.transfer === 'presigned' && x.nodeCount === 1)) {
    const direct = summary.find((x) => x.backend === presigned.backend && x.transfer === 'direct' && x.nodeCount === 1);
    const clean = (s) => s.refusals.cadence + s.refusals.inProgress + s.refusals.stream === 0 && s.errors === 0;
    verdicts.push({
      what: `P8 ${presigned.backend}: Coffer CPU per cycle ≤ ${CPU_TARGET_MS} ms`,
      value: `${round(presigned.cpuMsPerCycle, 2)} ms (presigned)${direct ? `; direct path, same run: ${round(direct.cpuMsPerCycle, 2)} ms` : ''}`,
      target: `≤ ${CPU_TARGET_MS} ms, no errors`,
      met: presigned.cpuMsPerCycle <= CPU_TARGET_MS && presigned.errors === 0,
    });
    if (direct) {
      const r = ratio(presigned.cyclesPerSecond, direct.cyclesPerSecond);
      verdicts.push({
        what: `P8 ${presigned.backend}: cycles/s (presigned) ≥ ${PRESIGNED_SPEEDUP}× cycles/s (direct, same run)`,
        value: `${fmtRatio(r)} (${round(presigned.cyclesPerSecond, 1)} vs ${round(direct.cyclesPerSecond, 1)} cycles/s; refused ${refused(presigned)}, errors ${presigned.errors})`,
        target: `≥ ${PRESIGNED_SPEEDUP}×, no refusals`,
        met: r >= PRESIGNED_SPEEDUP && clean(presigned) && clean(direct),
      });
    }
  }
  notes.push(
    `Each host is its own pro account (one backup per 30 minutes): the load generator moves every node's clock (through the harness) by the same amount when a host's backup is finalized, to a few minutes past where its next create is allowed (so one advance serves every host that created meanwhile), never so far that a slot in flight nears its upload window (raised from 1 hour to ${UPLOAD_WINDOW}, so hosts a few cycles behind the others do not hold the clock back; it only sets the slots' expiresAt) (${summary.map((s) => `${s.name}: ${s.clockAdvances} advances per round, a host's wait for one before its create p99 ${ms(s.clockWaitP99)} ms`).join('; ')}). "refused" counts 429 (cadence) / 409 (upload in progress) / event streams over the cap; none of them is a cycle. Every finalized backup stays READY (pro retention: 90 days of server time), so each host's list grows by one entry per cycle.`,
    'Cycle: POST /api/backups → event stream opened at once (fetch + eventsource-parser, as `coffer watch` reads it) → direct upload of the archive (node:http on a kept-alive connection, the same call that PUTs the body to nginx) → finalize → GET /api/backups → READY on the stream. "(presigned)": the upload step is instead s3-presigned.start with the size → PUT of the body to the presigned URL on the gateway (node:http, kept-alive, exactly the signed headers) → s3-presigned.complete (Coffer HEADs the object), with COFFER_S3_PRESIGNED=on; the rows without it run today\'s direct path, presigned transfers off, in the same rounds. "finalize sent → READY on the stream" runs from the finalize request to the READY frame on the stream opened at the start (it includes the finalize itself, as P4 measures its delay). Cycles that end inside the measured window count; cycles/s = those / the window.',
    "Server CPU is user + system time from /proc of the Coffer process(es) over the measured window, divided by the cycles completed (per node: its own hosts' cycles); PostgreSQL and the S3 server (Ceph's daemons, s3rver) are not counted. nginx: master + worker per PUT. All clients (the fleet, the nginx PUTs) run in one load generator process of their own (bench/lib/fleet-gen.js, apart from the harness's bookkeeping), the same one for both servers, sharing the machine's cores with them; its CPU (process.cpuUsage over the window) per cycle or PUT is the load generator column.",
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
          'load generator CPU ms per cycle (nginx: per PUT)',
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
