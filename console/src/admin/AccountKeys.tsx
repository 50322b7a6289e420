/** An account's API keys on its page: each key's label, scopes, status and age, and revoking an active one. */
import { CardTable } from '../ui/card-table.js';
import { ConfirmAction } from '../ui/confirm.js';
import { call, when, type AccountData } from './api.js';
import type { Act } from './AccountSettings.js';

export function AccountKeys({ id, keys, act }: { id: string; keys: AccountData['keys']; act: Act }) {
  return (
    <section class="panel" aria-labelledby="keys">
      <h2 id="keys">API keys</h2>
      {keys.length === 0 ? (
        <p class="empty">No keys.</p>
      ) : (
        <CardTable
          testId="keys"
          rows={keys}
          row={(k) => ({ key: k.keyId, 'data-key': k.keyId })}
          columns={[
            {
              header: 'Key',
              cell: (k) => (
                <>
                  {k.label && <strong class="key-label">{k.label} </strong>}
                  <span class="mono">{k.keyId}</span>
                </>
              ),
            },
            {
              header: 'Scopes',
              cell: (k) => (
                <>
                  {k.scopes.join(', ')}
                  {k.appendOnly && ' (append-only)'}
                </>
              ),
            },
            { header: 'Status', cell: (k) => <span class={`badge key-${k.status}`}>{k.status}</span> },
            { header: 'Created', cell: (k) => when(k.createdAt) },
            {
              header: 'Action',
              hiddenHeader: true,
              cell: (k) =>
                k.status === 'active' && (
                  <ConfirmAction
                    ask="Revoke…"
                    askLabel={`Revoke key ${k.label ?? k.keyId}`}
                    confirm="Revoke now"
                    question={`Confirm revoking key ${k.label ?? k.keyId}`}
                    consequence="A revoked key never works again: the owner makes a new one."
                    onConfirm={() =>
                      act(
                        () => call('POST /accounts/:id/keys/:keyId/revoke', { params: { id, keyId: k.keyId } }),
                        `Key ${k.keyId} revoked.`,
                      )
                    }
                  />
                ),
            },
          ]}
        />
      )}
    </section>
  );
}
