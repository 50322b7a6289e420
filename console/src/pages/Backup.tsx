/** One backup: its record (live), restore in the browser, and delete. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api } from '../api.js';
import type { BackupMetadata } from '../crypto/envelope.js';
import { formatBytes, plural, shortId, statusText, StatusBadge, When } from '../format.js';
import { BackupKey, BackupName, rememberKeys, sourceOf, useKnownKeys } from '../key-use.js';
import { useBackup } from '../live.js';
import type { ArchiveEntry } from '../archive-index.js';
import { startRestore, type RestoreMessage } from '../restore-protocol.js';
import { ConfirmAction } from '../ui/confirm.js';
import { BackupFiles } from './BackupFiles.js';
import { BASE, navigate, setFlash } from '../router.js';
import { useUnlock, VaultPassphraseForm, WorkerFailure } from '../unlock.js';

interface Restored {
  url: string;
  fileName: string;
  bytes: number;
  metadata: BackupMetadata;
  blob: Blob;
  entries: ArchiveEntry[];
}

/** Why a restore did not finish: the archive failed verification (integrity), or anything else. */
interface RestoreFailure {
  integrity: boolean;
  message: string;
}

const safeName = (name: string) => name.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^-+|-+$/g, '') || 'backup';

function Restore({ backupId }: { backupId: string }) {
  const [passphrase, setPassphrase] = useState('');
  const stop = useRef<(() => void) | null>(null);
  const saveLink = useRef<HTMLAnchorElement>(null);
  const passphraseInput = useRef<HTMLInputElement>(null);
  const { state, run } = useUnlock<Restored, RestoreFailure, { done: number; total: number }>({
    describe: (caught) =>
      caught instanceof WorkerFailure
        ? { integrity: caught.report.integrity ?? false, message: caught.report.message }
        : { integrity: false, message: String(caught) },
    focusOnError: ({ wrongPassphrase }) => (wrongPassphrase ? passphraseInput : null),
  });

  // Leaving the page stops a running restore; a saved archive's object URL is released when it is replaced.
  useEffect(() => () => stop.current?.(), []);
  useEffect(() => {
    if (state.phase !== 'done') return;
    const { url } = state.result;
    return () => URL.revokeObjectURL(url);
  }, [state]);

  // Offer the file as soon as it is verified (the link stays for a second save).
  useEffect(() => {
    if (state.phase === 'done') saveLink.current?.click();
  }, [state.phase]);

  const restore = (event: Event) => {
    event.preventDefault();
    if (!passphrase) return;
    let fingerprints: string[] = [];
    void run(
      (progress) =>
        new Promise<Restored>((resolve, reject) => {
          stop.current = startRestore(
            { backupId, passphrase },
            {
              onMessage(message: RestoreMessage) {
                switch (message.type) {
                  case 'stage':
                    if (message.stage === 'downloading') progress({ done: 0, total: 0 });
                    break;
                  case 'metadata':
                    rememberKeys(
                      fingerprints,
                      new Map(),
                      new Map([[backupId, { name: message.metadata.name, source: sourceOf(message.metadata) }]]),
                    );
                    break;
                  case 'key':
                    fingerprints = message.fingerprints;
                    rememberKeys(message.fingerprints, new Map([[backupId, message.use]]));
                    break;
                  case 'progress':
                    progress({ done: message.done, total: message.total });
                    break;
                  case 'done': {
                    const date = message.metadata.createdAt.slice(0, 10);
                    setPassphrase('');
                    resolve({
                      url: URL.createObjectURL(message.blob),
                      fileName:
                        message.metadata.archive === 'raw'
                          ? message.metadata.name
                          : `${safeName(message.metadata.name)}-${date}-${shortId(backupId)}.tar`,
                      bytes: message.bytes,
                      metadata: message.metadata,
                      blob: message.blob,
                      entries: message.entries,
                    });
                    break;
                  }
                  case 'error':
                    reject(new WorkerFailure(message));
                    break;
                }
              },
            },
          );
        }),
    );
  };

  const restored = state.phase === 'done' ? state.result : null;
  return (
    <section class="panel" aria-labelledby="restore-title">
      <h2 id="restore-title">Restore files</h2>
      <p>
        The encrypted archive is downloaded and decrypted in this page with your passphrase, checked against its sealed SHA-256, then saved
        as a <code>.tar</code> file. The passphrase and the files never leave this browser.
      </p>
      <VaultPassphraseForm
        id="passphrase"
        errorId="restore-error"
        state={state}
        passphrase={passphrase}
        onPassphrase={setPassphrase}
        onSubmit={restore}
        inputRef={passphraseInput}
      >
        Decrypt and save
      </VaultPassphraseForm>
      <div aria-live="polite" role="status" class="restore-status">
        {state.phase === 'busy' && !state.progress && <p>Unlocking the vault (Argon2id, this takes a moment)…</p>}
        {state.phase === 'busy' && state.progress && (
          <>
            <label for="restore-progress">Downloading and decrypting</label>
            <progress id="restore-progress" max={state.progress.total || 1} value={state.progress.done} />
            <p class="muted">
              {formatBytes(state.progress.done)} of {formatBytes(state.progress.total)}
            </p>
          </>
        )}
        {restored && (
          <div class="success">
            <p>
              <strong>Decrypted and verified.</strong> {formatBytes(restored.bytes)} archive of “{restored.metadata.name}”:{' '}
              {plural(restored.metadata.fileCount, 'file')}, {plural(restored.metadata.directoryCount, 'folder')},{' '}
              {plural(restored.metadata.symlinkCount, 'link')}, from <code>{restored.metadata.sourcePath}</code>. Final tag, size and
              SHA-256 all match.
            </p>
            <p>
              <a ref={saveLink} class="button" href={restored.url} download={restored.fileName}>
                Save {restored.fileName}
              </a>
            </p>
            <p class="help">
              Unpack with <code>tar -xf {restored.fileName}</code>, or restore directly with{' '}
              <code>coffer restore {backupId} ./restored</code>.
            </p>
          </div>
        )}
      </div>
      {state.phase === 'error' && (
        <div class="error" role="alert" id="restore-error">
          {state.wrongPassphrase ? (
            <p>
              <strong>Wrong passphrase.</strong> The vault could not be unlocked with it, so nothing was downloaded or decrypted. Check the
              passphrase (it is case-sensitive) and try again.
            </p>
          ) : state.failure.integrity ? (
            <p>
              <strong>This backup failed verification and was not saved:</strong> {state.failure.message}.
            </p>
          ) : (
            <p>
              <strong>The restore did not finish:</strong> {state.failure.message}
            </p>
          )}
        </div>
      )}
      {restored && <BackupFiles archive={restored.blob} metadata={restored.metadata} entries={restored.entries} />}
    </section>
  );
}

/** What a delete does now: kept restorable for the account's deletion grace (days), or removed at once (0). */
export function deletionWords(graceDays: number): string {
  return graceDays === 0
    ? 'Deleting removes the encrypted archive from the server for good, at once: it cannot be undeleted.'
    : `Deleting hides it from your backups and keeps it restorable for ${plural(graceDays, 'day')}: until then “Undelete” under ` +
        '“Scheduled for deletion” on the Backups page brings it back. After that the ' +
        'encrypted archive is removed from the server for good.';
}

function Delete({ backupId, ready }: { backupId: string; ready: boolean }) {
  const [error, setError] = useState<string | null>(null);
  const [graceDays, setGraceDays] = useState<number | null>(null);
  useEffect(() => {
    api('GET /console/api/deletions').then(
      (data) => setGraceDays(data.deletionGraceDays),
      () => setGraceDays(null),
    );
  }, []);
  // Only a READY backup is kept in the grace; an unfinished one is removed at once.
  const kept = ready && graceDays !== null && graceDays > 0;
  const remove = async () => {
    try {
      const deleted = await api('DELETE /api/backups/:id', { params: { id: backupId } });
      setFlash(
        deleted?.status === 'DELETING' && kept
          ? `Backup ${shortId(backupId)} is deleted: it stays restorable for ${plural(graceDays ?? 0, 'day')} (Undelete, under “Scheduled for deletion” below).`
          : `Backup ${shortId(backupId)} is deleted for good.`,
      );
      navigate('/');
    } catch (caught) {
      setError(caught instanceof ApiError ? `${caught.message} ${caught.resolution}` : String(caught));
    }
  };
  return (
    <section class="panel danger-zone" aria-labelledby="delete-title">
      <h2 id="delete-title">Delete</h2>
      <p data-testid="delete-words">
        {graceDays === null ? 'Checking what a delete does on this account…' : ready ? deletionWords(graceDays) : deletionWords(0)}
      </p>
      <ConfirmAction
        ask="Delete this backup…"
        askClass="danger"
        confirm="Yes, delete it"
        keep="Keep it"
        question="Confirm deletion"
        onConfirm={remove}
      />
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}

/** The sealed name and source once the vault was unlocked in this page; until then, how to see them. */
function NameOrHint({ backupId }: { backupId: string }) {
  const described = useKnownKeys()?.described?.get(backupId);
  if (described) return <BackupName backupId={backupId} />;
  return (
    <span class="muted">
      Sealed with the backup: shown once the vault is unlocked in this page (Restore files below, or Keys on the Backups page).
    </span>
  );
}

export function BackupPage({ id }: { id: string }) {
  const { backup, error } = useBackup(id);
  if (error) {
    return (
      <section>
        <h1 tabIndex={-1}>Backup not found</h1>
        <p class="error" role="alert">
          {error.message} <a href={BASE}>Back to your backups</a>.
        </p>
      </section>
    );
  }
  if (!backup) return <p role="status">Loading backup…</p>;
  return (
    <section>
      <p class="crumbs">
        <a href={BASE}>Backups</a> › {shortId(backup.id)}
      </p>
      <h1 tabIndex={-1}>
        Backup <span class="mono">{shortId(backup.id)}</span>
      </h1>
      <dl class="facts">
        <dt>Name and source</dt>
        <dd>
          <NameOrHint backupId={backup.id} />
        </dd>
        <dt>Status</dt>
        <dd>
          <span aria-live="polite">
            <StatusBadge status={backup.status} />
            {/* The badge already says READY, DELETED…: the words only where they add something ("Waiting for upload"). */}
            {statusText(backup.status).toUpperCase() !== backup.status && <span class="muted"> {statusText(backup.status)}</span>}
          </span>
        </dd>
        <dt>Backup id</dt>
        <dd class="mono">{backup.id}</dd>
        <dt>Created</dt>
        <dd>
          <When at={backup.createdAt} />
        </dd>
        <dt>Expires</dt>
        <dd>
          <When at={backup.expiresAt} />
        </dd>
        <dt>Encrypted size</dt>
        <dd>{formatBytes(backup.ciphertextSizeBytes)}</dd>
        <dt>Original size (tar)</dt>
        <dd>{formatBytes(backup.plaintextSizeBytes)}</dd>
        <dt>Client version</dt>
        <dd>{backup.clientVersion ?? '—'}</dd>
        <dt>Host app version</dt>
        <dd>{backup.hostappVersion ?? '—'}</dd>
        <dt>Encryption</dt>
        <dd>Envelope {backup.cryptoVersion}: XChaCha20-Poly1305 secretstream, key wrapped for this backup only</dd>
        <BackupKey backupId={backup.id} wrappedDek={backup.wrappedDek} />
      </dl>
      {backup.status === 'READY' ? <Restore backupId={id} /> : <p class="notice">Its files can be restored once it is READY.</p>}
      <Delete backupId={id} ready={backup.status === 'READY'} />
    </section>
  );
}
