/** The overview's account rows: their order, what the search finds, and each owner's host accounts under it. */
import { useMemo } from 'preact/hooks';
import { bytes, type OverviewData } from './api.js';

export type Row = OverviewData['accounts'][number];
export type SortKey = 'overdue' | 'accountId' | 'label' | 'plan' | 'backups' | 'storedBytes' | 'lastReadyAt' | 'keys';

/** What the list shows: the sort, the search text, the plan ('' for all), and whether only overdue accounts. */
export interface Filters {
  sort: SortKey;
  filter: string;
  plan: string;
  overdueOnly: boolean;
}

function compare(a: Row, b: Row, key: SortKey): number {
  switch (key) {
    case 'overdue':
      return Number(b.overdue) - Number(a.overdue) || (a.lastReadyAt ?? '').localeCompare(b.lastReadyAt ?? '');
    case 'label':
      // Named accounts first, by name.
      return a.label === null ? (b.label === null ? 0 : 1) : b.label === null ? -1 : a.label.localeCompare(b.label);
    case 'accountId':
    case 'plan':
      return a[key].localeCompare(b[key]);
    case 'lastReadyAt':
      return (b.lastReadyAt ?? '').localeCompare(a.lastReadyAt ?? '');
    default:
      return b[key] - a[key];
  }
}

/** What the search box finds: an account by its label, id, host name, or its owner's label. */
function matches(row: Row, owner: Row | undefined, text: string): boolean {
  const wanted = text.trim().toLowerCase();
  if (!wanted) return true;
  return [row.accountId, row.label, row.hostLabel, row.ownerAccountId, owner?.label].some((field) => field?.toLowerCase().includes(wanted));
}

export const quotaText = (r: Row) => (r.quotaBytes === null ? 'none' : bytes(r.quotaBytes)) + (r.quotaSource === 'account' ? ' (own)' : '');

/** The accounts that match, each owner's host accounts right under it (a fleet sorts by its owner); and each row's owner. */
export function useShownAccounts(data: OverviewData, { sort, filter, plan, overdueOnly }: Filters) {
  const byId = useMemo(() => new Map(data.accounts.map((r) => [r.accountId, r])), [data]);
  const ownerOf = (r: Row) => (r.ownerAccountId ? byId.get(r.ownerAccountId) : undefined);
  const rows = useMemo(() => {
    const hostsOf = new Map<string, Row[]>();
    for (const r of data.accounts) {
      if (r.ownerAccountId !== null && byId.has(r.ownerAccountId))
        hostsOf.set(r.ownerAccountId, [...(hostsOf.get(r.ownerAccountId) ?? []), r]);
    }
    const fleetOf = (owner: Row) => [owner, ...(hostsOf.get(owner.accountId) ?? [])];
    const shown = (r: Row) => (!plan || r.plan === plan) && (!overdueOnly || r.overdue) && matches(r, ownerOf(r), filter);
    return data.accounts
      .filter((r) => r.ownerAccountId === null || !byId.has(r.ownerAccountId))
      .sort((a, b) => compare(a, b, sort) || a.accountId.localeCompare(b.accountId))
      .flatMap(fleetOf)
      .filter(shown);
  }, [data, byId, sort, filter, plan, overdueOnly]);
  return { rows, ownerOf };
}
