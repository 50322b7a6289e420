/* global process, fetch, AbortController, TextDecoderStream */
/**
 * The P8 load generator, a process of its own (bench/p8-fleet.js starts it with startChild): the simulated hosts
 * running the whole backup cycle against Coffer, or the same number of clients PUTting the same body to nginx.
 * Apart from the harness, so the clients never share an event loop with its bookkeeping (RSS sampling, IPC with the
 * servers, the clock), and so their own CPU can be reported. One generator drives both Coffer and nginx, in turn.
 *
 * Requests from the harness (serveParent): `start` (begin the loops: warm-up), `mark` (the measured window starts now),
 * `stop` (the window ends now; the loops finish their cycle, then the results come back). The fleet's clock lives
 * here; moving the servers' clocks is asked of the harness: {advance: ms, cid} → {cid} once every node applied it.
 * A fleet that fails (too many errors) says so at once: {failure: message}.
 */
import fs from 'node:fs';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { api, finalizeBody } from './coffer.js';
import { percentile, serveParent, sleep } from './common.js';
import { offersPresignedUpload, presignedUpload } from './presigned.js';

export const PRO_INTERVAL_MS = 30 * 60_000;
/**
 * The servers' upload window (COFFER_UPLOAD_WINDOW, default 1 hour), raised so the moved clock never expires a slot of
 * a host that is a few cycles behind the others: with 1 hour, no host could start a second cycle past a slow one.
 */
export const UPLOAD_WINDOW = '24h';
const UPLOAD_WINDOW_MS = 24 * 60 * 60_000;
/** A create is asked for this long after the cadence allows it; an advance stays this far from a slot's expiry. */
const CADENCE_SLACK_MS = 1000;
const EXPIRY_SAFETY_MS = 5 * 60_000;
const EPOCH_SLACK_MS = 5 * 60_000;
export const STEPS = ['slot', 'upload', 'finalize', 'list', 'watch', 'cycle'];

let nextCid = 1;
const asked = new Map();
/** Asks the harness to move every node's clock by `ms`; resolves once all of them did. */
function advanceNodes(ms) {
  const cid = nextCid++;
  return new Promise((resolve, reject) => {
    asked.set(cid, { resolve, reject });
    process.send({ advance: ms, cid });
  });
}
function answered(message) {
  if (!message || message.cid === undefined || !asked.has(message.cid)) return;
  const { resolve, reject } = asked.get(message.cid);
  asked.delete(message.cid);
  if (message.error) reject(new Error(message.error));
  else resolve();
}

/**
 * The servers' clock as the fleet moves it. `confirmed` is what every node has applied (cadence checks use it, so a
 * create is never sent early); `pending` includes an advance still on its way (a slot's creation time is recorded
 * with it, an upper bound). An advance that would take the oldest slot in flight within EXPIRY_SAFETY_MS of its
 * upload window waits until that slot is finalized.
 */
function fleetClock() {
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
        await advanceNodes(need);
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
 * The 1 MiB body sent as it is, the same way to Coffer (the upload) and to nginx (the PUT): node:http on kept-alive
 * connections. fetch cost the generator about 5 ms of CPU per body here, enough to make the baseline wait for its own
 * clients on 2 cores. Resolves with the status once the answer is read.
 */
const bodyAgent = new http.Agent({ keepAlive: true });
function sendBody(url, method, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      { method, agent: bodyAgent, headers: { 'content-type': 'application/octet-stream', 'content-length': body.length, ...headers } },
      (response) => {
        response.on('data', () => undefined);
        response.on('end', () => resolve(response.statusCode));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

/** Kept-alive connections to the object store, for the presigned PUTs (transfer `presigned`). */
const storeAgent = new http.Agent({ keepAlive: true });

/**
 * The upload step of a cycle: `direct` (today's path: the body POSTed to Coffer) or `presigned` (issue 38: start with
 * the size, the body PUT to the presigned URL on the store, complete), as the create answer allows.
 */
async function uploadArchive(host, id, body, created) {
  if (host.transfer === 'presigned') {
    if (!offersPresignedUpload(created.headers)) throw new Error('the create answer does not announce s3-presigned-upload');
    const done = await presignedUpload(host.call, id, body.length, () => body, { agent: storeAgent });
    if (done.size !== body.length) throw new Error(`s3-presigned.complete answered size ${done.size}, sent ${body.length}`);
    return;
  }
  const uploaded = await sendBody(`${host.url}/api/backups/upload?backupId=${id}`, 'POST', body, {
    authorization: `Bearer ${host.apiKey}`,
  });
  if (uploaded !== 201) throw new Error(`upload answered ${uploaded}`);
}

/** The window and the loops of the run under way (one at a time). */
let current = null;

const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/** Common to both modes: the loops, the measured window, this process's CPU over it, a failure reported at once. */
function newRun(loopBodies) {
  const run = {
    measureFrom: Infinity,
    measureTo: Infinity,
    stopping: false,
    cpu0: 0,
    cpu: 0,
    inWindow: (t) => t >= run.measureFrom && t <= run.measureTo,
  };
  run.loops = Promise.all(
    loopBodies.map(async (body) => {
      while (!run.stopping) await body();
    }),
  ).catch((error) => {
    run.failure = error;
    run.stopping = true;
    process.send({ failure: error.message });
  });
  return run;
}

/** The fleet: every host loops over the cycle. Cycles that end inside the measured window count. */
function startFleet({ hosts, bodyFile, nodeCount, transfer = 'direct' }) {
  const body = fs.readFileSync(bodyFile);
  const clock = fleetClock();
  const samples = Object.fromEntries(STEPS.map((step) => [step, []]));
  const cyclesPerNode = Array.from({ length: nodeCount }, () => 0);
  const refusals = { cadence: 0, inProgress: 0, stream: 0 };
  const errors = [];
  const clockWaits = [];
  let run = null;
  const cycle = async (host) => {
    const waitFrom = performance.now();
    await clock.allow(host.lastCreate);
    const t0 = performance.now();
    if (run.inWindow(t0)) clockWaits.push(t0 - waitFrom);
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
      await uploadArchive(host, id, body, created);
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
      if (run.inWindow(t5)) {
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
  const fleet = hosts.map((host) => ({ ...host, transfer, call: api(host.url, host.apiKey), lastCreate: -Infinity }));
  run = newRun(fleet.map((host) => () => cycle(host)));
  run.results = () => {
    const cycles = cyclesPerNode.reduce((a, b) => a + b, 0);
    return {
      cycles,
      cyclesPerNode,
      steps: Object.fromEntries(STEPS.map((step) => [step, { p50: percentile(samples[step], 50), p99: percentile(samples[step], 99) }])),
      refusals,
      errors: errors.length,
      errorSamples: errors.slice(0, 3),
      clockAdvances: clock.advances,
      clockWaitP99: percentile(clockWaits, 99),
    };
  };
  return run;
}

/** The baseline: `clients` concurrent clients PUT the same body to nginx (WebDAV), each to a file of its own. */
function startNginx({ url, clients, bodyFile }) {
  const body = fs.readFileSync(bodyFile);
  const latencies = [];
  let puts = 0;
  let run = null;
  const put = async (i) => {
    const t0 = performance.now();
    const status = await sendBody(`${url}/fleet/host-${i}.bin`, 'PUT', body);
    if (status !== 201 && status !== 204) throw new Error(`nginx PUT answered ${status}`);
    const t1 = performance.now();
    if (run.inWindow(t1)) {
      puts += 1;
      latencies.push(t1 - t0);
    }
  };
  run = newRun(Array.from({ length: clients }, (_, i) => () => put(i)));
  run.results = () => ({ puts, p50: percentile(latencies, 50), p99: percentile(latencies, 99) });
  return run;
}

// bench/p8-fleet.js imports the constants above; the generator runs only as its own process.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.on('message', answered);
  serveParent({
    async start({ mode, ...settings }) {
      if (current && !current.stopping) throw new Error('a run is already under way');
      current = mode === 'fleet' ? startFleet(settings) : startNginx(settings);
      return true;
    },
    async mark() {
      current.cpu0 = cpuMs();
      current.measureFrom = performance.now();
      return true;
    },
    async stop() {
      const run = current;
      run.measureTo = performance.now();
      run.cpu = cpuMs() - run.cpu0;
      run.stopping = true;
      await run.loops;
      if (run.failure) throw run.failure;
      return { ...run.results(), seconds: (run.measureTo - run.measureFrom) / 1000, clientCpuMs: run.cpu };
    },
  });

  process.send({ ready: { pid: process.pid } });
}
