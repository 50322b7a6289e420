/** Extension: an owner's host accounts and their backups, read-only (docs/api-rules.md#host-accounts). */
import { Type } from '@sinclair/typebox';
import { PLAN_RULES } from '../domain/plans.js';
import { iso } from '../domain/time.js';
import type { AppPlugin } from '../http/fastify.js';
import type { RouteContext } from './context.js';
import { errorResponses, json } from './responses.js';
import { BackupList, HostAccountList, HostAccountParams } from '../contract/schemas.js';
import { serializedList } from './serialized-list.js';

const tags = ['Host accounts'];

export const hostAccountRoutes: AppPlugin<RouteContext> = async (app, ctx) => {
  const read = ctx.requireScope('backups:read');

  app.get(
    '/api/host-accounts',
    {
      schema: {
        operationId: 'listHostAccounts',
        summary: "List the caller's host accounts (extension)",
        tags,
        response: { 200: json(Type.Ref(HostAccountList), 'Host accounts, oldest first.'), ...errorResponses(401, 403, 500) },
      },
      onRequest: read,
    },
    async (request) => {
      const hosts = await ctx.readPolicy.hostAccounts(request.principal);
      return {
        hosts: hosts.map(({ account, vault }) => ({
          accountId: account.id,
          label: account.label ?? '',
          backupInterval: PLAN_RULES[account.plan].interval,
          createdAt: iso(account.createdAt),
          vault,
        })),
      };
    },
  );

  app.get(
    '/api/host-accounts/:accountId/backups',
    {
      schema: {
        operationId: 'listHostAccountBackups',
        summary: "List one host account's backups, newest first (extension)",
        tags,
        params: HostAccountParams,
        response: {
          200: json(Type.Ref(BackupList), 'Visible backups of the host account, newest first.'),
          ...errorResponses(401, 403, 404, 500),
        },
      },
      onRequest: read,
    },
    async (request, reply) => {
      const { accountId } = request.params as { accountId: string };
      const records = await ctx.readPolicy.listHost(request.principal, accountId);
      const serialize = reply.getSerializationFunction('200', 'application/json');
      if (!serialize) throw new Error('GET /api/host-accounts/{accountId}/backups has no response serializer');
      void reply.type('application/json; charset=utf-8');
      return serializedList(records, serialize);
    },
  );
};
