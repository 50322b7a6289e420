/**
 * The server's JSON log on stdout. The destination writes asynchronously: lines logged while a write is in flight
 * go out together in the next one, so a busy server makes a few large writes instead of one system call per
 * request (BENCHMARKS.md, P3). Whatever is still buffered is written synchronously when the process exits.
 */
import type { FastifyServerOptions } from 'fastify';
import pino from 'pino';
import type { LogLevel } from '../config.js';

export function serverLogger(level: LogLevel): FastifyServerOptions['logger'] {
  if (level === 'silent') return false;
  return { level, stream: pino.destination({ dest: 1, sync: false }) };
}
