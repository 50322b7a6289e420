/** A backup restored in this page: decrypted and verified in the restore worker (restore.worker.ts), then offered to save. */
import type { ArchiveEntry } from '../../archive-index.js';
import type { BackupMetadata } from '../../crypto/envelope.js';
import { shortId } from '../../format.js';
import { describeBackup, rememberKeys } from '../../key-use.js';
import { startRestore, type RestoreMessage } from '../../restore-protocol.js';
import { WorkerFailure } from '../../unlock.js';

export interface Restored {
  url: string;
  fileName: string;
  bytes: number;
  metadata: BackupMetadata;
  blob: Blob;
  entries: ArchiveEntry[];
}

/** Why a restore did not finish: the archive failed verification (integrity), or anything else. */
export interface RestoreFailure {
  integrity: boolean;
  message: string;
}

export type RestoreProgress = { done: number; total: number };

const safeName = (name: string) => name.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^-+|-+$/g, '') || 'backup';

/** The file a restored archive is saved as: a raw backup its own name, else a .tar named by name, date and id. */
function fileNameOf(backupId: string, metadata: BackupMetadata): string {
  const date = metadata.createdAt.slice(0, 10);
  return metadata.archive === 'raw' ? metadata.name : `${safeName(metadata.name)}-${date}-${shortId(backupId)}.tar`;
}

/**
 * Restores a backup in a worker: reports progress, remembers which key opened it (key-use.tsx), and resolves with the
 * archive once verified. `started` gets the function that stops the worker; `decrypted` runs as the archive arrives.
 */
export function restoreInWorker(
  request: { backupId: string; passphrase: string },
  progress: (progress: RestoreProgress) => void,
  started: (stop: () => void) => void,
  decrypted: () => void,
): Promise<Restored> {
  const { backupId } = request;
  let fingerprints: string[] = [];
  return new Promise<Restored>((resolve, reject) => {
    const onMessage = (message: RestoreMessage) => {
      switch (message.type) {
        case 'stage':
          if (message.stage === 'downloading') progress({ done: 0, total: 0 });
          break;
        case 'metadata':
          rememberKeys(fingerprints, new Map(), new Map([[backupId, describeBackup(message.metadata)]]));
          break;
        case 'key':
          fingerprints = message.fingerprints;
          rememberKeys(message.fingerprints, new Map([[backupId, message.use]]));
          break;
        case 'drills':
          rememberKeys(fingerprints, new Map(), new Map(), { byBackup: new Map([[backupId, message.verdicts]]), complete: false });
          break;
        case 'progress':
          progress({ done: message.done, total: message.total });
          break;
        case 'done':
          decrypted();
          resolve({
            url: URL.createObjectURL(message.blob),
            fileName: fileNameOf(backupId, message.metadata),
            bytes: message.bytes,
            metadata: message.metadata,
            blob: message.blob,
            entries: message.entries,
          });
          break;
        case 'error':
          reject(new WorkerFailure(message));
          break;
      }
    };
    started(startRestore(request, { onMessage }));
  });
}
