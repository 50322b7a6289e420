/**
 * The deletion grace on the page: backups scheduled for deletion (undelete, or delete for good), the grace setting,
 * and the vault's kept envelopes (restore one). Actions that cannot be undone ask for a fresh sign-in first
 * (ConfirmSignIn, fresh-action.tsx), inside this session.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, type Deletions, type VaultHistory } from '../api.js';
import { asError, useFreshAction } from '../fresh-action.js';
import { formatBytes, plural, shortId, When } from '../format.js';
import { CardTable } from '../ui/card-table.js';
import { ConfirmAction } from '../ui/confirm.js';
import { valueOf } from '../ui/forms.js';

/** A section's last outcome: announced to screen readers, shown as a notice or an error. */
function Outcome({ message, error }: { message: string; error: ApiError | null }) {
  return (
    <>
      <p class="visually-hidden" role="status" aria-live="polite">
        {message}
      </p>
      {message && <p class="notice">{message}</p>}
      {error && (
        <p class="error" role="alert">
          {error.message} {error.resolution}
        </p>
      )}
    </>
  );
}

function GraceForm({
  data,
  grace,
  setGrace,
  save,
}: {
  data: Deletions;
  grace: string;
  setGrace: (grace: string) => void;
  save: (event: Event) => void;
}) {
  return (
    <form class="grace" onSubmit={save}>
      <label for="deletion-grace">Keep deleted backups restorable for (days)</label>
      <input
        id="deletion-grace"
        type="number"
        min={0}
        max={data.maxDeletionGraceDays}
        step={1}
        value={grace}
        onInput={(e) => setGrace(valueOf(e))}
      />
      <button type="submit" class="secondary" disabled={grace === String(data.deletionGraceDays)}>
        Save
      </button>
      <p class="help">
        {data.deletionGraceDays === 0
          ? 'Now 0: a delete removes the backup at once.'
          : `A deleted backup stays restorable here for ${data.deletionGraceDays} days, and so does the vault envelope a passphrase change or reset replaces.`}{' '}
        Backups whose plan retention ends are removed then, grace or not. Shortening the grace asks for a fresh sign-in.
      </p>
    </form>
  );
}

function ScheduledTable({
  data,
  undelete,
  purge,
}: {
  data: Deletions;
  undelete: (id: string) => void;
  purge: (id: string) => Promise<void>;
}) {
  return (
    <>
      <p>
        {plural(data.scheduled.length, 'backup')}, {formatBytes(data.scheduledCiphertextBytes)} still stored (they use storage) until
        removed.
      </p>
      <CardTable
        label="Backups scheduled for deletion"
        rows={data.scheduled}
        row={(backup) => ({ key: backup.id, 'data-scheduled-id': backup.id })}
        columns={[
          {
            header: 'Created',
            cell: (backup) => (
              <>
                <When at={backup.createdAt} /> <span class="mono muted">{shortId(backup.id)}</span>
              </>
            ),
          },
          { header: 'Deleted', cell: (backup) => <When at={backup.deletedAt} /> },
          { header: 'Removed for good', cell: (backup) => <When at={backup.purgeAfter} /> },
          { header: 'Size', cell: (backup) => formatBytes(backup.ciphertextSizeBytes) },
          {
            header: 'Actions',
            hiddenHeader: true,
            label: null,
            cell: (backup) => (
              <>
                <button type="button" onClick={() => undelete(backup.id)} aria-label={`Undelete backup ${shortId(backup.id)}`}>
                  Undelete
                </button>{' '}
                <ConfirmAction
                  ask="Delete now"
                  askLabel={`Delete backup ${shortId(backup.id)} now`}
                  confirm="Delete for good"
                  keep="Keep"
                  question={`Confirm deleting backup ${shortId(backup.id)} for good`}
                  onConfirm={() => purge(backup.id)}
                />
              </>
            ),
          },
        ]}
      />
    </>
  );
}

/** The Backups page's section: the grace setting and the backups scheduled for deletion. */
export function ScheduledDeletions({ onRestored, onLoaded }: { onRestored: () => void; onLoaded?: (scheduled: number) => void }) {
  const [data, setData] = useState<Deletions | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [message, setMessage] = useState('');
  const [grace, setGrace] = useState('');
  const { attempt, prompt } = useFreshAction();

  const load = () =>
    api('GET /console/api/deletions').then(
      (next) => {
        setData(next);
        setGrace(String(next.deletionGraceDays));
        onLoaded?.(next.scheduled.length);
      },
      (caught: unknown) => {
        setError(asError(caught));
        onLoaded?.(0);
      },
    );
  useEffect(() => {
    void load();
  }, []);

  const act = (what: string, run: () => Promise<string>) =>
    attempt(what, async () => {
      setError(null);
      try {
        setMessage(await run());
        await load();
      } catch (caught) {
        if (caught instanceof ApiError && caught.code === 'reauthentication_required') throw caught;
        setError(asError(caught));
      }
    });

  const undelete = (id: string) =>
    act('undelete a backup', async () => {
      await api('POST /console/api/deletions/:id/restore', { params: { id } });
      onRestored();
      return `Backup ${shortId(id)} is undeleted: it is back in your backups, ready again.`;
    });
  const purge = (id: string) =>
    act('delete a backup for good before its grace ends', async () => {
      await api('POST /console/api/deletions/:id/purge', { params: { id } });
      return `Backup ${shortId(id)} is deleted for good.`;
    });
  const saveGrace = (event: Event) => {
    event.preventDefault();
    const days = Number(grace);
    void act('shorten the deletion grace', async () => {
      await api('PUT /console/api/deletions/grace', { body: { days } });
      return days === 0 ? 'Deleted backups are now removed at once.' : `Deleted backups now stay restorable for ${plural(days, 'day')}.`;
    });
  };

  return (
    <section class="panel" aria-labelledby="scheduled-title">
      <h2 id="scheduled-title">Scheduled for deletion</h2>
      <Outcome message={message} error={error} />
      {prompt}
      {data && (
        <>
          <GraceForm data={data} grace={grace} setGrace={setGrace} save={saveGrace} />
          {data.scheduled.length === 0 ? (
            <p class="muted">No backup is scheduled for deletion.</p>
          ) : (
            <ScheduledTable data={data} undelete={(id) => void undelete(id)} purge={purge} />
          )}
        </>
      )}
    </section>
  );
}

const REASON_TEXT = {
  rotate: 'Replaced by a new passphrase (a passphrase change, a rekey or a kit recovery)',
  reset: 'Removed by a reset',
  restore: 'Replaced by a restore',
} as const;

function actorText(actor: VaultHistory['entries'][number]['replacedBy']): string {
  switch (actor.kind) {
    case 'api-key':
      return `API key ${actor.id}`;
    case 'console-session':
      return `a console session (${shortId(actor.id ?? '')})`;
    case 'operator':
      return 'the operator';
    default:
      return 'unknown';
  }
}

/** The Vault page's section: the kept envelopes, each restorable. */
export function VaultHistorySection({ onRestored }: { onRestored: () => void }) {
  const [data, setData] = useState<VaultHistory | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [message, setMessage] = useState('');
  const { attempt, prompt } = useFreshAction();
  const load = () => api('GET /console/api/vault/history').then(setData, (caught: unknown) => setError(asError(caught)));
  useEffect(() => {
    void load();
  }, []);

  const restore = (id: string) =>
    attempt('restore an earlier vault envelope', async () => {
      setError(null);
      try {
        await api('POST /console/api/vault/history/:id/restore', { params: { id } });
        setMessage(
          'The earlier envelope is the vault again: the passphrase that opened it opens the vault now. The one it replaced is kept below.',
        );
        onRestored();
        await load();
      } catch (caught) {
        if (caught instanceof ApiError && caught.code === 'reauthentication_required') throw caught;
        setError(asError(caught));
      }
    });

  return (
    <section class="panel" aria-labelledby="history-title">
      <h2 id="history-title">Earlier envelopes</h2>
      <Outcome message={message} error={error} />
      {prompt}
      {data && data.entries.length === 0 && (
        <p class="muted">
          {data.deletionGraceDays === 0
            ? 'None kept: the deletion grace is 0, so a passphrase change or reset replaces the envelope for good.'
            : `None yet. A passphrase change, rekey or reset keeps the envelope it replaces for ${data.deletionGraceDays} days.`}
        </p>
      )}
      {data && data.entries.length > 0 && (
        <CardTable
          label="Earlier vault envelopes"
          rows={data.entries}
          row={(entry) => ({ key: entry.id, 'data-history-id': entry.id })}
          columns={[
            { header: 'Replaced', cell: (entry) => <When at={entry.replacedAt} /> },
            { header: 'How, by whom', cell: (entry) => `${REASON_TEXT[entry.reason]}, by ${actorText(entry.replacedBy)}` },
            { header: 'In use since', cell: (entry) => <When at={entry.storedAt} /> },
            { header: 'Kept until', cell: (entry) => <When at={entry.expiresAt} /> },
            {
              header: 'Actions',
              hiddenHeader: true,
              label: null,
              cell: (entry) => (
                <button
                  type="button"
                  class="secondary"
                  onClick={() => void restore(entry.id)}
                  aria-label={`Use again the envelope replaced ${entry.replacedAt}`}
                >
                  Use again
                </button>
              ),
            },
          ]}
        />
      )}
      <p class="help">
        Using an earlier envelope again needs a fresh sign-in. Whoever knows the passphrase of a kept envelope can open the vault with it
        once it is back: if you changed your passphrase because the old one leaked, run <code>coffer rekey</code> as well.
      </p>
    </section>
  );
}
