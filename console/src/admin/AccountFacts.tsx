/** What an account is, on its page: label, owner or hosts, plan, backups, bytes, times and quota. */
import { bytes, drillText, when, type AccountData } from './api.js';
import { BASE } from './router.js';

type Related = NonNullable<AccountData['owner']>;

/** Another account on an account's page (its owner, its hosts): its label and id, a link to it. */
function Related({ row }: { row: Related }) {
  return (
    <a href={`${BASE}/accounts/${row.accountId}`}>
      {row.label && <>{row.label} </>}
      <span class="mono">{row.accountId}</span>
    </a>
  );
}

/** The owner of a host account, or the host accounts of an owner. */
function Relations({ data }: { data: AccountData }) {
  return (
    <>
      {data.owner && (
        <>
          <dt>Host account of</dt>
          <dd data-testid="owner">
            <Related row={data.owner} />{' '}
            <span class="muted">
              (its owner named this host “{data.account.hostLabel}”; on its owner’s plan, storing under its owner’s quota: change both on
              the owner)
            </span>
          </dd>
        </>
      )}
      {data.hosts.length > 0 && (
        <>
          <dt>Host accounts</dt>
          <dd data-testid="hosts">
            <ul class="plain">
              {data.hosts.map((host) => (
                <li key={host.accountId}>
                  “{host.hostLabel}”: <Related row={host} />
                </li>
              ))}
            </ul>
          </dd>
        </>
      )}
    </>
  );
}

const QUOTA_SOURCE = {
  plan: " (the plan's)",
  owner: ' (its owner’s, shared with the owner’s other accounts)',
  account: ' (this account’s own)',
} as const;

export function AccountFacts({ data }: { data: AccountData }) {
  const { account } = data;
  return (
    <section class="panel">
      <dl class="facts">
        <dt>Label</dt>
        <dd data-testid="label">{account.label ?? <span class="muted">none</span>}</dd>
        <Relations data={data} />
        <dt>Plan</dt>
        <dd data-testid="plan">{account.plan}</dd>
        <dt>Backups</dt>
        <dd>
          {account.backups} READY, {account.graceBackups} in deletion grace, {account.uploadingBackups} uploading
        </dd>
        <dt>Stored</dt>
        <dd>
          {bytes(account.storedBytes)}
          {account.fleet && (
            <span class="muted" data-testid="fleet-total">
              {' '}
              (with its {account.fleet.accounts - 1} host account{account.fleet.accounts === 2 ? '' : 's'}:{' '}
              {bytes(account.fleet.storedBytes)}, against this account’s quota)
            </span>
          )}
        </dd>
        <dt>Last READY</dt>
        <dd>{when(account.lastReadyAt)}</dd>
        <dt>Overdue</dt>
        <dd>{account.overdue ? 'yes' : 'no'}</dd>
        <dt>Last drill</dt>
        <dd data-testid="last-drill">
          {drillText(account)}
          {account.lastDrillAt && (
            <span class="muted"> ({when(account.lastDrillAt)}; the result as the drill reported it, which the server cannot check)</span>
          )}
        </dd>
        <dt>Locked</dt>
        <dd data-testid="locked">
          {account.lockedUntil === null
            ? 'none'
            : `${account.lockedBackups} backup${account.lockedBackups === 1 ? '' : 's'}` +
              (account.lockedDeletedBackups > 0 ? ` and ${account.lockedDeletedBackups} deleted` : '') +
              ` until ${when(account.lockedUntil)}`}
        </dd>
        <dt>Created</dt>
        <dd>{when(account.createdAt)}</dd>
        <dt>Quota</dt>
        <dd data-testid="quota">
          {account.quotaBytes === null ? 'none' : bytes(account.quotaBytes)}
          <span class="muted">{QUOTA_SOURCE[account.quotaSource]}</span>
        </dd>
      </dl>
    </section>
  );
}
