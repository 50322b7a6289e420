/** Following a backup's status over Server-Sent Events, reconnecting after a timeout, a shutdown or a broken stream. */
import { setTimeout as sleep } from 'node:timers/promises';
import { CofferNetworkError, type BackupStatusEventBody, type CofferClient } from './sdk.js';
import type { BackupStreamClosedBody } from '../contract/schemas.js';

export { TERMINAL_STATUSES } from '../domain/backups.js';

export type StreamClosedBody = BackupStreamClosedBody;

export type WatchEvent =
  | { type: 'status'; data: BackupStatusEventBody }
  | { type: 'closed'; data: StreamClosedBody }
  | { type: 'reconnecting'; reason: string; attempt: number };

/** A `backup.stream.error` frame (its data is an ErrorResponse plus backupId). */
export class StatusStreamError extends Error {
  override readonly name = 'StatusStreamError';
  constructor(readonly data: Record<string, unknown>) {
    super(typeof data.error === 'string' ? data.error : 'the event stream reported an error');
  }
}

export async function* watchBackup(
  client: CofferClient,
  backupId: string,
  options: { signal?: AbortSignal; maxReconnects?: number; reconnectDelayMs?: number } = {},
): AsyncGenerator<WatchEvent> {
  const max = options.maxReconnects ?? 5;
  const delay = options.reconnectDelayMs ?? 1000;
  let attempt = 0;
  for (;;) {
    let closed: StreamClosedBody | undefined;
    let reason = 'the stream ended without a closing frame';
    try {
      for await (const frame of client.statusEvents(backupId, options.signal)) {
        if (frame.event === 'backup.status') {
          attempt = 0;
          yield { type: 'status', data: frame.data as BackupStatusEventBody };
        } else if (frame.event === 'backup.stream.closed') {
          closed = frame.data as StreamClosedBody;
          yield { type: 'closed', data: closed };
        } else if (frame.event === 'backup.stream.error') {
          throw new StatusStreamError((frame.data ?? {}) as Record<string, unknown>);
        }
      }
    } catch (error) {
      if (!(error instanceof CofferNetworkError) || options.signal?.aborted) throw error;
      reason = error.message;
    }
    if (closed?.reason === 'terminal') return;
    if (closed) reason = `the server closed the stream (${closed.reason})`;
    attempt += 1;
    if (attempt > max) throw new CofferNetworkError(`gave up following the backup: ${reason}`);
    yield { type: 'reconnecting', reason, attempt };
    await sleep(closed?.reason === 'timeout' ? 0 : delay * attempt, undefined, { signal: options.signal });
  }
}
