/**
 * Server-Sent Event streams of backup status (docs/api-rules.md#events). A stream reads the record once when it opens;
 * after that it only hears the status bus, so N streams cost no database reads per interval.
 */
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { isTerminal } from '../domain/backups.js';
import type { Clock } from '../domain/clock.js';
import { AppError } from '../domain/errors.js';
import type { StreamStats } from '../http/metrics.js';
import { iso } from '../domain/time.js';
import type { BackupStreamClosedBody } from '../contract/schemas.js';
import { statusEventBody, streamErrorBody } from '../contract/views.js';
import type { Backup } from '../domain/entities.js';
import type { StatusBus } from '../events/status-bus.js';
import { HeartbeatWheel } from '../events/heartbeat-wheel.js';

export type CloseReason = BackupStreamClosedBody['reason'];

export interface StreamOptions {
  intervalMs: number;
  timeoutMs: number;
  /** Streams open at once per account and per client address (docs/api-rules.md#events). */
  maxPerAccount: number;
  maxPerAddress: number;
}

/** Who opened a stream: the caps are counted on both. */
export interface StreamOwner {
  accountId: string;
  address: string;
}

export type StreamLimit = keyof StreamStats['refused'];

export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store, no-transform',
  'x-accel-buffering': 'no',
  connection: 'keep-alive',
} as const;

/**
 * One status change reaches every stream of its backup in the same tick, with the same record and clock
 * reading: the frame body is serialized once and reused, so what a change costs does not grow with the streams
 * that watch it (P4 in BENCHMARKS.md). Keyed by the record object itself and the millisecond, so it never goes stale.
 */
let lastStatus: { backup: Backup; observedAt: number; json: string } | null = null;
function statusJson(backup: Backup, observedAt: number): string {
  if (lastStatus?.backup !== backup || lastStatus.observedAt !== observedAt) {
    lastStatus = { backup, observedAt, json: JSON.stringify(statusEventBody(backup, observedAt)) };
  }
  return lastStatus.json;
}

function frameText(id: number, event: string, json: string): string {
  return `id: ${id}\nevent: ${event}\ndata: ${json}\n\n`;
}

const OPENING = 'retry: 2000\n\n';

let lastIso: { ms: number; text: string } = { ms: NaN, text: '' };
function isoOnce(ms: number): string {
  if (lastIso.ms !== ms) lastIso = { ms, text: iso(ms) };
  return lastIso.text;
}

class EventStream {
  private frameId = 0;
  private latest: Backup;
  private closed = false;
  /** When the stream times out, on the monotonic clock (the hub's one timer checks it). */
  readonly expiresAt: number;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly response: ServerResponse,
    backup: Backup,
    private readonly hub: EventStreamHub,
    readonly owner: StreamOwner,
  ) {
    this.latest = backup;
    response.write(OPENING);
    this.unsubscribe = hub.bus.subscribe(backup.id, (next) => this.onChange(next));
    this.expiresAt = performance.now() + hub.options.timeoutMs;
    response.on('close', () => this.dispose());
  }

  /** The first frame; separate from the constructor so the hub counts the stream before it can end. */
  start(): void {
    this.sendStatus();
  }

  private frame(event: string, data: unknown): void {
    this.frameJson(event, JSON.stringify(data));
  }

  private frameJson(event: string, json: string): void {
    this.frameId += 1;
    this.response.write(frameText(this.frameId, event, json));
  }

  private onChange(next: Backup): void {
    if (next.updatedAt < this.latest.updatedAt) return;
    this.latest = next;
    this.sendStatus();
  }

  /** The periodic frame, from the hub's shared timer. */
  sendStatus(): void {
    if (this.closed) return;
    this.frameJson('backup.status', statusJson(this.latest, this.hub.clock.now()));
    if (isTerminal(this.latest.status)) this.close('terminal');
  }

  close(reason: CloseReason): void {
    if (this.closed) return;
    const closing: BackupStreamClosedBody = {
      backupId: this.latest.id,
      reason,
      status: this.latest.status,
      observedAt: isoOnce(this.hub.clock.now()),
    };
    this.frame('backup.stream.closed', closing);
    this.end();
  }

  fail(error: AppError): void {
    if (this.closed) return;
    this.frame('backup.stream.error', streamErrorBody(error, this.latest.id));
    this.end();
  }

  private end(): void {
    this.dispose();
    this.response.end();
  }

  private dispose(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    this.hub.forget(this);
  }
}

/** Open streams per key (account id or client address); a key leaves the map when its last stream closes. */
class Tally {
  private readonly counts = new Map<string, number>();

  get(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  add(key: string, delta: 1 | -1): void {
    const next = this.get(key) + delta;
    if (next > 0) this.counts.set(key, next);
    else this.counts.delete(key);
  }
}

/**
 * The open streams of this process. The periodic frames and the timeouts of all of them run from one timer (a
 * wheel, src/events/heartbeat-wheel.ts) instead of two timers per stream (bench P4). Every stream has the same
 * timeout, so the open order in `streams` is also the expiry order: each tick closes the expired ones from the
 * front and stops at the first that is not.
 */
export class EventStreamHub {
  /** In open order, which is expiry order. */
  private readonly streams = new Set<EventStream>();
  private readonly wheel: HeartbeatWheel<EventStream>;
  private readonly perAccount = new Tally();
  private readonly perAddress = new Tally();
  private readonly refused: Record<StreamLimit, number> = { account: 0, address: 0 };

  constructor(
    readonly bus: StatusBus,
    readonly clock: Clock,
    readonly options: StreamOptions,
  ) {
    bus.onFailure(() => this.failAll(new AppError('internal_error', 'The status feed of this server failed.')));
    this.wheel = new HeartbeatWheel<EventStream>(
      options.intervalMs,
      (stream) => stream.sendStatus(),
      () => this.expire(),
    );
  }

  private expire(): void {
    const now = performance.now();
    // Closing removes the stream from the set; a Set iterator skips removed entries.
    for (const stream of this.streams) {
      if (stream.expiresAt > now) break;
      stream.close('timeout');
    }
  }

  /**
   * Starts a stream on a response whose headers the caller has not yet sent. Over a cap, the operation may only
   * answer inside the stream protocol: one `backup.stream.error` frame (`too_many_streams`), then the end.
   */
  open(response: ServerResponse, backup: Backup, owner: StreamOwner): void {
    response.writeHead(200, SSE_HEADERS);
    const limit = this.limitReached(owner);
    if (limit !== null) {
      this.refused[limit] += 1;
      const maxStreams = limit === 'account' ? this.options.maxPerAccount : this.options.maxPerAddress;
      const error = new AppError('too_many_streams', `Too many open event streams for this ${limit}.`, { limit, maxStreams });
      response.end(OPENING + frameText(1, 'backup.stream.error', JSON.stringify(streamErrorBody(error, backup.id))));
      return;
    }
    const stream = new EventStream(response, backup, this, owner);
    this.streams.add(stream);
    this.wheel.add(stream);
    this.perAccount.add(owner.accountId, 1);
    this.perAddress.add(owner.address, 1);
    stream.start();
  }

  private limitReached(owner: StreamOwner): StreamLimit | null {
    if (this.perAccount.get(owner.accountId) >= this.options.maxPerAccount) return 'account';
    if (this.perAddress.get(owner.address) >= this.options.maxPerAddress) return 'address';
    return null;
  }

  /** Every way a stream ends (hang-up, terminal status, timeout, shutdown, failure) comes here once. */
  forget(stream: EventStream): void {
    if (!this.streams.delete(stream)) return;
    this.wheel.delete(stream);
    this.perAccount.add(stream.owner.accountId, -1);
    this.perAddress.add(stream.owner.address, -1);
  }

  get size(): number {
    return this.streams.size;
  }

  /** Streams on the shared timer, and whether it runs (it stops when no stream is open). */
  timerStats(): { members: number; running: boolean; tickMs: number } {
    return { members: this.wheel.size, running: this.wheel.running, tickMs: this.wheel.tickMs };
  }

  stats(): StreamStats {
    return { open: this.streams.size, refused: { ...this.refused } };
  }

  closeAll(reason: CloseReason): void {
    for (const stream of [...this.streams]) stream.close(reason);
  }

  /** The status source broke: every stream gets an error frame and ends. */
  failAll(error: AppError): void {
    for (const stream of [...this.streams]) stream.fail(error);
  }
}
