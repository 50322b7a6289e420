/** Plan and cadence: how often a backup may be made, how long it is kept, and when the next one is allowed. */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, type Overview } from '../api.js';
import { formatBytes, plural, shortId, When } from '../format.js';
import { BASE } from '../router.js';
import { Failure } from '../ui/alerts.js';

export function useOverview() {
  const [overview, setOverview] = useState<Overview | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  useEffect(() => {
    api('GET /console/api/overview').then(setOverview, (caught: unknown) => caught instanceof ApiError && setError(caught));
  }, []);
  return { overview, error };
}

export function PlanPage() {
  const { overview, error } = useOverview();
  return (
    <section>
      <h1 tabIndex={-1}>Plan and cadence</h1>
      <Failure error={error} />
      {!overview && !error && <p role="status">Loading…</p>}
      {overview && (
        <>
          <dl class="facts">
            <dt>Account</dt>
            <dd data-testid="account">
              {overview.accountLabel && <strong>{overview.accountLabel} </strong>}
              <span class="mono">{overview.accountId}</span>
              {overview.accountLabel && <span class="muted"> (the operator's name for it)</span>}
            </dd>
            <dt>Plan</dt>
            <dd class="plan-name">{overview.plan}</dd>
            <dt>Cadence</dt>
            <dd>
              One backup per {overview.intervalWords} (<code>{overview.backupInterval}</code>)
            </dd>
            <dt>Retention</dt>
            <dd>
              Each backup is kept {overview.retentionDays} days after it is finished{' '}
              <span class="muted">(after a plan change, backups finished from then on; earlier ones keep the expiry they have)</span>
            </dd>
            <dt>Next backup allowed</dt>
            <dd data-testid="next-allowed">
              {overview.cadence.nextAllowedAt ? <When at={overview.cadence.nextAllowedAt} /> : <strong>Now</strong>}
            </dd>
            <dt>Last backup reached READY</dt>
            <dd data-testid="last-ready">
              <When at={overview.cadence.lastReadyAt} empty="No backup is ready" />{' '}
              {overview.cadence.overdue && (
                <span
                  class="badge badge-failed"
                  data-testid="overdue"
                  title={`No backup reached READY within twice the interval (${overview.backupInterval})`}
                >
                  Overdue
                </span>
              )}
            </dd>
            <dt>Last finished backup started</dt>
            <dd>
              <When at={overview.cadence.lastReadyBackupCreatedAt} empty="No backup has finished yet" />
            </dd>
            <dt>Upload in progress</dt>
            <dd>
              {overview.cadence.inFlightBackupId ? (
                <a href={`${BASE}/backups/${overview.cadence.inFlightBackupId}`}>Backup {shortId(overview.cadence.inFlightBackupId)}</a>
              ) : (
                'None'
              )}
            </dd>
            <dt>Stored</dt>
            <dd>
              {plural(overview.backups.ready, 'ready backup')}, {formatBytes(overview.backups.storedCiphertextBytes)} encrypted
            </dd>
            <dt>Storage quota</dt>
            <dd data-testid="quota">
              <StorageUsage storedBytes={overview.storage.storedBytes} quotaBytes={overview.storage.quotaBytes} />
            </dd>
          </dl>
          <p class="help">
            The plan belongs to the account and is set by the operator (<code>coffer admin accounts set-plan</code>). Deleting a backup does
            not reset the cadence clock. The account is marked <strong>overdue</strong> when no backup reached READY within twice the
            interval. The quota counts the encrypted bytes of ready backups, of deleted backups still in their deletion grace, and of
            uploads in progress; at the quota a new backup is refused until backups are deleted or the operator raises it.
          </p>
        </>
      )}
    </section>
  );
}

/** Stored bytes against the quota: "1.2 MiB of 10 MiB (12 %)", a bar, and a warning at the quota; "no quota" without one. */
function StorageUsage({ storedBytes, quotaBytes }: { storedBytes: number; quotaBytes: number | null }) {
  if (quotaBytes === null) return <>{formatBytes(storedBytes)} used, no quota</>;
  const percent = quotaBytes === 0 ? 100 : Math.min(100, Math.floor((storedBytes / quotaBytes) * 100));
  const full = storedBytes >= quotaBytes;
  return (
    <>
      <span data-testid="quota-text">
        {formatBytes(storedBytes)} of {formatBytes(quotaBytes)} used ({percent} %)
      </span>{' '}
      <progress max={quotaBytes} value={Math.min(storedBytes, quotaBytes)} aria-label="Storage used of the quota" />
      {full && (
        <span
          class="badge badge-failed"
          data-testid="quota-full"
          title="New backups are refused until backups are deleted or the quota is raised"
        >
          Quota reached
        </span>
      )}
    </>
  );
}
