/** `coffer admin usage`: storage and freshness per account (host accounts under their owner) and the totals per plan. */
import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import type { AccountUsage, OwnerUsage, UsageReport } from '../../services/usage.js';
import { emit } from '../output.js';
import { withServices } from './frame.js';

const quotaCell = (account: AccountUsage) =>
  account.quotaSource === 'owner' ? "owner's" : account.quotaBytes === null ? '-' : String(account.quotaBytes);

const cells = (account: AccountUsage, name: string) => [
  name,
  account.plan,
  String(account.storedBytes),
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
      `  fleet total (${fleet.accounts} accounts)`,
      '',
      String(fleet.storedBytes),
      owner.quotaBytes === null ? '-' : String(owner.quotaBytes),
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

/**
 * `coffer admin usage` as text: one line per account, fleets with an overdue account first; an owner's host accounts
 * under it and the fleet's total (what its quota covers); then the totals per plan.
 */
function usageTable(report: UsageReport): string {
  const owners = [...report.accounts].sort((a, b) => Number(b.fleet.overdue > 0) - Number(a.fleet.overdue > 0));
  const lines = [['ACCOUNT', 'PLAN', 'STORED', 'QUOTA', 'BACKUPS', 'LAST READY', 'OVERDUE'], ...owners.flatMap(fleetRows)];
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => (l[i] ?? '').length)));
  const text = lines.map((l) =>
    l
      .map((cell, i) => cell.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd(),
  );
  const { totals } = report;
  const hosts = (n: number) => (n > 0 ? ` (${n} host account${n === 1 ? '' : 's'})` : '');
  text.push(
    '',
    `total: ${totals.accounts} accounts${hosts(totals.hostAccounts)}, ${totals.storedBytes} bytes stored, ${totals.backups} backups, ${totals.overdue} overdue`,
  );
  for (const [name, plan] of Object.entries(totals.plans)) {
    text.push(
      `  ${name}: ${plan.accounts} accounts${hosts(plan.hostAccounts)}, ${plan.storedBytes} bytes, ${plan.backups} backups, ${plan.overdue} overdue`,
    );
  }
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
      const report = await withServices(({ store, clock }) => usageReport(store, clock.now(), config.planQuotas), config);
      emit(!!opts.json, report, () => usageTable(report));
    });
}
