/** One backup: its record (live), restore in the browser (backup/Restore.tsx), and delete. */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api } from '../api.js';
import { formatBytes, plural, shortId, statusText, StatusBadge, When } from '../format.js';
import { BackupKey, BackupName, useKnownKeys } from '../key-use.js';
import { useBackup } from '../live.js';
import { ConfirmAction } from '../ui/confirm.js';
import { BASE, navigate, setFlash } from '../router.js';
import { Restore } from './backup/Restore.js';
import { BackupDrills } from '../drill-views.js';
import { Failure } from '../ui/alerts.js';

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
      <Failure error={error} />
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
      {backup.status === 'READY' && <BackupDrills backupId={backup.id} />}
      {backup.status === 'READY' ? <Restore backupId={id} /> : <p class="notice">Its files can be restored once it is READY.</p>}
      <Delete backupId={id} ready={backup.status === 'READY'} />
    </section>
  );
}
