/**
 * POST /console/api/host-accounts over real HTTP with a real session: the signed-in owner adds a host account (its own
 * schedule on the owner's plan, a copy of the owner's vault, an append-only key shown once), exactly as
 * `coffer admin accounts add-host` does; the host backs up on its own cadence and the owner's session lists its backups
 * through GET /api/host-accounts. Refused: no session, no CSRF token, an owner without a vault, a bad or taken label,
 * a host account's own key, more than the console's limit of host accounts.
 */
import { describe, expect, it } from 'vitest';
import { CONSOLE_HOST_ACCOUNT_LIMIT } from '../../src/console/host-routes.js';
import { ManualClock } from '../helpers/clock.js';
import { readyBackup, useServer } from '../helpers/fixture.js';
import { skipPg } from '../helpers/pg.js';
import { signInWithKey } from './helpers.js';

// PostgreSQL too: its driver interleaves concurrent requests where SQLite's runs each to its end.
for (const [name, postgres] of [
  ['SQLite', false],
  ['PostgreSQL', true],
] as const)
  describe.skipIf(postgres && skipPg)(`POST /console/api/host-accounts (${name})`, () => {
    const clock = new ManualClock();
    const fixture = useServer({ clock, postgres });

    const signIn = (apiKey: string) => signInWithKey(fixture.server.url, apiKey);
    type Session = Awaited<ReturnType<typeof signIn>>;
    const request = async (method: string, path: string, session: Partial<Session>, body?: unknown) => {
      const headers: Record<string, string> = { origin: fixture.server.url };
      if (session.cookie) headers.cookie = session.cookie;
      if (session.csrf) headers['x-csrf-token'] = session.csrf;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const response = await fetch(`${fixture.server.url}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined };
    };
    const addHost = (session: Partial<Session>, body: unknown) => request('POST', '/console/api/host-accounts', session, body);

    it('makes a host account on the owner plan with the same vault and an append-only key; its backups are the owner’s to list', async () => {
      const owner = await fixture.account({ plan: 'pro' });
      const session = await signIn(owner.apiKey);
      const made = await addHost(session, { label: 'web', expiresInDays: 365 });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      expect(made.body).toMatchObject({
        label: 'web',
        plan: 'pro',
        backupInterval: '30m',
        scopes: ['backups:write'],
        appendOnly: true,
        hostAccounts: 1,
        hostAccountLimit: CONSOLE_HOST_ACCOUNT_LIMIT,
      });
      expect(Object.keys(made.body).sort()).toEqual([
        'accountId',
        'apiKey',
        'appendOnly',
        'backupInterval',
        'expiresAt',
        'hostAccountLimit',
        'hostAccounts',
        'keyId',
        'label',
        'plan',
        'scopes',
      ]);
      expect(made.body.apiKey).toMatch(/^cfk_/);
      expect(made.body.accountId).not.toBe(owner.accountId);
      expect(Date.parse(made.body.expiresAt) - clock.now()).toBe(365 * 86_400_000);

      // The owner's own backup, then the host's at once: the host has its own schedule.
      await readyBackup(owner.call);
      const host = fixture.client(made.body.apiKey);
      const { id: hostBackup } = await readyBackup(host);
      // The host key writes only: it reads neither the owner's backups nor its own list.
      expect((await host('GET', '/api/backups')).status).toBe(403);

      const hosts = await request('GET', '/api/host-accounts', session);
      expect(hosts.status).toBe(200);
      expect(hosts.body.hosts).toEqual([
        expect.objectContaining({ accountId: made.body.accountId, label: 'web', backupInterval: '30m', vault: 'shared' }),
      ]);
      const listed = await request('GET', `/api/host-accounts/${made.body.accountId}/backups`, session);
      expect(listed.body.backups.map((b: { id: string }) => b.id)).toEqual([hostBackup]);
      expect((await request('GET', `/api/backups/${hostBackup}`, session)).status).toBe(200);

      // The audit trail names it on the owner's account.
      const audit = await request('GET', '/console/api/audit', session);
      expect(JSON.stringify(audit.body)).toContain('account.host-add');

      // A taken label is refused; so is a label that is no name.
      expect((await addHost(session, { label: 'web', expiresInDays: null })).status).toBe(400);
      expect((await addHost(session, { label: "web'; rm -rf /", expiresInDays: null })).body.code).toBe('validation_failed');
    });

    it('refuses without a session, without the CSRF token and for an owner without a vault, making nothing', async () => {
      const owner = await fixture.account({ vault: false });
      const session = await signIn(owner.apiKey);
      expect((await addHost({}, { label: 'web', expiresInDays: null })).status).toBe(401);
      expect((await addHost({ cookie: session.cookie }, { label: 'web', expiresInDays: null })).body.code).toBe('csrf_token_invalid');
      const noVault = await addHost(session, { label: 'web', expiresInDays: null });
      expect(noVault.status).toBe(409);
      expect(noVault.body.code).toBe('vault_not_initialized');
      expect((await request('GET', '/api/host-accounts', session)).body.hosts).toEqual([]);
    });

    it(`adds at most ${CONSOLE_HOST_ACCOUNT_LIMIT} host accounts per owner, also asked all at once, then names the operator's command`, async () => {
      const owner = await fixture.account();
      const session = await signIn(owner.apiKey);
      // Two more than the limit, at the same moment: exactly the limit are made, two refused.
      const all = await Promise.all(
        Array.from({ length: CONSOLE_HOST_ACCOUNT_LIMIT + 2 }, (_, i) => addHost(session, { label: `host-${i}`, expiresInDays: null })),
      );
      expect(all.map((r) => r.status).sort()).toEqual([...Array(CONSOLE_HOST_ACCOUNT_LIMIT).fill(201), 403, 403]);
      // The same name twice at once: one made, one refused.
      const other = await signIn((await fixture.account()).apiKey);
      const twins = await Promise.all([0, 1].map(() => addHost(other, { label: 'twin', expiresInDays: null })));
      expect(twins.map((r) => r.status).sort()).toEqual([201, 400]);
      const over = await addHost(session, { label: 'one-more', expiresInDays: null });
      expect(over.status).toBe(403);
      expect(over.body.details).toMatchObject({ reason: 'host_account_limit', limit: CONSOLE_HOST_ACCOUNT_LIMIT });
      expect(over.body.resolution).toMatch(/coffer admin accounts add-host/);
      expect((await request('GET', '/api/host-accounts', session)).body.hosts).toHaveLength(CONSOLE_HOST_ACCOUNT_LIMIT);
    });
  });
