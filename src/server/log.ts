/**
 * The server's JSON log on stdout. The destination writes asynchronously: the lines logged during one turn of the
 * event loop (and, while a write is in flight, all lines logged until it is done) go out together in one write, so a
 * busy server makes a few large writes instead of one system call per request (BENCHMARKS.md, P3). Whatever is still
 * buffered is written synchronously when the process exits.
 */
import fs from 'node:fs';
import type { FastifyServerOptions } from 'fastify';
import type { LogLevel } from '../config.js';

const LISTEN_LOG = /^Server listening at /;
/** How long a write that the descriptor refused for now (EAGAIN: a full non-blocking pipe) waits before it is tried again. */
const RETRY_MS = 100;

/**
 * A pino destination that batches lines. pino's own (sonic-boom) costs a few µs per line at P3's request rates: it
 * measures the growing buffer's byte length on every line and copies each written buffer once more; here a line is
 * an array push, and a batch is joined and encoded once.
 */
export class BatchedLines {
  private pending: string[] = [];
  /** The bytes of the write in flight (or waiting to be retried), null when none. */
  private inFlight: Buffer | null = null;
  /** The write in flight was refused for now and waits for its retry. */
  private retrying = false;
  private scheduled = false;
  private broken = false;
  private waiters: (() => void)[] = [];

  constructor(private readonly fd: number) {
    exitFlush.add(this);
  }

  write(line: string): boolean {
    if (this.broken) return true;
    this.pending.push(line);
    if (this.inFlight === null && !this.scheduled) {
      this.scheduled = true;
      setImmediate(this.writePending);
    }
    return true;
  }

  /** pino's logger.flush(cb): `cb` once everything logged so far is written. */
  flush(cb?: (error?: Error) => void): void {
    if (cb) this.waiters.push(() => cb());
    if (this.broken) return this.settle();
    if (this.inFlight === null) this.writePending();
  }

  /** Writes whatever is buffered now, synchronously (at exit: there is no event loop left to wait for). */
  flushSync(): void {
    if (this.broken) return;
    // A write in flight is the kernel's or the thread pool's already; one waiting for a retry is still ours.
    let data = this.retrying ? this.inFlight! : null;
    this.retrying = false;
    const lines = this.pending.join('');
    this.pending = [];
    if (lines !== '') data = data ? Buffer.concat([data, Buffer.from(lines)]) : Buffer.from(lines);
    while (data && data.length > 0) {
      try {
        data = data.subarray(fs.writeSync(this.fd, data));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') return;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
      }
    }
  }

  private readonly writePending = (): void => {
    this.scheduled = false;
    if (this.inFlight !== null || this.broken) return;
    if (this.pending.length === 0) return this.settle();
    const data = Buffer.from(this.pending.length === 1 ? this.pending[0]! : this.pending.join(''));
    this.pending = [];
    this.send(data);
  };

  private send(data: Buffer): void {
    this.inFlight = data;
    fs.write(this.fd, data, 0, data.length, null, (error, written) => {
      if (error) {
        if (error.code === 'EAGAIN') {
          this.retrying = true;
          setTimeout(() => {
            if (!this.retrying) return;
            this.retrying = false;
            this.send(data);
          }, RETRY_MS).unref();
          return;
        }
        // EPIPE (nobody reads stdout any more): logging stops, the server goes on; anything else is thrown (as with
        // pino's own destination).
        if (error.code !== 'EPIPE') throw error;
        this.broken = true;
        this.pending = [];
        this.inFlight = null;
        this.settle();
        return;
      }
      if (written < data.length) return this.send(data.subarray(written));
      this.inFlight = null;
      this.writePending();
    });
  }

  private settle(): void {
    if (!this.broken && (this.pending.length > 0 || this.inFlight !== null)) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }
}

/** Destinations with lines to write synchronously at exit (one listener for them all). */
const exitFlush = new Set<BatchedLines>();
process.on('exit', () => {
  for (const destination of exitFlush) destination.flushSync();
});

export function serverLogger(level: LogLevel): FastifyServerOptions['logger'] {
  if (level === 'silent') return false;
  return {
    level,
    stream: new BatchedLines(1),
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
