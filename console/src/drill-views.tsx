/**
 * A backup's restore drills where the backup is shown (the Backups list, the Backup page): its newest verified drill
 * and every attestation that does not verify, flagged and never counted as proof (docs/console.md#restore-drills).
 */
import { useKnownKeys } from './key-use.js';
import { ageText, summarise, type DrillVerdict, type VerifiedDrill } from './drills.js';
import { plural, When } from './format.js';
import { BASE } from './router.js';

/** What the page says an attestation that does not verify is. */
const FLAG_WORDS: Record<Exclude<DrillVerdict['status'], 'verified'>, string> = {
  forged: 'This attestation does not verify: forged or altered.',
  mismatch: 'The server shows other facts than were signed.',
  malformed: 'Signed with a key of this vault, but not a valid attestation (a faulty client wrote it).',
};

export const flagWords = (verdict: Exclude<DrillVerdict, VerifiedDrill>) => FLAG_WORDS[verdict.status];

/** "Proven restorable 3 days ago" or "Drill failed 2 hours ago", with the time on hover. */
export function DrillOutcome({ drill, now }: { drill: VerifiedDrill; now: number }) {
  const passed = drill.payload.result === 'passed';
  return (
    <span class="drill-outcome" data-drill-result={drill.payload.result}>
      <span class={`badge ${passed ? 'drill-passed' : 'drill-failed'}`}>{passed ? 'Proven restorable' : 'Drill failed'}</span>{' '}
      <time dateTime={drill.payload.checkedAt} title={drill.payload.checkedAt}>
        {ageText(drill.payload.checkedAt, now)}
      </time>
    </span>
  );
}

/** The Backups list's cell: nothing proven before unlock; after it, the newest verified drill and the flagged count. */
export function DrillCell({ backupId }: { backupId: string }) {
  const drills = useKnownKeys()?.drills;
  if (!drills) return <span class="muted">Checked after unlock</span>;
  if (drills.failure) return <span class="muted">Could not be read</span>;
  const { newest, flagged } = summarise(drills.byBackup.get(backupId) ?? []);
  return (
    <span class="drill-cell" data-testid="drill-cell">
      {newest ? <DrillOutcome drill={newest} now={Date.now()} /> : <span class="muted">No verified drill</span>}
      {flagged.length > 0 && (
        <>
          {' '}
          <span class="badge drill-flagged" data-testid="drill-flagged" title="Not counted as proof">
            {plural(flagged.length, 'attestation')} {flagged.length === 1 ? 'does' : 'do'} not verify
          </span>
        </>
      )}
    </span>
  );
}

/** One attestation as the Backup page lists it: what it says once verified, else why it is flagged. */
function DrillEntry({ verdict, now }: { verdict: DrillVerdict; now: number }) {
  const { attestation } = verdict;
  if (verdict.status === 'verified') {
    const { payload } = verdict;
    return (
      <li class="drill-entry" data-drill-status="verified" data-attestation-id={attestation.id}>
        <DrillOutcome drill={verdict} now={now} /> <span class="muted">(verified with your vault's key {payload.vaultKey})</span>
        <br />
        Checked <When at={payload.checkedAt} /> by <span class="mono">{payload.drilledBy.machine || 'an unnamed machine'}</span> (
        {payload.drilledBy.client}): {payload.checks.join(', ') || 'no check'} passed
        {payload.failure && (
          <>
            ; <strong>failed:</strong> {payload.failure}
          </>
        )}
        .
      </li>
    );
  }
  return (
    <li class="drill-entry drill-entry-flagged" data-drill-status={verdict.status} data-attestation-id={String(attestation.id)}>
      <span class="badge drill-flagged">Does not verify</span> <strong>{flagWords(verdict)}</strong> Not counted as proof.
      <br />
      <span class="muted">
        The server shows it as a {String(attestation.result)} drill checked at {String(attestation.checkedAt)}; {verdict.reason}.
      </span>
    </li>
  );
}

/** The Backup page's panel: every drill attestation of this backup, verified after unlock. */
export function BackupDrills({ backupId }: { backupId: string }) {
  const drills = useKnownKeys()?.drills;
  const verdicts = drills?.byBackup.get(backupId);
  const now = Date.now();
  const { lastPassed } = summarise(verdicts ?? []);
  return (
    <section class="panel" aria-labelledby="drills-title" data-testid="backup-drills">
      <h2 id="drills-title">Restore drills</h2>
      {!verdicts && !drills?.failure && (
        <p>
          A drill (<code>coffer verify --drill</code>) downloads, decrypts and checks this backup, and records an attestation signed with
          your vault's key. Attestations are checked after the vault is unlocked in this page (Restore files below, or on the{' '}
          <a href={`${BASE}/drills`}>Restore drills</a> page): until then nothing is shown as proven.
        </p>
      )}
      {drills?.failure && <p class="error">The attestations could not be read: {drills.failure}</p>}
      {verdicts && verdicts.length === 0 && <p>No drill has been recorded for this backup.</p>}
      {verdicts && verdicts.length > 0 && (
        <>
          <p data-testid="backup-last-proven">
            {lastPassed ? (
              <>
                Last proven restorable: <When at={lastPassed.payload.checkedAt} /> ({ageText(lastPassed.payload.checkedAt, now)}).
              </>
            ) : (
              'No verified drill has passed for this backup.'
            )}
          </p>
          <ul class="drill-list">
            {verdicts.map((verdict) => (
              <DrillEntry key={verdict.attestation.id} verdict={verdict} now={now} />
            ))}
          </ul>
        </>
      )}
    </section>
  );
}
