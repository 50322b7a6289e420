/**
 * Live backup status: the list is read on load and every few seconds (new backups appear), and every backup that
 * is not in a terminal state is followed on its Server-Sent Events stream, so a status change shows at once.
 */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, TERMINAL_STATUSES, api, type BackupDetail, type BackupRecord, type StatusEvent } from './api.js';
import { statusText } from './format.js';

const POLL_MS = 3000;

/** Follows one backup's event stream until a terminal status; returns the function that stops it. */
export function followStatus(backupId: string, onStatus: (event: StatusEvent) => void): () => void {
  // Same origin: the session cookie goes along (EventSource cannot send headers, and needs none).
  const source = new EventSource(`/api/backups/${encodeURIComponent(backupId)}/events`);
  const stop = () => source.close();
  source.addEventListener('backup.status', (event) => onStatus(JSON.parse((event as MessageEvent<string>).data) as StatusEvent));
  // The server ends the stream after a terminal status or a timeout: do not let EventSource reconnect by itself.
  source.addEventListener('backup.stream.closed', stop);
  source.addEventListener('backup.stream.error', stop);
  source.onerror = () => {
    if (source.readyState !== EventSource.OPEN) stop();
  };
  return stop;
}

const applyEvent = <T extends BackupRecord>(record: T, event: StatusEvent): T => ({
  ...record,
  status: event.status,
  expiresAt: event.expiresAt,
  ciphertextSizeBytes: event.ciphertextSizeBytes,
  plaintextSizeBytes: event.plaintextSizeBytes,
  clientVersion: event.clientVersion,
  hostappVersion: event.hostappVersion,
});

/** A backup as the Backups page lists it: the account's own, or one of its host accounts' (`host` says which). */
export type ListedBackup = BackupRecord & { host?: { accountId: string; label: string } };

/**
 * The account's own backups and every host account's (docs/console.md "Backups"), newest first, as `coffer list`
 * shows them: the owner reads its host accounts' backups (GET /api/host-accounts). A session that may not list host
 * accounts lists its own only.
 */
async function everyBackup(): Promise<ListedBackup[]> {
  const [{ backups: own }, hosts] = await Promise.all([
    api('GET /api/backups'),
    api('GET /api/host-accounts', { quiet401: true }).then(
      ({ hosts: list }) => list,
      (caught: unknown) => {
        if (caught instanceof ApiError && caught.status !== 401) return [];
        throw caught;
      },
    ),
  ]);
  const theirs = await Promise.all(
    hosts.map(async (host) =>
      (await api('GET /api/host-accounts/:accountId/backups', { params: { accountId: host.accountId } })).backups.map(
        (record): ListedBackup => ({ ...record, host: { accountId: host.accountId, label: host.label } }),
      ),
    ),
  );
  return [...own, ...theirs.flat()].sort((a, b) => b.createdAt.localeCompare(a.createdAt) || a.id.localeCompare(b.id));
}

export interface LiveBackups {
  backups: ListedBackup[] | null;
  error: ApiError | null;
  /** The last change, for the polite live region. */
  announcement: string;
  refresh(): void;
}

export function useBackups(): LiveBackups {
  const [backups, setBackups] = useState<ListedBackup[] | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [announcement, setAnnouncement] = useState('');
  const streams = useRef(new Map<string, () => void>());
  const known = useRef(new Map<string, ListedBackup>());

  const onStatus = useCallback((event: StatusEvent) => {
    const before = known.current.get(event.backupId);
    if (before && before.status !== event.status) setAnnouncement(`Backup ${event.backupId.slice(0, 8)}: ${statusText(event.status)}.`);
    setBackups((list) => list?.map((b) => (b.id === event.backupId ? applyEvent(b, event) : b)) ?? list);
    if (before) known.current.set(event.backupId, applyEvent(before, event));
    if (TERMINAL_STATUSES.includes(event.status)) {
      streams.current.get(event.backupId)?.();
      streams.current.delete(event.backupId);
    }
  }, []);

  const refresh = useCallback(async () => {
    try {
      const list = await everyBackup();
      for (const record of list) {
        const before = known.current.get(record.id);
        if (!before && known.current.size > 0) setAnnouncement(`New backup ${record.id.slice(0, 8)}: ${statusText(record.status)}.`);
        else if (before && before.status !== record.status)
          setAnnouncement(`Backup ${record.id.slice(0, 8)}: ${statusText(record.status)}.`);
      }
      known.current = new Map(list.map((record) => [record.id, record]));
      setBackups(list);
      setError(null);
      for (const [id, stop] of streams.current) {
        const record = known.current.get(id);
        if (!record || TERMINAL_STATUSES.includes(record.status)) {
          stop();
          streams.current.delete(id);
        }
      }
      for (const record of list) {
        if (!TERMINAL_STATUSES.includes(record.status) && !streams.current.has(record.id)) {
          streams.current.set(record.id, followStatus(record.id, onStatus));
        }
      }
    } catch (caught) {
      if (caught instanceof ApiError) setError(caught);
    }
  }, [onStatus]);

  useEffect(() => {
    void refresh();
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') void refresh();
    }, POLL_MS);
    const openStreams = streams.current;
    return () => {
      clearInterval(timer);
      for (const stop of openStreams.values()) stop();
      openStreams.clear();
    };
  }, [refresh]);

  return { backups, error, announcement, refresh: () => void refresh() };
}

/** One backup, live. */
export function useBackup(id: string) {
  const [backup, setBackup] = useState<BackupDetail | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  useEffect(() => {
    let stop: (() => void) | undefined;
    let cancelled = false;
    api('GET /api/backups/:id', { params: { id } }).then(
      (detail) => {
        if (cancelled) return;
        setBackup(detail);
        if (!TERMINAL_STATUSES.includes(detail.status)) {
          stop = followStatus(id, (event) => {
            setBackup((current) => (current ? applyEvent(current, event) : current));
            // READY brings the wrapped key and sealed metadata with it: read the whole record again.
            if (event.status === 'READY') {
              void api('GET /api/backups/:id', { params: { id } }).then((fresh) => !cancelled && setBackup(fresh));
            }
          });
        }
      },
      (caught: unknown) => !cancelled && caught instanceof ApiError && setError(caught),
    );
    return () => {
      cancelled = true;
      stop?.();
    };
  }, [id]);
  return { backup, error, setBackup };
}
