/** Backups, newest first, with live status (event streams) and new backups appearing as the CLI makes them. */
import { CardTable } from '../ui/card-table.js';
import { formatBytes, plural, shortId, StatusBadge, When } from '../format.js';
import { BackupName, KeyCell, KeyUnlock, useBackupKeys } from '../key-use.js';
import { DrillCell } from '../drill-views.js';
import { useBackups } from '../live.js';
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import { BASE, takeFlash } from '../router.js';
import { ScheduledDeletions } from './Retention.js';

/**
 * What to do first on an account without backups, by what it has: a key the CLI can back up with, then a vault
 * (`coffer init`), then a backup. Suggesting `coffer backup` before there is a key or a vault sends a newcomer
 * into a refusal.
 */
function NextStep() {
  const [state, setState] = useState<'no-key' | 'no-vault' | 'ready' | null>(null);
  useEffect(() => {
    Promise.all([api('GET /console/api/overview'), api('GET /console/api/keys')]).then(
      ([overview, { keys }]) => {
        const canWrite = keys.some((key) => key.status === 'active' && key.scopes.includes('backups:write'));
        setState(overview.vault.initialized ? 'ready' : canWrite ? 'no-vault' : 'no-key');
      },
      () => setState('ready'),
    );
  }, []);
  if (state === null) return null;
  const cli = <a href={`${BASE}/cli`}>Install the CLI</a>;
  if (state === 'no-key') {
    return (
      <p data-testid="next-step">
        First make an API key for the computer you back up: <a href={`${BASE}/keys`}>API keys</a>, with the write permission. Then, on that
        computer, <code>coffer init</code> creates your vault with a passphrase that never leaves it. {cli}.
      </p>
    );
  }
  if (state === 'no-vault') {
    return (
      <p data-testid="next-step">
        Next, create your vault on the computer you back up: <code>coffer init</code> (with your API key in <code>COFFER_API_KEY</code>)
        asks for a passphrase that never leaves it. Then <code>coffer backup ~/Documents</code>. {cli}.
      </p>
    );
  }
  return (
    <p data-testid="next-step">
      Make one with the CLI: <code>coffer backup ~/Documents</code>. {cli}.
    </p>
  );
}

export function BackupsPage() {
  const { backups, error, announcement, refresh } = useBackups();
  const ready = backups?.filter((b) => b.status === 'READY').length ?? 0;
  const hostCount = backups?.filter((b) => b.host).length ?? 0;
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
            {plural(backups.length, 'backup')}
            {hostCount > 0 && ` (${hostCount} of your host accounts)`}, {ready} ready to restore.
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
          <NextStep />
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
                  {backup.host && (
                    <>
                      {' '}
                      <span
                        class="badge host-badge"
                        data-testid="host-badge"
                        title="A backup of one of your host accounts (its own schedule)"
                      >
                        host {backup.host.label}
                      </span>
                    </>
                  )}
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
            { header: 'Restore drill', cell: (backup) => <DrillCell backupId={backup.id} /> },
          ]}
        />
      )}
      {backups && backups.length > 0 && <KeyUnlock />}
      <ScheduledDeletions onRestored={refresh} onLoaded={setScheduled} />
    </section>
  );
}
