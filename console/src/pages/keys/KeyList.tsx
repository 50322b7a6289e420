/** The account's keys: label, permissions, dates and status of each, and revoking an active one. */
import type { KeyInfo } from '../../api.js';
import { shortId, When } from '../../format.js';
import { CardTable, type Column } from '../../ui/card-table.js';
import { ConfirmAction } from '../../ui/confirm.js';
import { APPEND_ONLY_HELP } from './choices.js';

const COLUMNS: Column<KeyInfo>[] = [
  {
    header: 'Key',
    cell: (key) => (
      <>
        {key.label && <strong class="key-label">{key.label} </strong>}
        <span class="mono" title={key.keyId}>
          {shortId(key.keyId)}
        </span>
        {key.usedByThisSession && <span class="muted"> (this session)</span>}
      </>
    ),
  },
  {
    header: 'Permissions',
    cell: (key) => (
      <>
        {key.scopes.map((s) => s.replace('backups:', '')).join(', ')}
        {key.appendOnly && (
          <>
            {' '}
            <span class="badge key-append-only" title={APPEND_ONLY_HELP}>
              append-only
            </span>
          </>
        )}
      </>
    ),
  },
  { header: 'Created', cell: (key) => <When at={key.createdAt} /> },
  { header: 'Expires', cell: (key) => <When at={key.expiresAt} empty="Never" /> },
  { header: 'Status', cell: (key) => <span class={`badge key-${key.status}`}>{key.status}</span> },
];

export function KeyList({ keys, revoke }: { keys: KeyInfo[]; revoke: (keyId: string) => Promise<void> }) {
  return (
    <CardTable
      label="API keys"
      rows={keys}
      row={(key) => ({ key: key.keyId, 'data-key-id': key.keyId })}
      columns={[
        ...COLUMNS,
        {
          header: 'Actions',
          hiddenHeader: true,
          cell: (key) =>
            key.status === 'active' && (
              <ConfirmAction
                ask="Revoke…"
                askLabel={`Revoke key ${shortId(key.keyId)}`}
                confirm="Revoke now"
                question={`Confirm revoking key ${shortId(key.keyId)}`}
                consequence={`A revoked key never works again.${key.usedByThisSession ? ' This signs you out.' : ''}`}
                onConfirm={() => revoke(key.keyId)}
              />
            ),
        },
      ]}
    />
  );
}
