/* global process */
/**
 * The P4 load generator, a process of its own: thousands of Server-Sent Event streams over raw node:http
 * (one socket each, no agent pooling), parsed with eventsource-parser. For every stream it records the
 * moment each new `status` value arrives (wall clock, sub-millisecond), so the harness can compute the
 * delay from a status change to its arrival on every stream.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { createParser } from 'eventsource-parser';
import { serveParent } from './common.js';

const now = () => performance.timeOrigin + performance.now();
const STATUS = /"status":"([A-Z_]+)"/;

const streams = new Set();
let arrivals = [];
let frames = 0;
let closedFrames = 0;
let failures = [];

/**
 * Loopback source addresses the streams rotate over: one address to one server port has ~28,000 ephemeral ports
 * (net.ipv4.ip_local_port_range), so 50,000 streams need several (Linux routes all of 127/8 to lo).
 */
const SOURCES_PER_ADDRESS = 20_000;
let opening = 0;

function openStream({ url, headers, tag = 0 }) {
  return new Promise((resolve) => {
    const stream = { backupId: null, status: null, request: null, open: false, tag };
    const localAddress = `127.0.0.${1 + Math.floor(opening++ / SOURCES_PER_ADDRESS)}`;
    const request = http.get(url, { agent: false, localAddress, headers: { accept: 'text/event-stream', ...headers } }, (response) => {
      if (response.statusCode !== 200) {
        failures.push(`${response.statusCode} ${url}`);
        response.resume();
        resolve(false);
        return;
      }
      stream.open = true;
      streams.add(stream);
      response.setEncoding('utf8');
      const parser = createParser({
        onEvent(event) {
          frames += 1;
          if (event.event === 'backup.stream.closed') {
            closedFrames += 1;
            return;
          }
          if (event.event !== 'backup.status') return;
          const status = STATUS.exec(event.data)?.[1];
          if (stream.backupId === null) stream.backupId = /"backupId":"([^"]+)"/.exec(event.data)?.[1] ?? null;
          if (status !== stream.status) {
            // The first frame of a stream is its opening state, not a change.
            if (stream.status !== null) arrivals.push([stream.backupId, status, now(), stream.tag]);
            stream.status = status;
            if (stream.firstFrame) {
              const done = stream.firstFrame;
              stream.firstFrame = null;
              done(true);
            }
          }
        },
      });
      stream.firstFrame = resolve;
      response.on('data', (chunk) => parser.feed(chunk));
      response.on('close', () => {
        stream.open = false;
        streams.delete(stream);
      });
      response.on('error', () => undefined);
    });
    request.on('error', (error) => {
      failures.push(`${error.code ?? error.message} ${url}`);
      stream.open = false;
      streams.delete(stream);
      resolve(false);
    });
    stream.request = request;
  });
}

serveParent({
  /**
   * Opens `count` streams for each target ({url, headers, count, tag?}), `parallel` connection attempts at a time;
   * `openedByTag` counts the open streams per tag (the harness tags each stream with the server node it goes to).
   */
  async open({ targets, parallel = 200 }) {
    const jobs = targets.flatMap((t) => Array.from({ length: t.count }, () => t));
    const started = now();
    let next = 0;
    let opened = 0;
    const openedByTag = {};
    failures = [];
    await Promise.all(
      Array.from({ length: Math.min(parallel, jobs.length) }, async () => {
        while (next < jobs.length) {
          const job = jobs[next++];
          if (await openStream(job)) {
            opened += 1;
            openedByTag[job.tag ?? 0] = (openedByTag[job.tag ?? 0] ?? 0) + 1;
          }
        }
      }),
    );
    return { opened, openedByTag, failed: jobs.length - opened, failures: failures.slice(0, 5), ms: now() - started };
  },
  /** Status arrivals recorded since the last call: [backupId, status, wallClockMs, tag][]. */
  async arrivals() {
    const taken = arrivals;
    arrivals = [];
    return taken;
  },
  async stats() {
    return { open: streams.size, frames, closedFrames, rss: process.memoryUsage().rss };
  },
  async closeAll() {
    for (const stream of streams) stream.request.destroy();
    streams.clear();
    opening = 0;
    return true;
  },
});
process.send({ ready: { pid: process.pid } });
