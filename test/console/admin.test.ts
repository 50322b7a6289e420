/**
 * The operator console's API over plain HTTP (docs/operations.md#operator-console): signed in only with a link from
 * the real `coffer admin login-link --operator` (single use, refused once used or expired), its own cookie and CSRF
 * token; an owner's session never opens it and an operator's session never opens the owners' console or the API.
 * Every change it makes is in the account's audit trail with the operator as actor, and what it returns holds none
 * of a backup's sealed metadata, wrapped key or the vault's envelope.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.js';
import { createSlot, upload, useServer, bytes } from '../helpers/fixture.js';
import { json, runCli } from '../client/helpers.js';

const b64 = (n: number) => randomBytes(n).toString('base64');

describe('the operator console API', () => {
  // The server's clock starts 49 hours back and catches up with the real one (the CLI's links use the real time).
  const clock = new ManualClock(Date.now() - 49 * 3_600_000);
  const fx = useServer({ clock });
  let cliEnv: Record<string, string>;
  let accountId: string;
  let ownerKeyId: string;
  let backupId: string;
  /** Known secret-ish values of one backup and the vault: none may appear in an operator answer. */
  const sealed = {
    encryptedMetadata: b64(120),
    encryptedMetadataNonce: b64(24),
    wrappedDek: b64(48),
    wrappedDekNonce: b64(24),
  };
  const vault = {
    cryptoVersion: 'v1',
    kdf: { salt: b64(16), opslimit: 2, memlimit: 67_108_864 },
    wrappedMasterKey: b64(48),
    wrappedMasterKeyNonce: b64(24),
  };

  const operatorLink = async (extra: string[] = []) =>
    json(await runCli(['admin', 'login-link', '--operator', '--json', ...extra], cliEnv)) as {
      url: string;
      expiresAt: string;
      operator: string | null;
    };
  const tokenOf = (url: string) => new URL(url).hash.replace('#token=', '');

  async function signIn(token: string, headers: Record<string, string> = {}) {
    return fetch(`${fx.server.url}/admin/api/session`, {
      method: 'POST',
      headers: { origin: fx.server.url, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ loginToken: token }),
    });
  }

  async function operator() {
    const response = await signIn(tokenOf((await operatorLink()).url));
    expect(response.status, await response.clone().text()).toBe(200);
    const setCookie = response.headers.get('set-cookie')!;
    const { csrfToken } = (await response.json()) as { csrfToken: string };
    return { cookie: setCookie.split(';')[0]!, setCookie, csrf: csrfToken };
  }

  const send = (method: string, path: string, options: { cookie?: string; csrf?: string; body?: unknown; origin?: string } = {}) =>
    fetch(`${fx.server.url}${path}`, {
      method,
      headers: {
        ...(options.cookie ? { cookie: options.cookie } : {}),
        ...(options.csrf ? { 'x-csrf-token': options.csrf } : {}),
        origin: options.origin ?? fx.server.url,
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });

  async function ownerSession() {
    const { token } = (await fx.server.parts.sessions.createLoginLink(accountId))!;
    const response = await fetch(`${fx.server.url}/console/api/session`, {
      method: 'POST',
      headers: { origin: fx.server.url, 'content-type': 'application/json' },
      body: JSON.stringify({ loginToken: token }),
    });
    expect(response.status).toBe(200);
    return {
      cookie: response.headers.get('set-cookie')!.split(';')[0]!,
      csrf: ((await response.json()) as { csrfToken: string }).csrfToken,
    };
  }

  beforeAll(async () => {
    cliEnv = { COFFER_DATA_DIR: fx.server.dataDir, COFFER_PUBLIC_URL: fx.server.url };
    const { apiKey, keyId, accountId: id } = await fx.server.newKey({ plan: 'pro' });
    accountId = id;
    ownerKeyId = keyId;
    const call = fx.client(apiKey);
    expect((await call('POST', '/api/backup-account/bootstrap', { json: vault })).status).toBe(200);
    backupId = await createSlot(call);
    expect((await upload(call, backupId, bytes(4096))).status).toBe(201);
    const finalized = await call('POST', `/api/backups/${backupId}/finalize`, {
      json: { cryptoVersion: 'v1', ...sealed, ciphertextSizeBytes: 4096, plaintextSizeBytes: 5000 },
    });
    expect(finalized.status, finalized.text).toBe(200);
    // A second account that never backed up: overdue once twice its plan's interval has passed.
    await fx.server.newKey({ plan: 'free' });
    clock.advance(49 * 3_600_000);
  });
  afterAll(() => undefined);

  it('a link from `coffer admin login-link --operator` opens a session once; used or expired it is refused', async () => {
    const printed = await operatorLink(['--expires-in', '5m']);
    expect(printed.url).toMatch(new RegExp(`^${fx.server.url}/admin/login#token=cfl_[A-Za-z0-9_-]{43}$`));
    const token = tokenOf(printed.url);
    const first = await signIn(token);
    expect(first.status).toBe(200);
    const cookie = first.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^coffer_operator=cfs_[A-Za-z0-9_-]{43}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Strict$/);
    expect((await signIn(token)).status).toBe(401);
    // An owner's link is not an operator's, nor the reverse.
    const { token: ownerToken } = (await fx.server.parts.sessions.createLoginLink(accountId))!;
    expect((await signIn(ownerToken)).status).toBe(401);
    const expiring = tokenOf((await operatorLink(['--expires-in', '1m'])).url);
    clock.advance(5 * 60_000); // past its minute, whatever the real time the CLI took
    expect((await signIn(expiring)).status).toBe(401);
    expect((await signIn('cfl_not-a-token')).status).toBe(401);
    // A sign-in from another site is refused (login CSRF).
    const fresh = tokenOf((await operatorLink()).url);
    expect((await signIn(fresh, { origin: 'https://evil.example' })).status).toBe(403);
  });

  it('the CLI refuses an account id with --operator, and no id without it', async () => {
    const both = await runCli(['admin', 'login-link', accountId, '--operator'], cliEnv);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toMatch(/--operator/);
    expect(both.stderr).not.toMatch(/\n\s+at /);
    const neither = await runCli(['admin', 'login-link'], cliEnv);
    expect(neither.code).not.toBe(0);
  });

  it('sessions stay on their side: an owner session never opens /admin/api, an operator session never opens /console/api or /api', async () => {
    const owner = await ownerSession();
    const op = await operator();
    expect((await send('GET', '/admin/api/overview', { cookie: owner.cookie })).status).toBe(401);
    expect((await send('GET', `/admin/api/accounts/${accountId}`, { cookie: owner.cookie })).status).toBe(401);
    expect(
      (await send('PUT', `/admin/api/accounts/${accountId}/plan`, { cookie: owner.cookie, csrf: owner.csrf, body: { plan: 'free' } }))
        .status,
    ).toBe(401);
    // The operator's cookie under the owners' name is still an unknown owner session.
    const asOwner = op.cookie.replace('coffer_operator=', 'coffer_session=');
    expect((await send('GET', '/console/api/session', { cookie: op.cookie })).status).toBe(401);
    expect((await send('GET', '/console/api/session', { cookie: asOwner })).status).toBe(401);
    expect((await send('GET', '/api/backup-account', { cookie: asOwner })).status).toBe(401);
    expect((await send('GET', '/api/backups', { cookie: op.cookie })).status).toBe(401);
    // And the reverse name swap: an owner's secret as the operator cookie.
    const ownerAsOperator = owner.cookie.replace('coffer_session=', 'coffer_operator=');
    expect((await send('GET', '/admin/api/overview', { cookie: ownerAsOperator })).status).toBe(401);
    expect((await send('GET', '/admin/api/overview', { cookie: op.cookie })).status).toBe(200);
  });

  it("changes need the operator CSRF token from the operator console origin (not the owners' token)", async () => {
    const op = await operator();
    const owner = await ownerSession();
    const path = `/admin/api/accounts/${accountId}/plan`;
    expect((await send('PUT', path, { cookie: op.cookie, body: { plan: 'plus' } })).status).toBe(403);
    expect((await send('PUT', path, { cookie: op.cookie, csrf: owner.csrf, body: { plan: 'plus' } })).status).toBe(403);
    expect(
      (await send('PUT', path, { cookie: op.cookie, csrf: op.csrf, origin: 'https://evil.example', body: { plan: 'plus' } })).status,
    ).toBe(403);
    expect((await fx.server.parts.stores.accounts.getAccount(accountId))!.plan).toBe('pro');
    const bad = await send('PUT', path, { cookie: op.cookie, csrf: op.csrf, body: { plan: 'gold' } });
    expect(bad.status).toBe(400);
    expect(await bad.text()).not.toMatch(/\n\s+at /);
    expect((await fx.server.parts.stores.accounts.getAccount(accountId))!.plan).toBe('pro');
  });

  it('the overview: usage per account, overdue, totals and the server', async () => {
    const op = await operator();
    const response = await send('GET', '/admin/api/overview', { cookie: op.cookie });
    expect(response.headers.get('cache-control')).toBe('no-store');
    const body = (await response.json()) as any;
    const mine = body.accounts.find((a: any) => a.accountId === accountId);
    expect(mine).toMatchObject({ plan: 'pro', backups: 1, graceBackups: 0, storedBytes: 4096, overdue: true, keys: 1, quotaBytes: null });
    expect(body.accounts).toHaveLength(2);
    expect(body.accounts.every((a: any) => a.overdue)).toBe(true);
    expect(body.totals.overdue).toBe(2);
    expect(body.totals.backupsLast24h).toBe(0); // the backup is 49 hours old
    expect(body.totals.plans).toContainEqual({ plan: 'pro', accounts: 1, storedBytes: 4096 });
    expect(body.totals.plans).toContainEqual({ plan: 'free', accounts: 1, storedBytes: 0 });
    expect(body.server).toMatchObject({ database: 'sqlite', blobStore: 'fs' });
    expect(body.server.migrations).toContain('0013_operator_sessions');
  });

  it('plan, deletion grace, key revocation and an owner link are audited with the operator as actor', async () => {
    const op = await operator();
    const base = `/admin/api/accounts/${accountId}`;
    const plan = await send('PUT', `${base}/plan`, { cookie: op.cookie, csrf: op.csrf, body: { plan: 'plus' } });
    expect(plan.status).toBe(200);
    expect(((await plan.json()) as any).account.plan).toBe('plus');
    expect((await send('PUT', `${base}/deletion-grace`, { cookie: op.cookie, csrf: op.csrf, body: { days: 9 } })).status).toBe(200);
    expect((await fx.server.parts.stores.accounts.getAccount(accountId))!.deletionGraceDays).toBe(9);
    const link = await send('POST', `${base}/login-link`, { cookie: op.cookie, csrf: op.csrf });
    const { url } = (await link.json()) as { url: string };
    expect(url).toMatch(/\/console\/login#token=cfl_/);
    const revoked = await send('POST', `${base}/keys/${ownerKeyId}/revoke`, { cookie: op.cookie, csrf: op.csrf });
    const after = (await revoked.json()) as any;
    expect(after.keys.find((k: any) => k.keyId === ownerKeyId).status).toBe('revoked');
    expect(after.account.keys).toBe(0);
    // A key of another account is not revoked through this one.
    const other = await fx.server.newKey({ plan: 'free' });
    expect((await send('POST', `${base}/keys/${other.keyId}/revoke`, { cookie: op.cookie, csrf: op.csrf })).status).toBe(404);
    expect(fx.server.parts.keys.status((await fx.server.parts.stores.keys.getApiKey(other.keyId))!)).toBe('active');

    const trail = await fx.server.parts.audit.list(accountId);
    const byAction = (action: string) => trail.find((e) => e.action === action);
    for (const action of ['account.plan', 'account.deletion-grace', 'key.revoke', 'account.login-link']) {
      expect(byAction(action)?.actor.kind, action).toBe('operator');
    }
    expect(byAction('account.plan')!.detail).toBe('pro → plus');
    expect(byAction('key.revoke')!.target).toBe(ownerKeyId);
    // The operator's page shows the same trail; the link's token is in none of it.
    const detail = await (await send('GET', base, { cookie: op.cookie })).text();
    expect(detail).toContain('account.login-link');
    expect(detail).not.toContain(new URL(url).hash.slice(7));
  });

  it("the quota: set in bytes, none, or back to the plan's; each change audited with the operator as actor", async () => {
    const op = await operator();
    const { accountId: id } = await fx.server.newKey({ plan: 'plus' });
    const base = `/admin/api/accounts/${id}`;
    const put = (quota: unknown, options: { csrf?: string } = { csrf: op.csrf }) =>
      send('PUT', `${base}/quota`, { cookie: op.cookie, ...options, body: { quota } });

    const set = await put(5000);
    expect(set.status).toBe(200);
    expect(((await set.json()) as any).account).toMatchObject({ quotaBytes: 5000, quotaSource: 'account' });
    expect((await fx.server.parts.quotas.quota(id))!.quota).toBe(5000);
    const none = await put(null);
    expect(((await none.json()) as any).account).toMatchObject({ quotaBytes: null, quotaSource: 'account' });
    expect((await fx.server.parts.stores.accounts.getAccount(id))!.quotaOverride).toBeNull();
    const plan = await put('plan');
    expect(((await plan.json()) as any).account).toMatchObject({ quotaBytes: null, quotaSource: 'plan' });
    expect((await fx.server.parts.stores.accounts.getAccount(id))!.quotaOverride).toBeUndefined();
    expect((await put('plan')).status).toBe(200); // no change: not audited again

    // Refused: not a whole number of bytes, no CSRF token, an unknown account; none of them changes anything.
    for (const quota of [-1, 1.5, '5000', 'lots', Number.MAX_SAFE_INTEGER + 2]) {
      const refused = await put(quota);
      expect(refused.status, String(quota)).toBe(400);
      expect(((await refused.json()) as any).code).toBe('validation_failed');
    }
    expect((await put(1, { csrf: undefined })).status).toBe(403);
    expect(
      (await send('PUT', '/admin/api/accounts/acc_nobody/quota', { cookie: op.cookie, csrf: op.csrf, body: { quota: 1 } })).status,
    ).toBe(404);
    expect((await fx.server.parts.stores.accounts.getAccount(id))!.quotaOverride).toBeUndefined();

    const changes = (await fx.server.parts.audit.list(id)).filter((e) => e.action === 'account.quota').reverse();
    expect(changes.map((e) => e.detail)).toEqual(['plan → 5000 bytes', '5000 bytes → none', 'none → plan']);
    expect(changes.every((e) => e.actor.kind === 'operator')).toBe(true);
  });

  it("zero knowledge: no operator answer holds the backup's sealed metadata, wrapped key or the vault envelope", async () => {
    const op = await operator();
    const texts = [
      await (await send('GET', '/admin/api/overview', { cookie: op.cookie })).text(),
      await (await send('GET', `/admin/api/accounts/${accountId}`, { cookie: op.cookie })).text(),
      await (await send('GET', '/admin/api/session', { cookie: op.cookie })).text(),
    ];
    const secrets = [...Object.values(sealed), vault.wrappedMasterKey, vault.wrappedMasterKeyNonce, vault.kdf.salt];
    const forms = secrets.flatMap((value) => [
      value,
      Buffer.from(value, 'base64').toString('hex'),
      Buffer.from(value, 'base64').toString('base64url'),
    ]);
    for (const text of texts) {
      expect(text.length).toBeGreaterThan(10);
      for (const form of forms) expect(text).not.toContain(form);
      expect(text).not.toMatch(/wrapped|encryptedMetadata|nonce|salt|envelope/i);
    }
    // The sanity check is real: the owner's own API does return the sealed metadata.
    const owner = await fx.server.newKey({ accountId, scopes: ['backups:read'] });
    const list = await (
      await fetch(`${fx.server.url}/api/backups/${backupId}`, { headers: { authorization: `Bearer ${owner.apiKey}` } })
    ).text();
    expect(list).toContain(sealed.encryptedMetadata);
  });

  it('signing out ends the operator session server-side', async () => {
    const op = await operator();
    expect((await send('DELETE', '/admin/api/session', { cookie: op.cookie, csrf: op.csrf })).status).toBe(204);
    expect((await send('GET', '/admin/api/overview', { cookie: op.cookie })).status).toBe(401);
  });
});
