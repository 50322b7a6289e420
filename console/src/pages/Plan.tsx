/** Plan and cadence: how often a backup may be made, how long it is kept, and when the next one is allowed. */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, type Overview } from '../api.js';
import { formatBytes, plural, shortId, When } from '../format.js';
import { BASE } from '../router.js';

export function useOverview() {
  const [overview, setOverview] = useState<Overview | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  useEffect(() => {
    api<Overview>('GET', '/console/api/overview').then(setOverview, (caught: unknown) => caught instanceof ApiError && setError(caught));
  }, []);
  return { overview, error };
}

export function PlanPage() {
  const { overview, error } = useOverview();
  return (
    <section>
      <h1 tabIndex={-1}>Plan and cadence</h1>
      {error && (
        <p class="error" role="alert">
          {error.message}
        </p>
      )}
      {!overview && !error && <p role="status">Loading…</p>}
      {overview && (
        <>
          <dl class="facts">
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
                <span class="badge badge-failed" data-testid="overdue" title={`No backup reached READY within twice the interval (${overview.backupInterval})`}>
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
              {plural(overview.backups.ready, 'ready backup')},{' '}
              {formatBytes(overview.backups.storedCiphertextBytes)} encrypted
            </dd>
          </dl>
          <p class="help">
            The plan belongs to the account and is set by the operator (<code>coffer admin accounts set-plan</code>). Deleting a backup does
            not reset the cadence clock. The account is marked <strong>overdue</strong> when no backup reached READY within twice the
            interval.
          </p>
        </>
      )}
    </section>
  );
}
