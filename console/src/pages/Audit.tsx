/** The account's audit trail: who deleted, reset, rotated, made or revoked keys, changed the plan, when and from where. */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, type AuditEvent, type AuditList } from '../api.js';
import { shortId, When } from '../format.js';
import { CardTable } from '../ui/card-table.js';
import { Failure } from '../ui/alerts.js';

const ACTION_TEXT: Record<AuditEvent['action'], string> = {
  'backup.delete': 'Deleted a backup',
  'account.reset': 'Reset the account',
  'account.rotate': 'Replaced the vault envelope (a passphrase change, a rekey or a kit recovery)',
  'account.bootstrap': 'Set up the vault',
  'key.create': 'Made an API key',
  'key.revoke': 'Revoked an API key',
  'account.plan': 'Changed the plan',
  'backup.undelete': 'Restored a deleted backup',
  'backup.purge': 'Purged a deleted backup',
  'account.deletion-grace': 'Changed the deletion grace',
  'account.login-link': 'Operator made a sign-in link',
  'account.quota': 'Changed the storage quota',
  'account.vault-restore': 'Restored an earlier vault envelope',
  'account.host-add': 'Added a host account (its own schedule, the same vault)',
  'account.label': 'Operator named the account',
};

/** What a refused attempt (an append-only key) tried to do. */
const TRIED_TEXT: Partial<Record<AuditEvent['action'], string>> = {
  'backup.delete': 'Tried to delete a backup',
  'account.reset': 'Tried to reset the account',
  'account.rotate': 'Tried to replace the vault envelope',
  'account.bootstrap': 'Tried to replace the vault',
};

function Actor({ event }: { event: AuditEvent }) {
  const { kind, id } = event.actor;
  if (kind === 'operator') return <span>Operator{id ? ` (${id})` : ''}</span>;
  const label = kind === 'key' ? 'API key' : 'Console session';
  return (
    <span>
      {label} {event.actorLabel && <strong class="key-label">{event.actorLabel} </strong>}
      {id && (
        <span class="mono" title={id}>
          {shortId(id)}
        </span>
      )}
      {event.byThisSession && <span class="muted"> (this session)</span>}
    </span>
  );
}

export function AuditPage() {
  const [list, setList] = useState<AuditList | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api('GET /console/api/audit').then(setList, (caught: unknown) =>
      setError(caught instanceof ApiError ? caught.message : String(caught)),
    );
  }, []);
  return (
    <section>
      <h1 tabIndex={-1}>Activity</h1>
      <p class="lede">
        Every deletion, reset, vault change, key change and plan change on this account, and every such attempt an append-only key was
        refused. No secrets are kept here.
      </p>
      <Failure error={error} />
      {!list && !error && <p role="status">Loading…</p>}
      {list && list.events.length === 0 && <p class="empty">Nothing recorded yet.</p>}
      {list && list.events.length > 0 && (
        <CardTable
          label="Audit trail"
          rows={list.events}
          row={(event) => ({ key: event.id, 'data-action': event.action, 'data-outcome': event.outcome })}
          columns={[
            { header: 'When', cell: (event) => <When at={event.at} /> },
            {
              header: 'What',
              cell: (event) => (
                <>
                  {event.outcome === 'refused' ? (TRIED_TEXT[event.action] ?? ACTION_TEXT[event.action]) : ACTION_TEXT[event.action]}
                  {event.outcome === 'refused' && (
                    <>
                      {' '}
                      <span class="badge audit-refused">refused</span>
                    </>
                  )}
                  {event.detail && <span class="muted"> ({event.detail})</span>}
                </>
              ),
            },
            { header: 'Who', cell: (event) => <Actor event={event} /> },
            { header: 'From', cell: (event) => event.address ?? '—' },
            {
              header: 'On',
              cell: (event) =>
                event.target ? (
                  <>
                    {event.targetLabel && <strong class="key-label">{event.targetLabel} </strong>}
                    <span class="mono" title={event.target}>
                      {shortId(event.target)}
                    </span>
                  </>
                ) : (
                  'the account'
                ),
            },
          ]}
        />
      )}
      {list && (
        <p class="help">
          The newest {list.maxEntries} actions and {list.maxEntries} refused attempts are kept; older ones are dropped as new ones arrive.
        </p>
      )}
    </section>
  );
}
