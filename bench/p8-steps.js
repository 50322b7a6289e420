/* global fetch, AbortController, TextDecoderStream */
/**
 * Where P8's server CPU goes, step by step: one host runs the fleet's cycle alone, sequentially, `--cycles` times
 * against one Coffer (postgres+ceph by default) — create, event stream opened, upload (direct, or presigned: start,
 * PUT to the store, complete), finalize, list, READY on the stream — and around each step the harness reads the
 * server's CPU time (/proc schedstat, to the nanosecond, all its threads) and its database statement counters.
 * Not a throughput figure (nothing runs concurrently, so nothing is batched): a breakdown, to tell which step a
 * CPU-per-cycle miss comes from. The load generator's own work never counts (another process).
 *
 *   node bench/p8-steps.js [--backend postgres+ceph] [--transfers direct,presigned] [--cycles 200] [--size-mib 1]
 *                          [--cpu-prof <dir>]
 *
 * --cpu-prof writes the server's V8 CPU profile (node --cpu-prof) into <dir>, one per transfer, for
 * bench/profile-top.js (the warm-up cycles are in it too).
 */
import crypto from 'node:crypto';
import http from 'node:http';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { MiB, cpuTimeOf, list, log, logFile, options, requireBuild, round, runWhenMain } from './lib/common.js';
import { accounts, finalizeBody, prepareBackend, startCoffer } from './lib/coffer.js';
import { negotiate, offersPresignedUpload, putPresigned } from './lib/presigned.js';

const STEPS = ['create', 'upload', 'finalize', 'list', 'stream'];
/** The presigned upload step, split: s3-presigned.start, the PUT to the store (no Coffer work), s3-presigned.complete. */
const PRESIGNED_STEPS = ['create', 'start', 'put', 'complete', 'finalize', 'list', 'stream'];

function sendBody(url, body, headers, agent) {
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/octet-stream', 'content-length': body.length, ...headers } },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

/** Opens a backup's event stream; `ready()` resolves at its READY frame. */
async function openStream(url, apiKey) {
  const controller = new AbortController();
  const response = await fetch(url, {
    headers: { authorization: `Bearer ${apiKey}`, accept: 'text/event-stream' },
    signal: controller.signal,
  });
  if (response.status !== 200) throw new Error(`events answered ${response.status}`);
  const reader = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  return {
    async ready() {
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) throw new Error('the event stream ended before READY');
          if (value.event === 'backup.status' && /"status":"READY"/.test(value.data)) return;
        }
      } finally {
        controller.abort();
      }
    },
  };
}

async function stepsOn(backend, transfer, { cycles, size, cpuProf }) {
  const prepared = await prepareBackend(backend);
  let coffer = null;
  try {
    const env = { COFFER_UPLOAD_WINDOW: '24h' };
    if (transfer === 'presigned')
      Object.assign(env, { COFFER_S3_PRESIGNED: 'on', COFFER_S3_PUBLIC_ENDPOINT: prepared.env.COFFER_S3_ENDPOINT });
    const nodeArgs = cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${cpuProf}`] : [];
    coffer = await startCoffer(prepared, { env, nodeArgs, logFile: logFile(`p8-steps-coffer-${backend}-${transfer}.log`) });
    const [host] = await accounts(coffer, 1);
    const body = crypto.randomBytes(size);
    const agent = new http.Agent({ keepAlive: true });
    const steps = transfer === 'presigned' ? PRESIGNED_STEPS : STEPS;
    const totals = Object.fromEntries(steps.map((step) => [step, { cpu: 0, reads: 0, writes: 0 }]));
    let measured = 0;
    const mark = async () => ({ cpu: cpuTimeOf(coffer.pid), queries: (await coffer.stats()).queries });
    for (let i = -20; i < cycles; i++) {
      const at = [await mark()];
      const created = await host.call('POST', '/api/backups', { expect: 201 });
      const id = created.body.backupId;
      const stream = await openStream(`${coffer.url}/api/backups/${id}/events`, host.apiKey);
      at.push(await mark());
      if (transfer === 'presigned') {
        if (!offersPresignedUpload(created.headers)) throw new Error('the create answer does not announce s3-presigned-upload');
        const start = await negotiate(host.call, 's3-presigned.start', { backupId: id, size });
        at.push(await mark());
        await putPresigned(start.request, body, agent);
        at.push(await mark());
        const done = await negotiate(host.call, 's3-presigned.complete', { backupId: id, uploadKey: start.uploadKey, size });
        if (done.size !== size) throw new Error(`complete answered size ${done.size}`);
      } else {
        const status = await sendBody(
          `${coffer.url}/api/backups/upload?backupId=${id}`,
          body,
          { authorization: `Bearer ${host.apiKey}` },
          agent,
        );
        if (status !== 201) throw new Error(`upload answered ${status}`);
      }
      at.push(await mark());
      await host.call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(size), expect: 200 });
      at.push(await mark());
      await host.call('GET', '/api/backups', { expect: 200 });
      at.push(await mark());
      await stream.ready();
      at.push(await mark());
      await coffer.advance(31 * 60_000);
      if (i < 0) continue; // warm-up
      measured += 1;
      steps.forEach((step, s) => {
        totals[step].cpu += at[s + 1].cpu - at[s].cpu;
        totals[step].reads += at[s + 1].queries.reads - at[s].queries.reads;
        totals[step].writes += at[s + 1].queries.writes - at[s].queries.writes;
      });
    }
    return Object.fromEntries(
      steps.map((step) => [
        step,
        {
          cpuMs: round((totals[step].cpu * 1000) / measured, 3),
          reads: round(totals[step].reads / measured, 2),
          writes: round(totals[step].writes / measured, 2),
        },
      ]),
    );
  } finally {
    await coffer?.stop();
    await prepared.cleanup();
  }
}

export async function main() {
  const opts = options({ backend: 'postgres+ceph', transfers: 'direct,presigned', cycles: 200, 'size-mib': 1, 'cpu-prof': '' });
  requireBuild();
  const results = {};
  for (const transfer of list(opts.transfers)) {
    const steps = await stepsOn(opts.backend, transfer, {
      cycles: opts.cycles,
      size: Math.round(opts['size-mib'] * MiB),
      cpuProf: opts['cpu-prof'],
    });
    const total = Object.values(steps).reduce((sum, s) => sum + s.cpuMs, 0);
    results[transfer] = steps;
    log(
      `P8 steps ${opts.backend} ${transfer}: server CPU ${total.toFixed(2)} ms per cycle — ` +
        Object.keys(steps)
          .map((step) => `${step} ${steps[step].cpuMs.toFixed(2)} ms (${steps[step].reads}r/${steps[step].writes}w)`)
          .join(', '),
    );
  }
  return results;
}

runWhenMain(import.meta.url, main);
