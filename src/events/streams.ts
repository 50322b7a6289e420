/**
 * Server-Sent Event streams of backup status (CONTRACT §8). A stream reads the record once when it opens;
 * after that it only hears the status bus, so N streams cost no database reads per interval.
 */
import type { ServerResponse } from 'node:http';
import { isTerminal } from '../domain/backups.js';
import type { Clock } from '../domain/clock.js';
import { AppError } from '../domain/errors.js';
import { errorBody } from '../server/errors.js';
import { iso, statusEventBody } from '../api/views.js';
import type { Backup } from '../store/store.js';
import type { StatusBus } from './status-bus.js';

export type CloseReason = 'terminal' | 'timeout' | 'shutdown';

export interface StreamOptions {
  intervalMs: number;
  timeoutMs: number;
}

export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store, no-transform',
  'x-accel-buffering': 'no',
  connection: 'keep-alive',
} as const;

/**
 * One status change reaches every stream of its backup in the same tick, with the same record and clock
 * reading: the frame body is serialized once and reused (it was three toISOString calls and a JSON.stringify
 * per stream; bench P4). Keyed by the record object itself and the millisecond, so it never goes stale.
 */
let lastStatus: { backup: Backup; observedAt: number; json: string } | null = null;
function statusJson(backup: Backup, observedAt: number): string {
  if (lastStatus?.backup !== backup || lastStatus.observedAt !== observedAt) {
    lastStatus = { backup, observedAt, json: JSON.stringify(statusEventBody(backup, observedAt)) };
  }
  return lastStatus.json;
}

let lastIso: { ms: number; text: string } = { ms: NaN, text: '' };
function isoOnce(ms: number): string {
  if (lastIso.ms !== ms) lastIso = { ms, text: iso(ms) };
  return lastIso.text;
}

class EventStream {
  private frameId = 0;
  private latest: Backup;
  private closed = false;
  private readonly ticker: NodeJS.Timeout;
  private readonly deadline: NodeJS.Timeout;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly response: ServerResponse,
    backup: Backup,
    private readonly hub: EventStreamHub,
  ) {
    this.latest = backup;
    response.write('retry: 2000\n\n');
    this.unsubscribe = hub.bus.subscribe(backup.id, (next) => this.onChange(next));
    this.ticker = setInterval(() => this.sendStatus(), hub.options.intervalMs);
    this.deadline = setTimeout(() => this.close('timeout'), hub.options.timeoutMs);
    response.on('close', () => this.dispose());
    this.sendStatus();
  }

  private frame(event: string, data: unknown): void {
    this.frameJson(event, JSON.stringify(data));
  }

  private frameJson(event: string, json: string): void {
    this.frameId += 1;
    this.response.write(`id: ${this.frameId}\nevent: ${event}\ndata: ${json}\n\n`);
  }

  private onChange(next: Backup): void {
    if (next.updatedAt < this.latest.updatedAt) return;
    this.latest = next;
    this.sendStatus();
  }

  private sendStatus(): void {
    if (this.closed) return;
    this.frameJson('backup.status', statusJson(this.latest, this.hub.clock.now()));
    if (isTerminal(this.latest.status)) this.close('terminal');
  }

  close(reason: CloseReason): void {
    if (this.closed) return;
    this.frame('backup.stream.closed', {
      backupId: this.latest.id,
      reason,
      status: this.latest.status,
      observedAt: isoOnce(this.hub.clock.now()),
    });
    this.end();
  }

  fail(error: AppError): void {
    if (this.closed) return;
    this.frame('backup.stream.error', { ...errorBody(error), backupId: this.latest.id });
    this.end();
  }

  private end(): void {
    this.dispose();
    this.response.end();
  }

  private dispose(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.ticker);
    clearTimeout(this.deadline);
    this.unsubscribe();
    this.hub.forget(this);
  }
}

export class EventStreamHub {
  private readonly streams = new Set<EventStream>();

  constructor(
    readonly bus: StatusBus,
    readonly clock: Clock,
    readonly options: StreamOptions,
  ) {
    bus.onFailure(() => this.failAll(new AppError('internal_error', 'The status feed of this server failed.')));
  }

  /** Starts a stream on a response whose headers the caller has not yet sent. */
  open(response: ServerResponse, backup: Backup): void {
    response.writeHead(200, SSE_HEADERS);
    this.streams.add(new EventStream(response, backup, this));
  }

  forget(stream: EventStream): void {
    this.streams.delete(stream);
  }

  get size(): number {
    return this.streams.size;
  }

  closeAll(reason: CloseReason): void {
    for (const stream of [...this.streams]) stream.close(reason);
  }

  /** The status source broke: every stream gets an error frame and ends. */
  failAll(error: AppError): void {
    for (const stream of [...this.streams]) stream.fail(error);
  }
}
