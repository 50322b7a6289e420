/**
 * The status bus across nodes, on PostgreSQL LISTEN/NOTIFY.
 *
 * publish(): deliver on this node at once, then `NOTIFY coffer_backup_status, '{"id","node"}'` (after the
 * change is committed, so a receiver always reads the new state). Every node holds one LISTEN connection.
 * A node that hears about a backup it has open streams for reads that record ONCE and fans it out through its
 * LocalStatusBus; notifications arriving while that read is in flight coalesce into one more read. So the
 * number of database reads depends on the number of changes, never on the number of open streams.
 *
 * When the LISTEN connection breaks, changes may be missed: every open stream on this node is told (they end
 * with `backup.stream.error`, and EventSource clients reconnect and re-read), and the bus reconnects.
 *
 * The same LISTEN session hears `coffer_changes` (sent by triggers, migration 0006, for any committed change of an
 * account, its keys, vault or backups, by whatever process): it is the ChangeFeed of the metadata cache
 * (src/store/cached-store.ts), which is told when the session breaks and when it is back.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { ChangeFeed } from '../store/cached-store.js';
import { CHANGE_CHANNEL } from '../store/migrations.js';
import { pgClientConfig } from '../store/postgres.js';
import type { Backup } from '../domain/entities.js';
import { LocalStatusBus, type StatusBus, type StatusListener } from './status-bus.js';

export const STATUS_CHANNEL = 'coffer_backup_status';

export interface PgStatusBusOptions {
  connectionString: string;
  /** Reads the current record of a backup (the Store's getBackup). */
  load: (backupId: string) => Promise<Backup | undefined>;
  channel?: string;
  log?: (message: string, error?: unknown) => void;
  /** First reconnect delay; doubles up to 5 s. */
  reconnectDelayMs?: number;
}

interface Notice {
  id: string;
  node: string;
}

export class PgStatusBus implements StatusBus, ChangeFeed {
  /** Counters for tests and metrics: notifications heard, records read for fan-out. */
  readonly stats = { notifications: 0, reads: 0, reconnects: 0 };
  private readonly local = new LocalStatusBus();
  private readonly node = randomUUID();
  private readonly channel: string;
  private readonly changeChannel = CHANGE_CHANNEL;
  private readonly changeListeners: ((accountId: string) => void)[] = [];
  private readonly liveListeners: ((live: boolean) => void)[] = [];
  private readonly interest = new Map<string, number>();
  private readonly reading = new Map<string, { again: boolean }>();
  private readonly notifier: pg.Pool;
  private listener: pg.Client | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private everConnected = false;

  constructor(private readonly options: PgStatusBusOptions) {
    this.channel = options.channel ?? STATUS_CHANNEL;
    if (!/^[a-z_][a-z0-9_]*$/.test(this.channel)) throw new Error(`invalid channel name ${this.channel}`);
    this.notifier = new pg.Pool({ ...pgClientConfig(options.connectionString), max: 2 });
    this.notifier.on('error', () => undefined);
  }

  /** Connects the LISTEN session; rejects when PostgreSQL cannot be reached at start. */
  async start(): Promise<void> {
    await this.connect();
  }

  /** Backend process id of the LISTEN session (diagnostics, tests). */
  get listenerProcessId(): number | undefined {
    return (this.listener as unknown as { processID?: number } | null)?.processID;
  }

  /** Whether the LISTEN session is up (changes of other nodes are heard). */
  get live(): boolean {
    return this.listener !== null;
  }

  onChange(listener: (accountId: string) => void): void {
    this.changeListeners.push(listener);
  }

  onLive(listener: (live: boolean) => void): void {
    this.liveListeners.push(listener);
  }

  async publish(backup: Backup): Promise<void> {
    this.local.deliver(backup);
    const notice: Notice = { id: backup.id, node: this.node };
    try {
      await this.notifier.query('select pg_notify($1, $2)', [this.channel, JSON.stringify(notice)]);
    } catch (error) {
      // The change itself is committed; only other nodes' streams miss this push (they still time out
      // or are failed by their own bus). Never fail the request that made the change.
      this.options.log?.('status notification failed', error);
    }
  }

  subscribe(backupId: string, listener: StatusListener): () => void {
    const unsubscribe = this.local.subscribe(backupId, listener);
    this.interest.set(backupId, (this.interest.get(backupId) ?? 0) + 1);
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      unsubscribe();
      const left = (this.interest.get(backupId) ?? 1) - 1;
      if (left > 0) this.interest.set(backupId, left);
      else this.interest.delete(backupId);
    };
  }

  onFailure(listener: (error: Error) => void): void {
    this.local.onFailure(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const listener = this.listener;
    this.listener = null;
    await listener?.end().catch(() => undefined);
    await this.notifier.end().catch(() => undefined);
    await this.local.close();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(pgClientConfig(this.options.connectionString));
    client.on('notification', (message) => this.onNotification(message));
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, new Error('the LISTEN connection to PostgreSQL ended')));
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
      if (this.changeChannel !== this.channel) await client.query(`LISTEN ${this.changeChannel}`);
    } catch (error) {
      client.removeAllListeners();
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    const again = this.everConnected;
    this.everConnected = true;
    this.listener = client;
    // Back after a break: the cache drops what it may have missed and caches again.
    if (again) for (const listener of this.liveListeners) listener(true);
  }

  private lost(client: pg.Client, error: Error): void {
    if (this.listener !== client || this.closed) return;
    this.listener = null;
    client.removeAllListeners();
    client.on('error', () => undefined);
    void client.end().catch(() => undefined);
    this.options.log?.('status bus lost its LISTEN connection; reconnecting', error);
    this.local.fail(error);
    for (const listener of this.liveListeners) listener(false);
    this.scheduleReconnect(this.options.reconnectDelayMs ?? 100);
  }

  private scheduleReconnect(delayMs: number): void {
    if (this.closed) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connect().then(
        () => {
          this.stats.reconnects += 1;
        },
        (error: unknown) => {
          this.options.log?.('status bus reconnect failed', error);
          this.scheduleReconnect(Math.min(delayMs * 2, 5000));
        },
      );
    }, delayMs);
    this.reconnectTimer.unref();
  }

  private onNotification(message: pg.Notification): void {
    if (message.channel === this.changeChannel && message.payload) {
      for (const listener of this.changeListeners) listener(message.payload);
      return;
    }
    if (message.channel !== this.channel || !message.payload) return;
    this.stats.notifications += 1;
    let notice: Notice;
    try {
      notice = JSON.parse(message.payload) as Notice;
    } catch {
      return;
    }
    // Our own changes were delivered locally by publish(); nobody here listens for the others.
    if (notice.node === this.node || typeof notice.id !== 'string' || !this.interest.has(notice.id)) return;
    this.refresh(notice.id);
  }

  /** One read per burst of notifications for a backup, however many streams follow it here. */
  private refresh(backupId: string): void {
    const inFlight = this.reading.get(backupId);
    if (inFlight) {
      inFlight.again = true;
      return;
    }
    const state = { again: false };
    this.reading.set(backupId, state);
    void (async () => {
      try {
        do {
          state.again = false;
          this.stats.reads += 1;
          const backup = await this.options.load(backupId);
          if (backup && !this.closed) this.local.deliver(backup);
        } while (state.again && !this.closed);
      } catch (error) {
        this.options.log?.(`status bus could not read backup ${backupId}`, error);
      } finally {
        this.reading.delete(backupId);
      }
    })();
  }
}
