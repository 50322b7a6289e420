/**
 * POST /console/api/host-accounts: the signed-in owner adds a host account (docs/console.md#api-keys,
 * docs/client.md#hosts-with-their-own-schedule),
 * exactly as `coffer admin accounts add-host` does (KeyService.addHost): a new account linked to the owner's, on the
 * owner's plan (its own schedule), holding a copy of the owner's vault envelope (ciphertext only: the same master key,
 * so the same passphrase and recipient restore it), and an append-only `backups:write` key shown once. The owner lists
 * and restores its backups with GET /api/host-accounts and the usual backup reads.
 *
 * The policy (each host account is one more schedule on the owner's plan, so an owner session may not mint them freely;
 * they all store under the owner's quota, and none is added while that is used up: KeyService.addHost):
 * - only a session of the owner: opened with a login link, or with a key that is not append-only and may write
 *   (an append-only or read-only session cannot make accounts); never from a host account's own session;
 * - at most CONSOLE_HOST_ACCOUNT_LIMIT host accounts per owner (those the operator added count too); past it, the
 *   operator adds more with `coffer admin accounts add-host`, which has no such limit.
 * Recorded in the audit trail (account.host-add on the owner, key.create on the host account).
 */
import type { FastifyRequest } from 'fastify';
import { AppError } from '../domain/errors.js';
import { PLAN_RULES } from '../domain/plans.js';
import { iso } from '../domain/time.js';
import type { AppPlugin } from '../http/fastify.js';
import type { ChangedBy } from '../services/keys.js';
import { type ConsoleContext, hidden } from './context.js';
import { CreateHostAccountBody, CreatedHostAccount } from '../contract/console-schemas.js';

/** How many host accounts an owner may have for the console to add one more (docs/console.md). */
export const CONSOLE_HOST_ACCOUNT_LIMIT = 5;

const changedBy = (request: FastifyRequest): ChangedBy => ({
  actor: { kind: 'session', id: request.consoleSession.id },
  address: request.ip,
});

export const hostRoutes: AppPlugin<ConsoleContext> = async (app, { keys, readPolicy, requireSession }) => {
  app.post(
    '/console/api/host-accounts',
    { schema: { ...hidden, body: CreateHostAccountBody, response: { 201: CreatedHostAccount } }, onRequest: requireSession },
    async (request, reply) => {
      const session = request.consoleSession;
      if (session.keyId !== null) {
        const credential = (await keys.list(session.accountId)).find((key) => key.id === session.keyId);
        if (!credential || credential.revokedAt !== null)
          throw new AppError('authentication_required', 'The key this session was opened with was revoked.');
        if (credential.appendOnly || !credential.scopes.includes('backups:write')) {
          throw new AppError(
            'insufficient_scope',
            'Only the account owner adds host accounts: this session was opened with an append-only or read-only key.',
            { reason: credential.appendOnly ? 'append_only' : 'missing_scope' },
            undefined,
            'Sign in with a key that has every permission (not append-only), or with a login link.',
          );
        }
      }
      const { label, expiresInDays } = request.body;
      const issued = await keys.addHost(session.accountId, {
        label,
        expiresInMs: expiresInDays === null ? null : expiresInDays * 86_400_000,
        by: changedBy(request),
        mintedFreshAt: session.freshAt,
        limit: {
          most: CONSOLE_HOST_ACCOUNT_LIMIT,
          refusal: (count) =>
            new AppError(
              'insufficient_scope',
              `This account already has ${count} host accounts, the most the console adds (${CONSOLE_HOST_ACCOUNT_LIMIT}).`,
              { reason: 'host_account_limit', limit: CONSOLE_HOST_ACCOUNT_LIMIT },
              undefined,
              'Ask the operator of this server to add more (coffer admin accounts add-host), or give a ' +
                'host a key of this account (it shares its schedule).',
            ),
        },
      });
      const hostAccounts = (await readPolicy.hostAccounts({ accountId: session.accountId, appendOnly: false })).length;
      reply.code(201);
      return {
        accountId: issued.account.id,
        label: issued.account.label ?? label.trim(),
        plan: issued.account.plan,
        backupInterval: PLAN_RULES[issued.account.plan].interval,
        keyId: issued.key.id,
        apiKey: issued.apiKey,
        scopes: issued.key.scopes,
        appendOnly: issued.key.appendOnly,
        expiresAt: issued.key.expiresAt === null ? null : iso(issued.key.expiresAt),
        hostAccounts,
        hostAccountLimit: CONSOLE_HOST_ACCOUNT_LIMIT,
      };
    },
  );
};
