/** Messages between the page and its restore worker (src/restore.worker.ts). */
import type { ArchiveEntry } from './archive-index.js';
import type { BackupMetadata, KeyUse } from './crypto/envelope.js';
import type { DrillVerdict } from './drills.js';

export interface RestoreRequest {
  backupId: string;
  passphrase: string;
}

export type RestoreStage = 'unlocking' | 'downloading';

export type RestoreMessage =
  | { type: 'stage'; stage: RestoreStage }
  | { type: 'metadata'; metadata: BackupMetadata }
  /** Which key of the vault's ring opened the data key, and the ring's recipient fingerprints (current first). */
  | { type: 'key'; use: KeyUse; fingerprints: string[] }
  /** The backup's drill attestations, each verified with the vault's keys (none when the server's list could not be read). */
  | { type: 'drills'; verdicts: DrillVerdict[] }
  | { type: 'progress'; done: number; total: number }
  | { type: 'done'; blob: Blob; metadata: BackupMetadata; bytes: number; entries: ArchiveEntry[] }
  | { type: 'error'; integrity: boolean; wrongPassphrase: boolean; message: string };

export interface RestoreHandlers {
  onMessage(message: RestoreMessage): void;
}

/** Starts a restore in a new worker; the returned function stops it. */
export function startRestore(request: RestoreRequest, handlers: RestoreHandlers): () => void {
  const worker = new Worker(new URL('./restore.worker.ts', import.meta.url), { type: 'module', name: 'coffer-restore' });
  worker.onmessage = (event: MessageEvent<RestoreMessage>) => {
    handlers.onMessage(event.data);
    if (event.data.type === 'done' || event.data.type === 'error') worker.terminate();
  };
  worker.onerror = (event) => {
    handlers.onMessage({
      type: 'error',
      integrity: false,
      wrongPassphrase: false,
      message: event.message || 'the restore worker failed to start',
    });
    worker.terminate();
  };
  worker.postMessage(request);
  return () => worker.terminate();
}
