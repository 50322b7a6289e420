/** The overview's totals: accounts, bytes, backups and drills over all accounts, by plan, and what the server runs. */
import { CardTable } from '../ui/card-table.js';
import { bytes, type OverviewData } from './api.js';

export function Totals({ data }: { data: OverviewData }) {
  const { totals, server } = data;
  return (
    <section class="panel" aria-labelledby="totals">
      <h2 id="totals">Totals</h2>
      <dl class="facts">
        <dt>Accounts</dt>
        <dd>{totals.accounts}</dd>
        <dt>Stored</dt>
        <dd>{bytes(totals.storedBytes)}</dd>
        <dt>Backups, last 24 h</dt>
        <dd>{totals.backupsLast24h}</dd>
        <dt>Overdue</dt>
        <dd data-testid="total-overdue">{totals.overdue}</dd>
        <dt>Restore drills</dt>
        <dd data-testid="total-drills">
          {totals.drilledAccounts} drilled, {totals.staleDrillAccounts} stale, {totals.failedDrillAccounts} reported failed
        </dd>
      </dl>
      <CardTable
        rows={totals.plans}
        row={(p) => ({ key: p.plan })}
        columns={[
          { header: 'Plan', cell: (p) => p.plan },
          { header: 'Accounts', cell: (p) => p.accounts },
          { header: 'Stored', cell: (p) => bytes(p.storedBytes) },
        ]}
      />
      <dl class="facts">
        <dt>Server</dt>
        <dd>Coffer {server.version}</dd>
        <dt>Database</dt>
        <dd>{server.database === 'postgres' ? 'PostgreSQL' : 'SQLite'}</dd>
        <dt>Blob store</dt>
        <dd>{server.blobStore === 's3' ? 'S3' : 'file system'}</dd>
        <dt>Migrations</dt>
        <dd>
          {server.migrations.length} applied, last <span class="mono">{server.migrations.at(-1) ?? 'none'}</span>
        </dd>
      </dl>
    </section>
  );
}
