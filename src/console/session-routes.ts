/** /console/api/session: sign in (login link or all-scope API key, limited per address), the session, sign out. */
import { Type } from '@sinclair/typebox';
import type { AppPlugin } from '../http/fastify.js';
import { APPEND_ONLY_REASON, APPEND_ONLY_RESOLUTION } from '../domain/append-only.js';
import { AppError } from '../domain/errors.js';
import type { Plan } from '../domain/plans.js';
import { csrfTokenFor, type OpenedSession } from '../services/sessions.js';
import type { Session } from '../domain/entities.js';
import { iso } from '../domain/time.js';
import { type ConsoleContext, hidden } from './context.js';
import { ConsoleSession, SignInBody } from '../contract/console-schemas.js';
import { clearedSessionCookie, fromOwnOrigin, sessionCookie, signInLimit } from './session-http.js';

function sessionBody(session: Session, plan: Plan, csrfToken: string) {
  return {
    accountId: session.accountId,
    plan,
    signedInWith: session.keyId === null ? ('login-link' as const) : ('api-key' as const),
    keyId: session.keyId,
    createdAt: iso(session.createdAt),
    expiresAt: iso(session.expiresAt),
    csrfToken,
  };
}

export const sessionRoutes: AppPlugin<ConsoleContext> = async (app, { config, sessions, requireSession }) => {
  const limitSignIn = signInLimit(sessions, 'owner');

  app.post(
    '/console/api/session',
    { schema: { ...hidden, body: Type.Optional(SignInBody), response: { 200: ConsoleSession } }, onRequest: limitSignIn },
    async (request, reply) => {
      // Login CSRF: only the console page itself may open a session in this browser.
      if (!fromOwnOrigin(request, config)) {
        throw new AppError('csrf_token_invalid', 'Sign-in requests must come from the console page.');
      }
      const body = request.body ?? {};
      if ((body.loginToken === undefined) === (body.apiKey === undefined)) {
        throw AppError.validation([{ path: '(body)', message: 'send exactly one of loginToken and apiKey' }]);
      }
      let opened: OpenedSession | undefined;
      if (body.loginToken !== undefined) {
        opened = await sessions.signInWithLink(body.loginToken);
        if (!opened) {
          throw new AppError('login_link_invalid', 'This sign-in link is not valid: it was already used, has expired, or was mistyped.');
        }
      } else {
        const outcome = await sessions.signInWithKey(body.apiKey!);
        if (!outcome.ok && outcome.reason === 'insufficient_scope') {
          throw new AppError(
            'insufficient_scope',
            `The console needs a key that holds all three permissions; this one lacks ${outcome.missing}.`,
            { requiredPermission: outcome.missing },
          );
        }
        if (!outcome.ok && outcome.reason === 'append_only') {
          throw new AppError(
            'insufficient_scope',
            'This API key is append-only: it may add backups but not open the console, which can delete them and manage keys.',
            { reason: APPEND_ONLY_REASON },
            undefined,
            APPEND_ONLY_RESOLUTION,
          );
        }
        if (!outcome.ok) throw new AppError('authentication_required', 'This API key is unknown, revoked or expired.');
        opened = outcome.opened;
      }
      reply.header('set-cookie', sessionCookie(config, opened.secret, opened.session.expiresAt - opened.session.createdAt));
      return sessionBody(opened.session, opened.account.plan, opened.csrfToken);
    },
  );

  // A fresh sign-in inside a live session (purging early, shortening the deletion grace, restoring an envelope ask
  // for one): the same credentials as sign-in, for the same account; the old session ends and a new one starts.
  app.post(
    '/console/api/session/confirm',
    { schema: { ...hidden, body: Type.Optional(SignInBody), response: { 200: ConsoleSession } }, onRequest: [limitSignIn, requireSession] },
    async (request, reply) => {
      const body = request.body ?? {};
      if ((body.loginToken === undefined) === (body.apiKey === undefined)) {
        throw AppError.validation([{ path: '(body)', message: 'send exactly one of loginToken and apiKey' }]);
      }
      const opened =
        body.loginToken !== undefined
          ? await sessions.signInWithLink(body.loginToken)
          : await sessions.signInWithKey(body.apiKey!).then((outcome) => (outcome.ok ? outcome.opened : undefined));
      if (opened && opened.session.accountId !== request.consoleSession.accountId) await sessions.signOut(opened.session);
      if (!opened || opened.session.accountId !== request.consoleSession.accountId) {
        throw new AppError(
          'reauthentication_required',
          'This credential does not confirm the signed-in account: use a new sign-in link or an all-scope API key of this account.',
        );
      }
      await sessions.signOut(request.consoleSession);
      reply.header('set-cookie', sessionCookie(config, opened.secret, opened.session.expiresAt - opened.session.createdAt));
      return sessionBody(opened.session, opened.account.plan, opened.csrfToken);
    },
  );

  app.get(
    '/console/api/session',
    { schema: { ...hidden, response: { 200: ConsoleSession } }, onRequest: requireSession },
    async (request) => {
      const session = request.consoleSession;
      const account = await sessions.account(session);
      return sessionBody(session, account?.plan ?? 'free', csrfTokenFor(request.consoleSecret));
    },
  );

  app.delete('/console/api/session', { schema: hidden, onRequest: requireSession }, async (request, reply) => {
    await sessions.signOut(request.consoleSession);
    reply.header('set-cookie', clearedSessionCookie(config)).code(204);
    return reply.send();
  });
};
