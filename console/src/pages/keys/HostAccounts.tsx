/** The account's host accounts and each one's backups. */
import { useEffect, useState } from 'preact/hooks';
import { api, type BackupRecord, type HostAccountInfo } from '../../api.js';
import { caughtText } from '../../caught.js';
import { formatBytes, plural, shortId, StatusBadge, When } from '../../format.js';
import { BASE } from '../../router.js';
import { Failure } from '../../ui/alerts.js';

type Host = { host: HostAccountInfo; backups: BackupRecord[] };

const VAULT_TEXT: Record<HostAccountInfo['vault'], string> = {
  shared: 'Same vault as yours.',
  diverged: 'Its vault was changed apart from yours: its backups open with the passphrase of its own vault.',
  none: 'It has no vault.',
};

function HostAccount({ host, backups }: Host) {
  return (
    <li data-host-account={host.accountId}>
      <h3>
        {host.label} <span class="mono muted">{shortId(host.accountId)}</span>
      </h3>
      <p class="help">
        Its own schedule: one backup every {host.backupInterval}. Added <When at={host.createdAt} />. {VAULT_TEXT[host.vault]}{' '}
        {plural(backups.length, 'backup')}.
      </p>
      {backups.length > 0 && (
        <ul>
          {backups.map((backup) => (
            <li key={backup.id} data-backup-id={backup.id}>
              <a href={`${BASE}/backups/${backup.id}`} aria-label={`Backup ${shortId(backup.id)} of ${host.label}, open details`}>
                <When at={backup.createdAt} />
              </a>{' '}
              <StatusBadge status={backup.status} /> <span class="muted">{formatBytes(backup.ciphertextSizeBytes)}</span>
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}

/**
 * The account's host accounts (GET /api/host-accounts, with this session) and each one's backups: they open like the
 * account's own (the same vault), from the backup page.
 */
export function HostAccounts({ version }: { version: number }) {
  const [hosts, setHosts] = useState<Host[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    (async () => {
      const { hosts: list } = await api('GET /api/host-accounts');
      const withBackups = await Promise.all(
        list.map(async (host) => ({
          host,
          backups: (await api('GET /api/host-accounts/:accountId/backups', { params: { accountId: host.accountId } })).backups,
        })),
      );
      if (!cancelled) setHosts(withBackups);
    })().catch((caught: unknown) => !cancelled && setError(caughtText(caught)));
    return () => {
      cancelled = true;
    };
  }, [version]);
  if (error) return <Failure error={error} />;
  if (!hosts) return <p role="status">Loading host accounts…</p>;
  if (hosts.length === 0) return <p class="help">No host accounts yet: add one above with the schedule “Its own”.</p>;
  return (
    <ul class="host-accounts" aria-label="Host accounts">
      {hosts.map(({ host, backups }) => (
        <HostAccount key={host.accountId} host={host} backups={backups} />
      ))}
    </ul>
  );
}
