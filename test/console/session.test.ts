/**
 * Console sessions over plain HTTP: one-time login links (used once, refused after expiry, printed by the real
 * `coffer admin login-link`), cookie attributes (httpOnly, SameSite=Strict, Secure and named __Host-coffer_session only on an https public URL),
 * the session as the API's third credential with an owner's scopes, CSRF protection on every state change made
 * with it, login CSRF, sign-in with an all-scope API key, sign-out and key revocation ending sessions server-side,
 * and key management scoped to the account.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { json, runCli } from '../client/helpers.js';

interface SignedIn {
  cookie: string;
  csrf: string;
  setCookie: string;
}

function request(
  server: TestServer,
  method: string,
  path: string,
  options: { cookie?: string; headers?: Record<string, string>; json?: unknown } = {},
) {
  const headers: Record<string, string> = { ...options.headers };
  if (options.cookie) headers.cookie = options.cookie;
  if (options.json !== undefined) headers['content-type'] = 'application/json';
  return fetch(`${server.url}${path}`, { method, headers, body: options.json === undefined ? undefined : JSON.stringify(options.json) });
}

async function signIn(server: TestServer, body: Record<string, string>, headers: Record<string, string> = {}): Promise<SignedIn> {
  const response = await request(server, 'POST', '/console/api/session', { json: body, headers: { origin: server.url, ...headers } });
  expect(response.status, await response.clone().text()).toBe(200);
  const setCookie = response.headers.get('set-cookie')!;
  const cookie = setCookie.split(';')[0]!;
  const { csrfToken } = (await response.json()) as { csrfToken: string };
  return { cookie, csrf: csrfToken, setCookie };
}

async function linkFor(server: TestServer, accountId: string, ttlMs?: number): Promise<string> {
  return (await server.parts.sessions.createLoginLink(accountId, ttlMs))!.token;
}

describe('console sessions (http public URL)', () => {
  let server: TestServer;
  let accountId: string;
  let ownerKey: string;

  beforeAll(async () => {
    server = await startTestServer();
    ({ accountId, apiKey: ownerKey } = await server.newKey({ plan: 'plus' }));
  });
  afterAll(() => server?.stop());

  it('`coffer admin login-link` prints a one-time link; it opens a session once, then is refused', async () => {
    const result = await runCli(['admin', 'login-link', accountId, '--json', '--expires-in', '5m'], {
      COFFER_DATA_DIR: server.dataDir,
      COFFER_PUBLIC_URL: 'https://backup.example.test',
    });
    const printed = json(result);
    expect(printed.url).toMatch(/^https:\/\/backup\.example\.test\/console\/login#token=cfl_[A-Za-z0-9_-]{43}$/);
    const minutes = (Date.parse(printed.expiresAt) - Date.now()) / 60_000;
    expect(minutes).toBeGreaterThan(4);
    expect(minutes).toBeLessThanOrEqual(5);
    const token = new URL(printed.url).hash.replace('#token=', '');

    const first = await signIn(server, { loginToken: token });
    expect(first.setCookie).toMatch(/^coffer_session=cfs_[A-Za-z0-9_-]{43}; Path=\/; Max-Age=43200; HttpOnly; SameSite=Strict$/);
    const again = await request(server, 'POST', '/console/api/session', { json: { loginToken: token }, headers: { origin: server.url } });
    expect(again.status).toBe(401);
    expect(await again.json()).toMatchObject({ code: 'login_link_invalid', resolution: expect.stringContaining('login-link') });
    expect(again.headers.get('set-cookie')).toBeNull();

    const unknown = await runCli(['admin', 'login-link', '01a20000-0000-7000-8000-000000000000'], { COFFER_DATA_DIR: server.dataDir });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no account/);
    const tooLong = await runCli(['admin', 'login-link', accountId, '--expires-in', '2d'], { COFFER_DATA_DIR: server.dataDir });
    expect(tooLong.code).toBe(2);
  });

  it('refuses an expired link, a malformed one, and concurrent uses beyond the first', async () => {
    const expired = await linkFor(server, accountId, 1);
    await new Promise((resolve) => setTimeout(resolve, 10));
    const late = await request(server, 'POST', '/console/api/session', { json: { loginToken: expired }, headers: { origin: server.url } });
    expect(late.status).toBe(401);
    expect((await late.json()).code).toBe('login_link_invalid');
    const malformed = await request(server, 'POST', '/console/api/session', {
      json: { loginToken: 'cfl_short' },
      headers: { origin: server.url },
    });
    expect(malformed.status).toBe(401);

    const token = await linkFor(server, accountId);
    const statuses = await Promise.all(
      Array.from({ length: 5 }, () =>
        request(server, 'POST', '/console/api/session', { json: { loginToken: token }, headers: { origin: server.url } }).then(
          (r) => r.status,
        ),
      ),
    );
    expect(statuses.sort()).toEqual([200, 401, 401, 401, 401]);
  });

  it('the session is a third credential for every API operation, with all three scopes', async () => {
    const { cookie, csrf } = await signIn(server, { loginToken: await linkFor(server, accountId) });
    const same = { origin: server.url, 'x-csrf-token': csrf };
    expect((await request(server, 'GET', '/api/backup-account', { cookie })).status).toBe(200); // backups:read
    const bootstrap = await request(server, 'POST', '/api/backup-account/bootstrap', { cookie, headers: same, json: envelope() });
    expect(bootstrap.status).toBe(200); // backups:write
    const created = await request(server, 'POST', '/api/backups', { cookie, headers: same });
    expect(created.status).toBe(201);
    const { backupId } = (await created.json()) as { backupId: string };
    const upload = await fetch(`${server.url}/api/backups/upload?backupId=${backupId}`, {
      method: 'POST',
      headers: { cookie, ...same, 'content-type': 'application/octet-stream' },
      body: new Uint8Array(100),
    });
    expect(upload.status).toBe(201);
    expect((await request(server, 'GET', `/api/backups/${backupId}/content`, { cookie })).status).toBe(404); // restore scope: passes 403
    expect((await request(server, 'DELETE', `/api/backups/${backupId}`, { cookie, headers: same })).status).toBe(200);
    // No cookie, a wrong one, or an API key header that is invalid (it is not overridden by a valid cookie): 401.
    expect((await request(server, 'GET', '/api/backups')).status).toBe(401);
    expect((await request(server, 'GET', '/api/backups', { cookie: 'coffer_session=cfs_nope' })).status).toBe(401);
    expect((await request(server, 'GET', '/api/backups', { cookie, headers: { 'x-api-key': 'cfk_wrong' } })).status).toBe(401);
    // A valid API key header wins over the cookie (and needs no CSRF token).
    expect((await request(server, 'GET', '/api/backups', { cookie, headers: { authorization: `Bearer ${ownerKey}` } })).status).toBe(200);
  });

  it('refuses state changes made with the session without the CSRF token or from another origin', async () => {
    const { cookie, csrf } = await signIn(server, { loginToken: await linkFor(server, accountId) });
    const refused = async (method: string, path: string, headers: Record<string, string>, body?: unknown) => {
      const response = await request(server, method, path, { cookie, headers, json: body });
      expect(response.status, `${method} ${path} ${JSON.stringify(headers)}`).toBe(403);
      expect((await response.json()).code).toBe('csrf_token_invalid');
    };
    const evil = 'https://evil.example';
    for (const [method, path, body] of [
      ['POST', '/api/backups', undefined],
      ['POST', '/api/backup-account/reset', {}],
      ['PATCH', '/api/backup-account', undefined],
      ['DELETE', '/api/backups/01a20000-0000-7000-8000-000000000000', undefined],
      ['POST', '/console/api/keys', { scopes: ['backups:read'], expiresInDays: null }],
      ['DELETE', '/console/api/session', undefined],
    ] as const) {
      await refused(method, path, { origin: server.url }, body); // no token
      await refused(method, path, { origin: server.url, 'x-csrf-token': 'x'.repeat(43) }, body); // wrong token
      await refused(method, path, { origin: evil, 'x-csrf-token': csrf }, body); // right token, cross-origin
      await refused(method, path, { 'sec-fetch-site': 'cross-site', 'x-csrf-token': csrf }, body);
    }
    // Another session's token does not fit this one.
    const other = await signIn(server, { loginToken: await linkFor(server, accountId) });
    await refused('POST', '/api/backups', { origin: server.url, 'x-csrf-token': other.csrf });
    // Reads need no token; the session still works after all those refusals.
    expect((await request(server, 'GET', '/api/backups', { cookie })).status).toBe(200);
    const session = await request(server, 'GET', '/console/api/session', { cookie });
    expect(await session.json()).toMatchObject({ accountId, plan: 'plus', signedInWith: 'login-link', csrfToken: csrf });
    // A refused sign-in from another origin (login CSRF) sets no cookie.
    const login = await request(server, 'POST', '/console/api/session', {
      json: { loginToken: await linkFor(server, accountId) },
      headers: { origin: evil },
    });
    expect(login.status).toBe(403);
    expect(login.headers.get('set-cookie')).toBeNull();
  });

  it('signs in with an API key only when it holds all three scopes; revoking that key ends the session', async () => {
    const readOnly = await server.newKey({ accountId, scopes: ['backups:read', 'backups:restore'] });
    const partial = await request(server, 'POST', '/console/api/session', {
      json: { apiKey: readOnly.apiKey },
      headers: { origin: server.url },
    });
    expect(partial.status).toBe(403);
    expect(await partial.json()).toMatchObject({ code: 'insufficient_scope', details: { requiredPermission: 'backups:write' } });
    const unknown = await request(server, 'POST', '/console/api/session', {
      json: { apiKey: `cfk_${'x'.repeat(43)}` },
      headers: { origin: server.url },
    });
    expect(unknown.status).toBe(401);
    const both = await request(server, 'POST', '/console/api/session', {
      json: { apiKey: ownerKey, loginToken: 'x' },
      headers: { origin: server.url },
    });
    expect(both.status).toBe(400);

    const owner = await server.newKey({ accountId });
    const { cookie } = await signIn(server, { apiKey: owner.apiKey });
    expect(await (await request(server, 'GET', '/console/api/session', { cookie })).json()).toMatchObject({
      signedInWith: 'api-key',
      keyId: owner.keyId,
    });
    await server.parts.stores.keys.revokeApiKey(owner.keyId, Date.now());
    expect((await request(server, 'GET', '/api/backups', { cookie })).status).toBe(401);
  });

  it('sign-out ends the session on the server and clears the cookie', async () => {
    const { cookie, csrf } = await signIn(server, { loginToken: await linkFor(server, accountId) });
    const out = await request(server, 'DELETE', '/console/api/session', { cookie, headers: { origin: server.url, 'x-csrf-token': csrf } });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toBe('coffer_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict');
    expect((await request(server, 'GET', '/api/backups', { cookie })).status).toBe(401);
    expect((await request(server, 'GET', '/console/api/session', { cookie })).status).toBe(401);
  });

  it('manages API keys of its own account only: create (shown once), list (no secrets), revoke', async () => {
    const { cookie, csrf } = await signIn(server, { loginToken: await linkFor(server, accountId) });
    const headers = { origin: server.url, 'x-csrf-token': csrf };
    const invalid = await request(server, 'POST', '/console/api/keys', { cookie, headers, json: { scopes: [], expiresInDays: 7 } });
    expect(invalid.status).toBe(400);
    const bad = await request(server, 'POST', '/console/api/keys', {
      cookie,
      headers,
      json: { scopes: ['backups:admin'], expiresInDays: 7 },
    });
    expect(bad.status).toBe(400);

    const created = await request(server, 'POST', '/console/api/keys', {
      cookie,
      headers,
      json: { scopes: ['backups:restore', 'backups:read'], expiresInDays: 30 },
    });
    expect(created.status).toBe(201);
    const key = (await created.json()) as { keyId: string; apiKey: string; scopes: string[]; expiresAt: string; status: string };
    expect(key).toMatchObject({ scopes: ['backups:read', 'backups:restore'], status: 'active' });
    expect(key.apiKey).toMatch(/^cfk_[A-Za-z0-9_-]{43}$/);
    expect(Math.round((Date.parse(key.expiresAt) - Date.now()) / 86_400_000)).toBe(30);
    expect((await request(server, 'GET', '/api/backups', { headers: { 'x-api-key': key.apiKey } })).status).toBe(200);

    const listText = await (await request(server, 'GET', '/console/api/keys', { cookie })).text();
    expect(listText).not.toContain(key.apiKey);
    expect(listText).not.toContain('hash');
    const list = JSON.parse(listText) as { keys: { keyId: string }[] };
    expect(list.keys[0]!.keyId).toBe(key.keyId); // newest first

    const stranger = await server.newKey();
    const foreign = await request(server, 'DELETE', `/console/api/keys/${stranger.keyId}`, { cookie, headers });
    expect(foreign.status).toBe(404);
    expect((await request(server, 'GET', '/api/backups', { headers: { 'x-api-key': stranger.apiKey } })).status).toBe(200);

    const revoked = await request(server, 'DELETE', `/console/api/keys/${key.keyId}`, { cookie, headers });
    expect(revoked.status).toBe(200);
    expect(await revoked.json()).toMatchObject({ keyId: key.keyId, status: 'revoked' });
    expect((await request(server, 'GET', '/api/backups', { headers: { 'x-api-key': key.apiKey } })).status).toBe(401);
    // The console endpoints take the session only, never an API key.
    expect((await request(server, 'GET', '/console/api/keys', { headers: { authorization: `Bearer ${ownerKey}` } })).status).toBe(401);
  });

  it('serves the page with a strict CSP, client-side routes, and 404 for unknown console API paths', async () => {
    const page = await request(server, 'GET', '/console/backups/whatever');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self' 'wasm-unsafe-eval'");
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    const html = await page.text();
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const asset = await request(server, 'GET', script);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect((await request(server, 'GET', script, { headers: { 'if-none-match': asset.headers.get('etag')! } })).status).toBe(304);
    expect((await request(server, 'GET', '/console/api/nope')).status).toBe(404);
    expect((await request(server, 'GET', '/console/assets/nope.js')).status).toBe(404);
    const about = (await (await request(server, 'GET', '/console/api/about')).json()) as { cli: { url: string; sha256: string } };
    expect(about.cli.url).toBe(`${server.url}/downloads/coffer-cli.tgz`);
    expect(about.cli.sha256).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('console sessions (https public URL)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { COFFER_PUBLIC_URL: 'https://backup.example.test' } });
  });
  afterAll(() => server?.stop());

  it('marks the cookie Secure, and accepts state changes from the public origin', async () => {
    const { accountId } = await server.newKey();
    const token = (await server.parts.sessions.createLoginLink(accountId))!.token;
    const response = await request(server, 'POST', '/console/api/session', {
      json: { loginToken: token },
      headers: { origin: 'https://backup.example.test' },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('set-cookie')).toMatch(
      /^__Host-coffer_session=cfs_[A-Za-z0-9_-]{43}; Path=\/; Max-Age=43200; HttpOnly; SameSite=Strict; Secure$/,
    );
    const cookie = response.headers.get('set-cookie')!.split(';')[0]!;
    const { csrfToken } = (await response.json()) as { csrfToken: string };
    const out = await request(server, 'DELETE', '/console/api/session', {
      cookie,
      headers: { origin: 'https://backup.example.test', 'x-csrf-token': csrfToken },
    });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toMatch(/Max-Age=0; HttpOnly; SameSite=Strict; Secure$/);
  });
});
