/**
 * /console/api/deletions and /console/api/vault/history: the deletion grace (setting it, backups scheduled for
 * deletion: restore or purge early) and the kept vault envelopes (restore one). Purging early, shortening the grace
 * and restoring an envelope need a fresh sign-in (POST /console/api/session/confirm): a session left open, or a
 * cookie copied from it, cannot do them.
 */
import type { FastifyRequest } from 'fastify';
import { outcomeBody, recordBody } from '../contract/views.js';
import type { Actor, AuditAction } from '../domain/audit.js';
import { AppError } from '../domain/errors.js';
import { FRESH_SIGN_IN_MS, MAX_DELETION_GRACE_DAYS, isFreshSignIn } from '../domain/backups.js';
import { iso } from '../domain/time.js';
import type { AppPlugin } from '../http/fastify.js';
import type { Backup, VaultHistoryEntry } from '../domain/entities.js';
import { type ConsoleContext, hidden } from './context.js';
import {
  BackupOutcome,
  DeletionGrace,
  DeletionGraceBody,
  Deletions,
  RestoredVault,
  RetentionParams,
  VaultHistory,
} from '../contract/console-schemas.js';

/** A backup in its deletion grace: its record, and when it was deleted and goes for good. */
function scheduledBody(backup: Backup) {
  return { ...recordBody(backup), deletedAt: iso(backup.updatedAt), purgeAfter: iso(backup.purgeAfter!) };
}

/** Who replaced an envelope, as the page names it. */
function actorBody(actor: string) {
  if (actor.startsWith('session:')) return { kind: 'console-session' as const, id: actor.slice('session:'.length) };
  if (actor === 'operator') return { kind: 'operator' as const, id: null };
  if (actor === 'unknown') return { kind: 'unknown' as const, id: null };
  return { kind: 'api-key' as const, id: actor };
}

function historyBody(entry: VaultHistoryEntry) {
  return {
    id: entry.id,
    reason: entry.reason,
    replacedAt: iso(entry.replacedAt),
    replacedBy: actorBody(entry.replacedBy),
    storedAt: iso(entry.vault.updatedAt),
    expiresAt: iso(entry.expiresAt),
    kdf: { opslimit: entry.vault.kdf.opslimit, memlimit: entry.vault.kdf.memlimit },
  };
}

export const retentionRoutes: AppPlugin<ConsoleContext> = async (app, { vault, retention, clock, audit, requireSession }) => {
  const fresh = (request: FastifyRequest) => isFreshSignIn(request.consoleSession.freshAt, clock.now());
  const requireFresh = (request: FastifyRequest, what: string) => {
    if (fresh(request)) return;
    throw new AppError('reauthentication_required', `To ${what}, confirm with a fresh sign-in first.`, {
      freshSignInSeconds: FRESH_SIGN_IN_MS / 1000,
    });
  };
  // The console's own routes name the session alone (the vault history shows `session:<id>`), never its sign-in key.
  const actor = (request: FastifyRequest): Actor => ({ kind: 'session', id: request.consoleSession.id });
  const record = (request: FastifyRequest, action: AuditAction, target: string | null, detail?: string) =>
    audit.record({
      accountId: request.consoleSession.accountId,
      action,
      actor: actor(request),
      address: request.ip,
      target,
      detail: detail ?? null,
    });

  app.get('/console/api/deletions', { schema: { ...hidden, response: { 200: Deletions } }, onRequest: requireSession }, async (request) => {
    const { accountId } = request.consoleSession;
    const account = (await vault.accountView(accountId)).account;
    const scheduled = await retention.listScheduled(accountId);
    return {
      deletionGraceDays: account.deletionGraceDays ?? 0,
      maxDeletionGraceDays: MAX_DELETION_GRACE_DAYS,
      freshSignInMinutes: FRESH_SIGN_IN_MS / 60_000,
      freshSignIn: fresh(request),
      scheduled: scheduled.map(scheduledBody),
      scheduledCiphertextBytes: scheduled.reduce((sum, b) => sum + (b.ciphertextSizeBytes ?? 0), 0),
    };
  });

  app.put(
    '/console/api/deletions/grace',
    { schema: { ...hidden, body: DeletionGraceBody, response: { 200: DeletionGrace } }, onRequest: requireSession },
    async (request) => {
      const { accountId } = request.consoleSession;
      const current = (await vault.accountView(accountId)).account.deletionGraceDays ?? 0;
      if (request.body.days < current) requireFresh(request, 'shorten the deletion grace');
      await retention.setDeletionGrace(accountId, request.body.days);
      await record(request, 'account.deletion-grace', null, `${current} → ${request.body.days} days`);
      return { deletionGraceDays: request.body.days };
    },
  );

  app.post(
    '/console/api/deletions/:id/restore',
    { schema: { ...hidden, params: RetentionParams, response: { 200: BackupOutcome } }, onRequest: requireSession },
    async (request) => {
      const restored = await retention.undelete(request.consoleSession.accountId, request.params.id);
      await record(request, 'backup.undelete', restored.id);
      return outcomeBody(restored);
    },
  );

  app.post(
    '/console/api/deletions/:id/purge',
    { schema: { ...hidden, params: RetentionParams, response: { 200: BackupOutcome } }, onRequest: requireSession },
    async (request) => {
      requireFresh(request, 'delete a backup for good before its grace ends');
      const purged = await retention.purge(request.consoleSession.accountId, request.params.id);
      await record(request, 'backup.purge', purged.id);
      return outcomeBody(purged);
    },
  );

  app.get(
    '/console/api/vault/history',
    { schema: { ...hidden, response: { 200: VaultHistory } }, onRequest: requireSession },
    async (request) => {
      const { accountId } = request.consoleSession;
      const account = (await vault.accountView(accountId)).account;
      return {
        deletionGraceDays: account.deletionGraceDays ?? 0,
        freshSignIn: fresh(request),
        entries: (await vault.vaultHistory(accountId)).map(historyBody),
      };
    },
  );

  app.post(
    '/console/api/vault/history/:id/restore',
    { schema: { ...hidden, params: RetentionParams, response: { 200: RestoredVault } }, onRequest: requireSession },
    async (request) => {
      requireFresh(request, 'restore an earlier vault envelope');
      const restored = await vault.restoreVault(request.consoleSession.accountId, request.params.id, actor(request));
      await record(request, 'account.vault-restore', request.params.id);
      return { restoredAt: iso(restored.updatedAt) };
    },
  );
};
