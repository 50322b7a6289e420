/** An account's locked backups on its page: each backup whose object the store keeps (S3 Object Lock), and until when. */
import { CardTable } from '../ui/card-table.js';
import { bytes, when, type AccountData } from './api.js';

export function AccountLocks({ locked }: { locked: AccountData['locked'] }) {
  return (
    <section class="panel" aria-labelledby="locked-backups">
      <h2 id="locked-backups">Locked backups</h2>
      {locked.length === 0 ? (
        <p class="empty">No backup of this account is locked.</p>
      ) : (
        <>
          <p class="muted">The store refuses to remove these objects before their date, a DELETED backup’s too.</p>
          <CardTable
            testId="locked-backups"
            rows={locked}
            row={(b) => ({ key: b.backupId, 'data-backup': b.backupId })}
            columns={[
              { header: 'Backup', class: 'wrap', cell: (b) => <span class="mono">{b.backupId}</span> },
              { header: 'Status', cell: (b) => b.status },
              { header: 'Size', cell: (b) => (b.ciphertextSizeBytes === null ? '-' : bytes(b.ciphertextSizeBytes)) },
              { header: 'Locked until', cell: (b) => when(b.lockedUntil) },
            ]}
          />
        </>
      )}
    </section>
  );
}
