/**
 * The server's JSON log on stdout. The destination writes asynchronously: lines logged while a write is in flight
 * go out together in the next one, so a busy server makes a few large writes instead of one system call per
 * request (BENCHMARKS.md, P3). Whatever is still buffered is written synchronously when the process exits.
 */
import type { FastifyServerOptions } from 'fastify';
import pino from 'pino';
import type { LogLevel } from '../config.js';

const LISTEN_LOG = /^Server listening at /;

export function serverLogger(level: LogLevel): FastifyServerOptions['logger'] {
  if (level === 'silent') return false;
  return {
    level,
    stream: pino.destination({ dest: 1, sync: false }),
    // Fastify logs one "Server listening at" line per address before the first start's notices; `coffer serve` logs
    // one line with them all after the notices instead (src/cli/serve.ts), so nothing comes above the key.
    hooks: {
      logMethod(args, method) {
        if (typeof args[0] === 'string' && LISTEN_LOG.test(args[0])) return;
        method.apply(this, args);
      },
    },
  };
}
