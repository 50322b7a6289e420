/** Backups, newest first, with live status (event streams) and new backups appearing as the CLI makes them. */
import { CardTable } from '../card-table.js';
import { formatBytes, plural, shortId, StatusBadge, When } from '../format.js';
import { BackupName, KeyCell, KeyUnlock, useBackupKeys } from '../key-use.js';
import { useBackups } from '../live.js';
import { useState } from 'preact/hooks';
import { BASE, takeFlash } from '../router.js';
import { ScheduledDeletions } from './Retention.js';

export function BackupsPage() {
  const { backups, error, announcement, refresh } = useBackups();
  const ready = backups?.filter((b) => b.status === 'READY').length ?? 0;
  const wrapped = useBackupKeys(backups);
  const [flash] = useState(takeFlash);
  /** Backups in their deletion grace (null: not known yet): while there are any, the account has backups to undelete. */
  const [scheduled, setScheduled] = useState<number | null>(null);
  return (
    <section>
      <h1 tabIndex={-1}>Backups</h1>
      <p class="lede">
        Newest first. Statuses update live; new backups appear as your devices make them.{' '}
        {backups && (
          <span>
            {plural(backups.length, 'backup')}, {ready} ready to restore.
          </span>
        )}
      </p>
      <p class="visually-hidden" aria-live="polite" role="status">
        {announcement}
      </p>
      {flash && (
        <p class="notice" role="status" data-testid="flash">
          {flash}
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {error.message} {error.resolution}
        </p>
      )}
      {backups === null && !error && <p role="status">Loading backups…</p>}
      {backups && backups.length === 0 && scheduled !== null && scheduled > 0 && (
        <div class="empty">
          <p>No backup is ready or in progress. {plural(scheduled, 'deleted backup')} can still be undeleted below.</p>
        </div>
      )}
      {backups && backups.length === 0 && scheduled === 0 && (
        <div class="empty">
          <p>No backups yet.</p>
          <p>
            Make one with the CLI: <code>coffer backup ~/Documents</code>. <a href={`${BASE}/cli`}>Install the CLI</a>.
          </p>
        </div>
      )}
      {backups && backups.length > 0 && (
        <CardTable
          label="Backups"
          rows={backups}
          row={(backup) => ({ key: backup.id, 'data-backup-id': backup.id })}
          columns={[
            {
              header: 'Created',
              cell: (backup) => (
                <>
                  <a href={`${BASE}/backups/${backup.id}`} aria-label={`Backup ${shortId(backup.id)}, open details`}>
                    <When at={backup.createdAt} />
                  </a>
                  <span class="mono muted"> {shortId(backup.id)}</span>
                  <br />
                  <BackupName backupId={backup.id} />
                </>
              ),
            },
            { header: 'Status', cell: (backup) => <StatusBadge status={backup.status} /> },
            {
              header: 'Size (encrypted / original)',
              label: 'Size',
              cell: (backup) => `${formatBytes(backup.ciphertextSizeBytes)} / ${formatBytes(backup.plaintextSizeBytes)}`,
            },
            {
              header: 'Versions (client / host app)',
              label: 'Versions',
              cell: (backup) => `${backup.clientVersion ?? '—'} / ${backup.hostappVersion ?? '—'}`,
            },
            { header: 'Expires', cell: (backup) => <When at={backup.expiresAt} /> },
            { header: 'Key', cell: (backup) => <KeyCell backupId={backup.id} wrappedDek={wrapped?.get(backup.id)?.wrappedDek} /> },
          ]}
        />
      )}
      {backups && backups.length > 0 && <KeyUnlock />}
      <ScheduledDeletions onRestored={refresh} onLoaded={setScheduled} />
    </section>
  );
}
