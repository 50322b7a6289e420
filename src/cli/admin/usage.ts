/** `coffer admin usage`: storage and freshness per account (host accounts under their owner) and the totals per plan. */
import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import type { AccountUsage, OwnerUsage, UsageReport } from '../../services/usage.js';
import { plural } from '../../domain/words.js';
import { bytes } from '../format.js';
import { emit } from '../output.js';
import { textTable, withServices } from './frame.js';

const quotaCell = (account: AccountUsage) => (account.quotaSource === 'owner' ? "owner's" : bytes(account.quotaBytes));

const cells = (account: AccountUsage, name: string) => [
  name,
  account.plan,
  bytes(account.storedBytes),
  quotaCell(account),
  String(account.backups),
  account.lastReadyAt ?? 'never',
  account.overdue ? 'yes' : 'no',
];

/** An owner's row, its host accounts' rows under it, and (when it has any) the fleet's total against its quota. */
function fleetRows(owner: OwnerUsage): string[][] {
  const rows = [cells(owner, owner.accountId)];
  for (const host of owner.hostAccounts) rows.push(cells(host, `  host ${host.hostLabel ?? '?'} ${host.accountId}`));
  if (owner.hostAccounts.length > 0) {
    const { fleet } = owner;
    rows.push([
      `  fleet total (${plural(fleet.accounts, 'account')})`,
      '',
      bytes(fleet.storedBytes),
      bytes(owner.quotaBytes),
      String(fleet.backups),
      '',
      fleet.overdue > 0 ? `${fleet.overdue} overdue` : '',
      ...(fleet.atQuota ? ['AT QUOTA'] : []),
    ]);
  } else if (owner.fleet.atQuota) {
    rows[0]!.push('AT QUOTA');
  }
  return rows;
}

/** "3 accounts (1 host account), 1.5 KiB stored, 3 backups, 0 overdue": a line of the totals. */
function totalsWords(counts: { accounts: number; hostAccounts: number; storedBytes: number; backups: number; overdue: number }) {
  const hosts = counts.hostAccounts > 0 ? ` (${plural(counts.hostAccounts, 'host account')})` : '';
  return `${plural(counts.accounts, 'account')}${hosts}, ${bytes(counts.storedBytes)} stored, ${plural(counts.backups, 'backup')}, ${counts.overdue} overdue`;
}

/**
 * `coffer admin usage` as text: one line per account, fleets with an overdue account first; an owner's host accounts
 * under it and the fleet's total (what its quota covers); then the totals per plan. Sizes in binary units (--json
 * has the bytes).
 */
function usageTable(report: UsageReport): string {
  const owners = [...report.accounts].sort((a, b) => Number(b.fleet.overdue > 0) - Number(a.fleet.overdue > 0));
  // The last column, unnamed, holds AT QUOTA where a fleet or an account has reached its quota.
  const header = ['ACCOUNT', 'PLAN', 'STORED', 'QUOTA', 'BACKUPS', 'LAST READY', 'OVERDUE', ''];
  const text = [textTable(header, owners.flatMap(fleetRows)), '', `total: ${totalsWords(report.totals)}`];
  for (const [name, plan] of Object.entries(report.totals.plans)) text.push(`  ${name}: ${totalsWords(plan)}`);
  return text.join('\n');
}

export function registerUsageCommand(admin: Command): void {
  admin
    .command('usage')
    .description('storage and freshness per account, host accounts under their owner with the fleet total, and totals per plan')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const config = loadConfig();
      const { usageReport } = await import('../../services/usage.js');
      const report = await withServices(({ stores, clock }) => usageReport(stores.usage, clock.now(), config.planQuotas), config);
      emit(!!opts.json, report, () => usageTable(report));
    });
}
