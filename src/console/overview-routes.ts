/** /console/api/overview: the account's plan, cadence, backups and vault at a glance. */
import type { AppPlugin } from '../http/fastify.js';
import { isInFlight, isOverdue, nextAllowedAt } from '../domain/backups.js';
import { PLAN_RULES } from '../domain/plans.js';
import type { AccountView } from '../services/vault.js';
import type { Backup } from '../domain/entities.js';
import { iso, isoOrNull } from '../domain/time.js';
import { type ConsoleContext, hidden } from './context.js';
import { Overview } from '../contract/console-schemas.js';

/** The overview of an account whose visible backups are `visible` (newest first), at `now`. */
function overviewBody({ account, vault }: AccountView, visible: Backup[], now: number, storage: { quota: number | null; usage: number }) {
  const rules = PLAN_RULES[account.plan];
  const next = nextAllowedAt(account);
  // A READY record is not changed after it reached READY, so its updatedAt is that moment.
  const readyTimes = visible.filter((b) => b.status === 'READY').map((b) => b.updatedAt);
  const lastReadyAt = readyTimes.length > 0 ? Math.max(...readyTimes) : null;
  return {
    accountId: account.id,
    accountLabel: account.operatorLabel ?? null,
    plan: account.plan,
    backupInterval: rules.interval,
    intervalWords: rules.intervalWords,
    retentionDays: Math.round(rules.retentionMs / 86_400_000),
    backups: {
      count: visible.length,
      ready: visible.filter((b) => b.status === 'READY').length,
      newestCreatedAt: isoOrNull(visible[0]?.createdAt),
      storedCiphertextBytes: visible.reduce((sum, b) => sum + (b.status === 'READY' ? (b.ciphertextSizeBytes ?? 0) : 0), 0),
    },
    // What counts against the quota (docs/api-rules.md#quota): READY backups, those in their deletion grace and
    // uploads in progress; the quota that applies (the account's own, else its plan's; null: none).
    storage: { storedBytes: storage.usage, quotaBytes: storage.quota },
    cadence: {
      lastReadyBackupCreatedAt: isoOrNull(account.lastReadyCreatedAt),
      lastReadyAt: isoOrNull(lastReadyAt),
      overdue: isOverdue(account, lastReadyAt, now),
      nextAllowedAt: next !== null && next > now ? iso(next) : null,
      inFlightBackupId: visible.find((b) => isInFlight(b, now))?.id ?? null,
    },
    vault: vault
      ? {
          initialized: true,
          cryptoVersion: vault.cryptoVersion,
          kdf: {
            algorithm: 'Argon2id13',
            opslimit: vault.kdf.opslimit,
            memlimit: vault.kdf.memlimit,
            saltBytes: Buffer.from(vault.kdf.salt, 'base64').length,
          },
          createdAt: isoOrNull(vault.createdAt),
          updatedAt: iso(vault.updatedAt),
          lastRotatedAt: vault.createdAt !== undefined && vault.updatedAt > vault.createdAt ? iso(vault.updatedAt) : null,
        }
      : { initialized: false, cryptoVersion: null, kdf: null, createdAt: null, updatedAt: null, lastRotatedAt: null },
  };
}

export const overviewRoutes: AppPlugin<ConsoleContext> = async (app, { vault, backups, quotas, clock, requireSession }) => {
  app.get('/console/api/overview', { schema: { ...hidden, response: { 200: Overview } }, onRequest: requireSession }, async (request) => {
    const { accountId } = request.consoleSession;
    const now = clock.now();
    const [view, visible, storage] = await Promise.all([vault.accountView(accountId), backups.list(accountId), quotas.quota(accountId)]);
    return overviewBody(view, visible, now, storage ?? { quota: null, usage: 0 });
  });
};
