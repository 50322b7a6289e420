/** `coffer admin usage`: storage and freshness per account (host accounts under their owner) and the totals per plan. */
import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import type { AccountUsage, OwnerUsage, PlanTotals, UsageReport } from '../../services/usage.js';
import { ageText } from '../../domain/drills.js';
import { plural } from '../../domain/words.js';
import { bytes } from '../format.js';
import { emit } from '../output.js';
import { textTable, withServices } from './frame.js';

const quotaCell = (account: AccountUsage) => (account.quotaSource === 'owner' ? "owner's" : bytes(account.quotaBytes));

/** "3d ago", "3d ago FAILED", "20d ago STALE" or "never": the newest drill's age and what it reported. */
function drillCell(account: AccountUsage, now: number): string {
  if (account.lastDrillAt === null) return 'never';
  const flags = [account.lastDrillResult === 'failed' ? 'FAILED' : '', account.drillStale ? 'STALE' : ''].filter(Boolean);
  return [ageText(Date.parse(account.lastDrillAt), now), ...flags].join(' ');
}

/** "2 until 2027-03-01", "2 (+1 deleted) until …", or "" when no object of the account is locked. */
function lockedCell(account: AccountUsage): string {
  if (account.lockedUntil === null) return '';
  const deleted = account.lockedDeletedBackups > 0 ? ` (+${account.lockedDeletedBackups} deleted)` : '';
  return `${account.lockedBackups}${deleted} until ${account.lockedUntil.slice(0, 10)}`;
}

const cells = (account: AccountUsage, name: string, now: number) => [
  name,
  account.plan,
  bytes(account.storedBytes),
  quotaCell(account),
  String(account.backups),
  account.lastReadyAt ?? 'never',
  account.overdue ? 'yes' : 'no',
  drillCell(account, now),
  lockedCell(account),
];

/** An owner's row, its host accounts' rows under it, and (when it has any) the fleet's total against its quota. */
function fleetRows(owner: OwnerUsage, now: number): string[][] {
  const rows = [cells(owner, owner.accountId, now)];
  for (const host of owner.hostAccounts) rows.push(cells(host, `  host ${host.hostLabel ?? '?'} ${host.accountId}`, now));
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
      fleet.oldestLastDrillAt === null ? '' : `oldest ${ageText(Date.parse(fleet.oldestLastDrillAt), now)}`,
      fleet.lockedBackups > 0 ? `${fleet.lockedBackups} locked` : '',
      ...(fleet.atQuota ? ['AT QUOTA'] : []),
    ]);
  } else if (owner.fleet.atQuota) {
    rows[0]!.push('AT QUOTA');
  }
  return rows;
}

/**
 * "3 accounts (1 host account), 1.5 KiB stored, 3 backups, 0 overdue, 2 drilled (1 stale, 0 failed), 1 locked": a line
 * of the totals.
 */
function totalsWords(counts: PlanTotals) {
  const hosts = counts.hostAccounts > 0 ? ` (${plural(counts.hostAccounts, 'host account')})` : '';
  const drills = `${counts.drilledAccounts} drilled (${counts.staleDrillAccounts} stale, ${counts.failedDrillAccounts} failed)`;
  const locked = counts.lockedBackups + counts.lockedDeletedBackups;
  return `${plural(counts.accounts, 'account')}${hosts}, ${bytes(counts.storedBytes)} stored, ${plural(counts.backups, 'backup')}, ${counts.overdue} overdue, ${drills}, ${locked} locked`;
}

/**
 * `coffer admin usage` as text: one line per account, fleets with an overdue account first; an owner's host accounts
 * under it and the fleet's total (what its quota covers); then the totals per plan. Sizes in binary units (--json
 * has the bytes). LAST DRILL is what the newest restore drill reported (the server cannot check it), LOCKED the
 * backups whose object the store keeps locked and the latest date until which it does.
 */
function usageTable(report: UsageReport): string {
  const owners = [...report.accounts].sort((a, b) => Number(b.fleet.overdue > 0) - Number(a.fleet.overdue > 0));
  // The last column, unnamed, holds AT QUOTA where a fleet or an account has reached its quota.
  const header = ['ACCOUNT', 'PLAN', 'STORED', 'QUOTA', 'BACKUPS', 'LAST READY', 'OVERDUE', 'LAST DRILL', 'LOCKED', ''];
  const now = Date.parse(report.at);
  const text = [
    textTable(
      header,
      owners.flatMap((owner) => fleetRows(owner, now)),
    ),
    '',
    `total: ${totalsWords(report.totals)}`,
  ];
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
      const report = await withServices(
        ({ stores, clock }) => usageReport(stores.usage, clock.now(), config.planQuotas, config.drillMaxAgeMs),
        config,
      );
      emit(!!opts.json, report, () => usageTable(report));
    });
}
