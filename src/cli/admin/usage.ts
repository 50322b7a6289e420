/** `coffer admin usage`: storage and freshness per account, and the totals per plan. */
import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import type { UsageReport } from '../../services/usage.js';
import { emit } from '../output.js';
import { withServices } from './frame.js';

/** `coffer admin usage` as text: one line per account, overdue first, then the totals per plan. */
function usageTable(report: UsageReport): string {
  const rows = [...report.accounts].sort((a, b) => Number(b.overdue) - Number(a.overdue));
  const quota = (q: number | null) => (q === null ? '-' : String(q));
  const lines = [['ACCOUNT', 'PLAN', 'STORED', 'QUOTA', 'BACKUPS', 'LAST READY', 'OVERDUE']];
  for (const a of rows) {
    lines.push([
      a.accountId,
      a.plan,
      String(a.storedBytes),
      quota(a.quotaBytes),
      String(a.backups),
      a.lastReadyAt ?? 'never',
      a.overdue ? 'yes' : 'no',
    ]);
  }
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
  const text = lines.map((l) =>
    l
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join('  ')
      .trimEnd(),
  );
  const { totals } = report;
  text.push(
    '',
    `total: ${totals.accounts} accounts, ${totals.storedBytes} bytes stored, ${totals.backups} backups, ${totals.overdue} overdue`,
  );
  for (const [name, plan] of Object.entries(totals.plans)) {
    text.push(`  ${name}: ${plan.accounts} accounts, ${plan.storedBytes} bytes, ${plan.backups} backups, ${plan.overdue} overdue`);
  }
  return text.join('\n');
}

export function registerUsageCommand(admin: Command): void {
  admin
    .command('usage')
    .description('storage and freshness per account (plan, stored bytes, backups, last READY, overdue) and totals')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const config = loadConfig();
      const { usageReport } = await import('../../services/usage.js');
      const report = await withServices(({ store, clock }) => usageReport(store, clock.now(), config.planQuotas), config);
      emit(!!opts.json, report, () => usageTable(report));
    });
}
