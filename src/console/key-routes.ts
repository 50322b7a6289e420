/**
 * /console/api/keys: the account's API keys, newest first; make one (bounded by the session's credential; append-only
 * on request); revoke. Making and revoking are recorded in the audit trail.
 */
import type { AppPlugin } from '../http/fastify.js';
import { AppError } from '../domain/errors.js';
import { SCOPES } from '../domain/scopes.js';
import type { FastifyRequest } from 'fastify';
import { type ChangedBy, keyView } from '../services/keys.js';
import type { ApiKey, Session } from '../domain/entities.js';
import { type ConsoleContext, hidden } from './context.js';
import { ConsoleKey, ConsoleKeyList, CreateKeyBody, CreatedKey, KeyParams } from '../contract/console-schemas.js';

/** keyView as the page sees it (the serializer leaves out accountId: every key listed is the session's account's). */
const consoleKey = (key: ApiKey, now: number, session: Session) => ({ ...keyView(key, now), usedByThisSession: session.keyId === key.id });

/** The console session and its client address, for the audit trail. */
const changedBy = (request: FastifyRequest): ChangedBy => ({
  actor: { kind: 'session', id: request.consoleSession.id },
  address: request.ip,
});

export const keyRoutes: AppPlugin<ConsoleContext> = async (app, { keys, clock, requireSession }) => {
  app.get('/console/api/keys', { schema: { ...hidden, response: { 200: ConsoleKeyList } }, onRequest: requireSession }, async (request) => {
    const session = request.consoleSession;
    const now = clock.now();
    const list = await keys.list(session.accountId);
    return { keys: list.reverse().map((key) => consoleKey(key, now, session)) };
  });

  app.post(
    '/console/api/keys',
    { schema: { ...hidden, body: CreateKeyBody, response: { 201: CreatedKey } }, onRequest: requireSession },
    async (request, reply) => {
      const session = request.consoleSession;
      const scopes = SCOPES.filter((scope) => request.body.scopes.includes(scope));
      const { expiresInDays, appendOnly, label } = request.body;
      const minted = await keys.create(
        session,
        {
          scopes,
          expiresInMs: expiresInDays === null ? null : expiresInDays * 86_400_000,
          appendOnly: appendOnly === true,
          label: label ?? null,
        },
        changedBy(request),
      );
      reply.code(201);
      return { ...consoleKey(minted.key, clock.now(), session), apiKey: minted.apiKey, expiryCapped: minted.capped };
    },
  );

  app.delete(
    '/console/api/keys/:id',
    { schema: { ...hidden, params: KeyParams, response: { 200: ConsoleKey } }, onRequest: requireSession },
    async (request) => {
      const session = request.consoleSession;
      const outcome = await keys.revoke(request.params.id, session.accountId, changedBy(request));
      if (!outcome) throw new AppError('not_found', 'No such API key in this account.');
      return consoleKey(outcome.key, clock.now(), session);
    },
  );
};
