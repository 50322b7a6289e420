/** The overview's list of accounts: filters above, one row per account, host accounts under their owner. */
import { useState } from 'preact/hooks';
import { CardTable, type Column } from '../ui/card-table.js';
import { quotaText, useShownAccounts, type Filters, type Row, type SortKey } from './account-rows.js';
import { bytes, drillText, when, type OverviewData } from './api.js';
import { Link } from './router.js';
import { valueOf, checkedOf } from '../ui/forms.js';
import { PlanOptions } from './PlanOptions.js';

/** The account as an operator knows it: its label (else its id), and for a host account whose host it is. */
function AccountName({ row, owner }: { row: Row; owner: { accountId: string; label: string | null } | undefined }) {
  const link = (id: string, text: string, mono: boolean) => (
    <Link to={`/accounts/${id}`} class={mono ? 'mono' : undefined}>
      {text}
    </Link>
  );
  return (
    <>
      {row.label ? (
        <>
          {link(row.accountId, row.label, false)} <span class="mono muted">{row.accountId}</span>
        </>
      ) : (
        link(row.accountId, row.accountId, true)
      )}
      {row.ownerAccountId && (
        <span class="host-of" data-testid="host-of">
          {' '}
          host “{row.hostLabel}” of {link(row.ownerAccountId, owner?.label ?? row.ownerAccountId, !owner?.label)}
        </span>
      )}
    </>
  );
}

function FilterControls({ filters, set }: { filters: Filters; set: (change: Partial<Filters>) => void }) {
  return (
    <div class="admin-filters">
      <label>
        Sort by
        <select value={filters.sort} onChange={(e) => set({ sort: valueOf(e) as SortKey })}>
          <option value="overdue">Overdue first</option>
          <option value="storedBytes">Stored bytes</option>
          <option value="backups">Backups</option>
          <option value="lastReadyAt">Last READY</option>
          <option value="keys">Keys</option>
          <option value="plan">Plan</option>
          <option value="label">Label</option>
          <option value="accountId">Account id</option>
        </select>
      </label>
      <label>
        Plan
        <select value={filters.plan} onChange={(e) => set({ plan: valueOf(e) })}>
          <option value="">All</option>
          <PlanOptions />
        </select>
      </label>
      <label>
        Search label or id
        <input type="search" value={filters.filter} onInput={(e) => set({ filter: valueOf(e) })} />
      </label>
      <label class="check">
        <input type="checkbox" checked={filters.overdueOnly} onChange={(e) => set({ overdueOnly: checkedOf(e) })} />
        Overdue only
      </label>
    </div>
  );
}

const COLUMNS: Column<Row>[] = [
  { header: 'Plan', cell: (r) => r.plan },
  {
    header: 'Backups',
    cell: (r) => (
      <>
        {r.backups}
        {r.graceBackups > 0 && <span class="muted"> (+{r.graceBackups} in grace)</span>}
      </>
    ),
  },
  {
    header: 'Stored',
    cell: (r) => (
      <>
        {bytes(r.storedBytes)}
        {r.fleet && (
          <span class="fleet-total" data-testid="fleet-total">
            {' '}
            (with its {r.fleet.accounts - 1} host account{r.fleet.accounts === 2 ? '' : 's'}: {bytes(r.fleet.storedBytes)})
          </span>
        )}
      </>
    ),
  },
  {
    header: 'Quota',
    cell: (r) =>
      r.quotaSource === 'owner' ? (
        <span class="muted">the owner’s</span>
      ) : (
        <>
          {quotaText(r)}
          {(r.fleet?.atQuota ?? (r.quotaBytes !== null && r.storedBytes >= r.quotaBytes)) && (
            <span class="badge audit-refused"> at quota</span>
          )}
        </>
      ),
  },
  { header: 'Last READY', cell: (r) => when(r.lastReadyAt) },
  { header: 'Overdue', cell: (r) => (r.overdue ? <span class="badge audit-refused">overdue</span> : 'no') },
  {
    header: 'Last drill',
    cell: (r) => (
      <span data-testid="last-drill" class={r.lastDrillResult === 'failed' || r.drillStale ? 'badge audit-refused' : undefined}>
        {drillText(r)}
      </span>
    ),
  },
  { header: 'Keys', cell: (r) => r.keys },
];

export function Accounts({ data }: { data: OverviewData }) {
  const [filters, setFilters] = useState<Filters>({ sort: 'overdue', filter: '', plan: '', overdueOnly: false });
  const { rows, ownerOf } = useShownAccounts(data, filters);
  return (
    <section class="panel" aria-labelledby="accounts">
      <h2 id="accounts">Accounts</h2>
      <FilterControls filters={filters} set={(change) => setFilters((now) => ({ ...now, ...change }))} />
      {rows.length === 0 ? (
        <p class="empty">No accounts match.</p>
      ) : (
        <CardTable
          testId="accounts"
          rows={rows}
          row={(r) => ({
            key: r.accountId,
            'data-account': r.accountId,
            ...(r.ownerAccountId === null ? {} : { 'data-owner': r.ownerAccountId }),
          })}
          columns={[{ header: 'Account', class: 'wrap', cell: (r) => <AccountName row={r} owner={ownerOf(r)} /> }, ...COLUMNS]}
        />
      )}
    </section>
  );
}
