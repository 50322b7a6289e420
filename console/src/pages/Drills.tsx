/**
 * Restore drills: per host (the account's own backups and each host account) and profile, "last proven restorable"
 * = the newest verified drill that passed, with a warning past the chosen age (docs/console.md#restore-drills).
 * Every attestation is verified in this page with the vault's keys; nothing is shown as proven before that.
 */
import { useState } from 'preact/hooks';
import {
  AGE_CHOICES,
  ageText,
  olderThan,
  profileRows,
  storedMaxAge,
  MAX_AGE_STORAGE_KEY,
  type MaxAgeDays,
  type ProfileRow,
} from '../drills.js';
import { DrillOutcome } from '../drill-views.js';
import { plural, shortId, When } from '../format.js';
import { useKnownKeys, usePassphraseUnlock } from '../key-use.js';
import { useBackups } from '../live.js';
import { BASE } from '../router.js';
import { CardTable } from '../ui/card-table.js';
import { UnlockStatus, VaultPassphraseForm } from '../unlock.js';

type Standing = 'proven' | 'stale' | 'never';

const standingOf = (row: ProfileRow, maxAge: number, now: number): Standing =>
  !row.lastPassed ? 'never' : olderThan(row.lastPassed.payload.checkedAt, maxAge, now) ? 'stale' : 'proven';

const browserStorage = (): Storage | undefined => {
  try {
    return window.localStorage;
  } catch {
    return undefined;
  }
};

function MaxAge({ value, onChange }: { value: MaxAgeDays; onChange: (days: MaxAgeDays) => void }) {
  return (
    <p class="drill-age">
      <label for="drill-max-age">Warn when the last proof is older than</label>{' '}
      <select
        id="drill-max-age"
        value={String(value)}
        onChange={(event) => onChange(Number((event.target as HTMLSelectElement).value) as MaxAgeDays)}
      >
        {AGE_CHOICES.map((days) => (
          <option key={days} value={String(days)}>
            {plural(days, 'day')}
          </option>
        ))}
      </select>
    </p>
  );
}

/** The passphrase that opens the vault in this page to verify every attestation (then the keys are dropped again). */
function DrillUnlock() {
  const { state, passphrase, setPassphrase, unlock } = usePassphraseUnlock();
  return (
    <section class="panel" aria-labelledby="drill-unlock-title">
      <h2 id="drill-unlock-title">Check the attestations</h2>
      <p>
        Attestations are checked after the vault is unlocked in this page: until then nothing is shown as proven. The passphrase and the
        keys it opens never leave this browser.
      </p>
      <VaultPassphraseForm
        id="drills-passphrase"
        errorId="drills-error"
        state={state}
        passphrase={passphrase}
        onPassphrase={setPassphrase}
        onSubmit={unlock}
      >
        Check drills
      </VaultPassphraseForm>
      <UnlockStatus state={state} errorId="drills-error" />
    </section>
  );
}

function ProfileCell({ row, ambiguous }: { row: ProfileRow; ambiguous: boolean }) {
  if (!row.profile) {
    return (
      <span>
        Backup <a href={`${BASE}/backups/${row.backupIds[0]}`}>{shortId(row.backupIds[0]!)}</a>{' '}
        <span class="muted">(its name could not be opened with this vault)</span>
      </span>
    );
  }
  return (
    <span>
      <strong>{row.profile.name}</strong> <span class="muted">from</span> <span class="mono">{row.profile.source}</span>
      {ambiguous && row.profile.chainId && <span class="muted mono"> chain {shortId(row.profile.chainId)}</span>}
    </span>
  );
}

function ProvenCell({ row, standing, maxAge, now }: { row: ProfileRow; standing: Standing; maxAge: number; now: number }) {
  return (
    <span data-testid="last-proven">
      {row.lastPassed ? (
        <>
          <When at={row.lastPassed.payload.checkedAt} /> <span class="muted">({ageText(row.lastPassed.payload.checkedAt, now)})</span>
        </>
      ) : (
        'Never'
      )}
      {standing !== 'proven' && (
        <>
          {' '}
          <span class="badge drill-warning" data-testid="drill-warning">
            {standing === 'never' ? 'Never proven restorable' : `Older than ${plural(maxAge, 'day')}`}
          </span>
        </>
      )}
    </span>
  );
}

function NotesCell({ row, now }: { row: ProfileRow; now: number }) {
  return (
    <span>
      {row.failedSince && (
        <span data-testid="drill-failed">
          <DrillOutcome drill={row.failedSince} now={now} />
          {row.failedSince.payload.failure && <span> {row.failedSince.payload.failure}</span>}{' '}
        </span>
      )}
      {row.flagged > 0 && (
        <span class="badge drill-flagged" data-testid="drill-flagged" title="Not counted as proof">
          {plural(row.flagged, 'attestation')} {row.flagged === 1 ? 'does' : 'do'} not verify
        </span>
      )}
      {!row.failedSince && row.flagged === 0 && <span class="muted">{plural(row.backupIds.length, 'backup')}</span>}
    </span>
  );
}

function ProfileTable({ rows, maxAge }: { rows: ProfileRow[]; maxAge: MaxAgeDays }) {
  const now = Date.now();
  const label = (row: ProfileRow) => `${row.host.accountId ?? ''}\0${row.profile?.name ?? ''}\0${row.profile?.source ?? ''}`;
  const ambiguous = new Set(rows.map(label).filter((key, i, all) => all.indexOf(key) !== i));
  const standings = new Map(rows.map((row) => [row.key, standingOf(row, maxAge, now)]));
  const needing = rows.filter((row) => standings.get(row.key) !== 'proven').length;
  if (rows.length === 0) return <p data-testid="drill-summary">No backup is ready yet: there is nothing to drill.</p>;
  return (
    <>
      {needing > 0 ? (
        <p class="error" role="alert" data-testid="drill-summary">
          {plural(needing, 'profile')} {needing === 1 ? 'has' : 'have'} no passed drill in the last {plural(maxAge, 'day')}: run{' '}
          <code>coffer verify --drill</code> on {needing === 1 ? 'it' : 'them'}.
        </p>
      ) : (
        <p class="success" role="status" data-testid="drill-summary">
          Every profile was proven restorable in the last {plural(maxAge, 'day')}.
        </p>
      )}
      <CardTable
        label="Restore drills by host and profile"
        testId="drill-profiles"
        rows={rows}
        row={(row) => ({ key: row.key, 'data-drill-standing': standings.get(row.key)!, 'data-host': row.host.label ?? '' })}
        columns={[
          {
            header: 'Host',
            cell: (row) => (row.host.label === null ? 'Your own backups' : <span class="badge host-badge">host {row.host.label}</span>),
          },
          { header: 'Profile', cell: (row) => <ProfileCell row={row} ambiguous={ambiguous.has(label(row))} /> },
          {
            header: 'Last proven restorable',
            cell: (row) => <ProvenCell row={row} standing={standings.get(row.key)!} maxAge={maxAge} now={now} />,
          },
          { header: 'Notes', cell: (row) => <NotesCell row={row} now={now} /> },
        ]}
      />
    </>
  );
}

export function DrillsPage() {
  const { backups, error } = useBackups();
  const keys = useKnownKeys();
  const [maxAge, setMaxAge] = useState<MaxAgeDays>(() => storedMaxAge(browserStorage()));
  const chooseMaxAge = (days: MaxAgeDays) => {
    setMaxAge(days);
    browserStorage()?.setItem(MAX_AGE_STORAGE_KEY, String(days));
  };
  const drills = keys?.drills?.complete ? keys.drills : null;
  return (
    <section>
      <h1 tabIndex={-1}>Restore drills</h1>
      <p class="lede">
        A drill (<code>coffer verify --drill</code>) downloads, decrypts and checks a backup end to end without writing it anywhere, and
        records an attestation signed with a key derived from your vault's master key. This page verifies each one with your vault's keys:
        the server stores them but cannot make or change one. Only a verified drill counts as proof.
      </p>
      <MaxAge value={maxAge} onChange={chooseMaxAge} />
      {error && (
        <p class="error" role="alert">
          {error.message} {error.resolution}
        </p>
      )}
      {!drills && <DrillUnlock />}
      {drills?.failure && (
        <p class="error" role="alert">
          The attestations could not be read, so nothing is shown as proven: {drills.failure}
        </p>
      )}
      {drills && !drills.failure && backups === null && <p role="status">Loading backups…</p>}
      {drills && !drills.failure && backups && (
        <ProfileTable rows={profileRows(backups, keys?.described ?? new Map(), drills)} maxAge={maxAge} />
      )}
    </section>
  );
}
