/* global process */
/**
 * A Coffer server process for the benchmarks: exactly what `coffer serve` starts (startServer from dist/,
 * configured by the same environment variables, the same logger setting), plus an IPC channel so the
 * harness can issue API keys, move the clock (many READY backups per account without waiting 30 minutes)
 * and read the process's own counters (database statements, open event streams).
 */
import fs from 'node:fs';
import inspector from 'node:inspector';
import { loadConfig } from '../../dist/config.js';
import { startOnFreePort } from '../../dist/server/compose.js';
import { serverLogger } from '../../dist/server/log.js';
import { serveParent } from './common.js';

// Create responses carry upload URLs built from the public URL: it is the real port's URL.
const configFor = (port, url) => loadConfig({ ...process.env, PORT: String(port), HOST: '127.0.0.1', COFFER_PUBLIC_URL: url });
const { logLevel } = loadConfig(process.env);
let offset = 0;
let session = null;
const clock = { now: () => Date.now() + offset };
const server = await startOnFreePort(configFor, {
  clock,
  logger: serverLogger(logLevel),
});

serveParent({
  async keys({ count = 1, plan = 'pro' }) {
    const issued = [];
    for (let i = 0; i < count; i++) {
      const account = await server.parts.keys.createAccount(plan);
      const { apiKey } = await server.parts.keys.issueKey(account);
      issued.push({ apiKey, accountId: account.id });
    }
    return issued;
  },
  async stats() {
    const memory = process.memoryUsage();
    return {
      rss: memory.rss,
      heapUsed: memory.heapUsed,
      external: memory.external,
      arrayBuffers: memory.arrayBuffers,
      queries: server.parts.stores.database.queryCounts(),
      streams: server.streams.size,
    };
  },
  async advance({ ms }) {
    offset += ms;
    return offset;
  },
  /** CPU profile of just the measured phase (node --cpu-prof would include start-up): start, then stop → file. */
  async profile({ action, file }) {
    const post = (method, params) =>
      new Promise((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))));
    if (action === 'start') {
      session ??= new inspector.Session();
      session.connect();
      await post('Profiler.enable');
      await post('Profiler.setSamplingInterval', { interval: 200 });
      await post('Profiler.start');
      return true;
    }
    const { profile } = await post('Profiler.stop');
    session.disconnect();
    fs.writeFileSync(file, JSON.stringify(profile));
    return file;
  },
  async gc() {
    globalThis.gc?.();
    return process.memoryUsage().rss;
  },
});

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  server.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.send({ ready: { url: server.url, pid: process.pid } });
