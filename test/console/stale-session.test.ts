/**
 * A console session whose sign-in is no longer fresh cannot renew itself (docs/console.md#fresh-sign-in), through
 * the real HTTP routes of a real server with an injected clock, on SQLite and on PostgreSQL: it may not mint a key
 * that can open the console, and a key minted while it was fresh opens or confirms only sessions as stale as it is,
 * by either route (POST /console/api/session/confirm, a new sign-in). Each of the three guarded actions (purging a
 * scheduled backup, restoring an earlier vault envelope, shortening the deletion grace) is tried by each route; an
 * owner's key from elsewhere (the operator's) still confirms, the control that the guarded actions can succeed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { Conformance, conformantApi } from '../helpers/conformance.js';
import { readyBackup } from '../helpers/fixture.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const MIN = 60_000;
const ALL_SCOPES = ['backups:read', 'backups:write', 'backups:restore'];

type Guarded = 'purge' | 'restore an envelope' | 'shorten the grace';
const GUARDED: Guarded[] = ['purge', 'restore an envelope', 'shorten the grace'];
type Route = 'confirm' | 'sign-in';
const ROUTES: Route[] = ['confirm', 'sign-in'];

const engines = [
  { name: 'SQLite', skip: false, env: async () => ({ env: {}, drop: async () => undefined }) },
  {
    name: 'PostgreSQL',
    skip: skipPg,
    env: async () => {
      requirePg();
      const schema: TestSchema = await createTestSchema('coffer_stale');
      return { env: { COFFER_DATABASE_URL: schema.url }, drop: () => schema.drop() };
    },
  },
];

for (const engine of engines) {
  describe.skipIf(engine.skip)(`a stale console session cannot make itself fresh: ${engine.name}`, () => {
    const clock = new ManualClock(Date.now());
    let server: TestServer;
    let conformance: Conformance;
    let drop: () => Promise<void> = async () => undefined;

    beforeAll(async () => {
      const made = await engine.env();
      drop = made.drop;
      server = await startTestServer({ clock, env: made.env });
      conformance = await Conformance.load(server.url);
    });
    afterAll(async () => {
      await server?.stop();
      await drop();
    });

    type Session = Awaited<ReturnType<typeof sessionFrom>>;

    async function sessionFrom(response: Response) {
      expect(response.status).toBe(200);
      const cookie = response.headers.get('set-cookie')!.split(';')[0]!;
      const { csrfToken } = (await response.json()) as { csrfToken: string };
      const send = async (method: string, url: string, body?: unknown) => {
        const answer = await fetch(`${server.url}${url}`, {
          method,
          headers: {
            cookie,
            origin: server.url,
            'x-csrf-token': csrfToken,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await answer.text();
        return { status: answer.status, body: text ? JSON.parse(text) : null, headers: answer.headers };
      };
      return { cookie, csrf: csrfToken, send };
    }

    const signIn = async (credential: { loginToken: string } | { apiKey: string }) =>
      sessionFrom(
        await fetch(`${server.url}/console/api/session`, {
          method: 'POST',
          headers: { origin: server.url, 'content-type': 'application/json' },
          body: JSON.stringify(credential),
        }),
      );
    const confirm = async (session: Session, apiKey: string) =>
      sessionFrom(
        await fetch(`${server.url}/console/api/session/confirm`, {
          method: 'POST',
          headers: { cookie: session.cookie, origin: server.url, 'x-csrf-token': session.csrf, 'content-type': 'application/json' },
          body: JSON.stringify({ apiKey }),
        }),
      );

    /**
     * A pro account with a 7-day grace, one backup scheduled for deletion and one earlier vault envelope kept: what
     * the three guarded actions act on. Signed in now with a login link.
     */
    async function account() {
      clock.advance(31 * MIN);
      const owner = await server.newKey({ plan: 'pro' });
      const call = conformantApi(server.url, conformance, owner.apiKey);
      expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope(1) })).status).toBe(200);
      expect(await server.parts.stores.accounts.setDeletionGrace(owner.accountId, 7)).toBe(true);
      const { id } = await readyBackup(call, 500);
      expect((await call('DELETE', `/api/backups/${id}`)).status).toBe(200);
      expect((await call('POST', '/api/backup-account/rotate', { json: envelope(2) })).status).toBe(200);
      const { token } = (await server.parts.sessions.createLoginLink(owner.accountId))!;
      const session = await signIn({ loginToken: token });
      const history = (await session.send('GET', '/console/api/vault/history')).body.entries as { id: string }[];
      expect(history).toHaveLength(1);
      return { ...owner, call, session, backupId: id, entryId: history[0]!.id };
    }

    type Account = Awaited<ReturnType<typeof account>>;

    const attempt = (session: Session, what: Guarded, target: Account) =>
      what === 'purge'
        ? session.send('POST', `/console/api/deletions/${target.backupId}/purge`)
        : what === 'restore an envelope'
          ? session.send('POST', `/console/api/vault/history/${target.entryId}/restore`)
          : session.send('PUT', '/console/api/deletions/grace', { days: 1 });

    /** Nothing the guarded actions touch has changed. */
    async function unchanged(target: Account) {
      expect((await server.parts.stores.backups.getBackup(target.backupId))?.status).toBe('DELETING');
      expect((await server.parts.stores.accounts.getAccount(target.accountId))?.deletionGraceDays).toBe(7);
      expect((await target.call('GET', '/api/backup-account')).body).toMatchObject(envelope(2));
    }

    const mint = (session: Session, scopes = ALL_SCOPES, appendOnly = false) =>
      session.send('POST', '/console/api/keys', { scopes, expiresInDays: null, appendOnly });

    it('a stale session may not mint a key that can open the console; narrower keys it still may', async () => {
      const target = await account();
      clock.advance(6 * MIN);
      const refused = await mint(target.session);
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({ code: 'reauthentication_required', details: { freshSignInSeconds: 300 } });
      expect((await server.parts.stores.keys.listApiKeys(target.accountId)).map((key) => key.id)).toEqual([target.keyId]);
      // A host's write-only key, or a reader's, cannot open a session: no freshness needed.
      expect((await mint(target.session, ['backups:write'], true)).status).toBe(201);
      expect((await mint(target.session, ['backups:read', 'backups:write'])).status).toBe(201);
      expect((await mint(target.session, ALL_SCOPES, true)).status).toBe(201);
    });

    for (const route of ROUTES) {
      for (const what of GUARDED) {
        it(`a key minted while the session was fresh, used by ${route} once it is stale, cannot ${what}`, async () => {
          const target = await account();
          const minted = await mint(target.session);
          expect(minted.status).toBe(201);
          clock.advance(6 * MIN);
          const renewed =
            route === 'confirm' ? await confirm(target.session, minted.body.apiKey) : await signIn({ apiKey: minted.body.apiKey });
          expect((await renewed.send('GET', '/console/api/deletions')).body.freshSignIn).toBe(false);
          const refused = await attempt(renewed, what, target);
          expect(refused.status).toBe(403);
          expect(refused.body.code).toBe('reauthentication_required');
          await unchanged(target);
          // Nor can the renewed session mint its way out.
          expect((await mint(renewed)).body.code).toBe('reauthentication_required');

          // The control: the owner's own key (made by the operator, not in a session) confirms, and the action goes through.
          const fresh = route === 'confirm' ? await confirm(renewed, target.apiKey) : await signIn({ apiKey: target.apiKey });
          expect((await attempt(fresh, what, target)).status).toBe(200);
        });
      }
    }

    it('freshness passes down a chain of minted keys: no link is fresher than the first sign-in', async () => {
      const target = await account();
      clock.advance(1 * MIN);
      const first = await mint(target.session);
      expect(first.status).toBe(201);
      clock.advance(1 * MIN);
      const second = await signIn({ apiKey: first.body.apiKey });
      // Still within the first sign-in's window: it may mint, and what it mints carries the first sign-in's time.
      const next = await mint(second);
      expect(next.status).toBe(201);
      clock.advance(3 * MIN + 1);
      const third = await signIn({ apiKey: next.body.apiKey });
      expect((await third.send('GET', '/console/api/deletions')).body.freshSignIn).toBe(false);
      expect((await attempt(third, 'purge', target)).status).toBe(403);
      await unchanged(target);
    });
  });
}
