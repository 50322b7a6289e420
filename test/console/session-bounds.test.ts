/**
 * What a console session may do and how much it may cost, over real HTTP on a real port with a test clock:
 * a key minted in a session never outlives or out-scopes the credential the session was opened with; ended
 * sessions and login links are pruned by the sweeper (SQLite and PostgreSQL); sign-in attempts are limited per
 * client address.
 */
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { csrfTokenFor } from '../../src/services/sessions.js';
import { ManualClock } from '../helpers/clock.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/** One HTTP request, optionally from another loopback address (127.0.0.2 is a different client to the server). */
function call(
  server: TestServer,
  method: string,
  path: string,
  options: { cookie?: string; csrf?: string; json?: unknown; from?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { origin: server.url };
  if (options.cookie) headers.cookie = options.cookie;
  if (options.csrf) headers['x-csrf-token'] = options.csrf;
  const body = options.json === undefined ? undefined : JSON.stringify(options.json);
  if (body !== undefined) headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const request = http.request(new URL(path, server.url), { method, headers, localAddress: options.from, agent: false }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (text += chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode!, headers: response.headers, body: text ? JSON.parse(text) : undefined }),
      );
    });
    request.on('error', reject);
    request.end(body);
  });
}

interface SignedIn {
  cookie: string;
  csrf: string;
  secret: string;
  setCookie: string;
  body: any;
}

async function signIn(server: TestServer, body: Record<string, string>): Promise<SignedIn> {
  const answer = await call(server, 'POST', '/console/api/session', { json: body });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  const setCookie = String(answer.headers['set-cookie']);
  const cookie = setCookie.split(';')[0]!;
  return { cookie, secret: cookie.split('=')[1]!, csrf: answer.body.csrfToken, setCookie, body: answer.body };
}

const linkFor = async (server: TestServer, accountId: string) => (await server.parts.sessions.createLoginLink(accountId))!.token;
const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');
const iso = (ms: number) => new Date(ms).toISOString();
const HOUR = 3_600_000;

describe('keys minted in a console session', () => {
  const clock = new ManualClock();
  let server: TestServer;
  let accountId: string;

  beforeAll(async () => {
    server = await startTestServer({ clock });
    ({ accountId } = await server.newKey());
  });
  afterAll(() => server?.stop());

  it('never outlive the key the session was opened with (asking for no expiry gets that key’s expiry)', async () => {
    const signing = await server.newKey({ accountId, expiresInMs: 60_000 });
    const signingExpiresAt = clock.now() + 60_000;
    const session = await signIn(server, { apiKey: signing.apiKey });
    // The session itself ends with its key, cookie included.
    expect(session.body.expiresAt).toBe(iso(signingExpiresAt));
    expect(session.setCookie).toContain('Max-Age=60;');

    const forever = await call(server, 'POST', '/console/api/keys', {
      ...session,
      json: { scopes: ['backups:read', 'backups:write', 'backups:restore'], expiresInDays: null },
    });
    expect(forever.status, JSON.stringify(forever.body)).toBe(201);
    expect(forever.body).toMatchObject({ expiresAt: iso(signingExpiresAt), expiryCapped: true, status: 'active' });
    const week = await call(server, 'POST', '/console/api/keys', { ...session, json: { scopes: ['backups:read'], expiresInDays: 7 } });
    expect(week.body).toMatchObject({ expiresAt: iso(signingExpiresAt), expiryCapped: true });

    const listed = await call(server, 'GET', '/console/api/keys', session);
    const byId = new Map(listed.body.keys.map((key: any) => [key.keyId, key]));
    expect(byId.get(forever.body.keyId)).toMatchObject({ expiresAt: iso(signingExpiresAt), status: 'active' });
    expect(byId.get(week.body.keyId)).toMatchObject({ expiresAt: iso(signingExpiresAt), status: 'active' });
    const minted = forever.body.apiKey as string;
    expect((await fetch(`${server.url}/api/backups`, { headers: { 'x-api-key': minted } })).status).toBe(200);

    // When the signing key expires, the session and every key it minted stop working together.
    clock.advance(60_000);
    expect((await fetch(`${server.url}/api/backups`, { headers: { 'x-api-key': minted } })).status).toBe(401);
    expect((await call(server, 'GET', '/console/api/keys', session)).status).toBe(401);
    const owner = await signIn(server, { loginToken: await linkFor(server, accountId) });
    const later = await call(server, 'GET', '/console/api/keys', owner);
    expect(later.body.keys.find((key: any) => key.keyId === forever.body.keyId)).toMatchObject({ status: 'expired' });
  });

  it('a session opened with a login link is the owner: its keys may be permanent', async () => {
    const owner = await signIn(server, { loginToken: await linkFor(server, accountId) });
    const created = await call(server, 'POST', '/console/api/keys', { ...owner, json: { scopes: ['backups:read'], expiresInDays: null } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ expiresAt: null, expiryCapped: false });
  });

  it('never hold a scope the session’s key lacks: refused with 403 insufficient_scope, nothing created', async () => {
    // Sign-in accepts only all-scope keys; a session bound to a narrower key (as an older server or a future
    // sign-in rule could leave) must still not widen it. The session row is written as sign-in would.
    const narrow = await server.newKey({ accountId, scopes: ['backups:read'] });
    const secret = `cfs_${randomBytes(32).toString('base64url')}`;
    const now = clock.now();
    await server.parts.stores.sessions.createSession(
      { id: uuidv7(), accountId, keyId: narrow.keyId, createdAt: now, expiresAt: now + HOUR, revokedAt: null, freshAt: now },
      sha256(secret),
    );
    const session = { cookie: `coffer_session=${secret}`, csrf: csrfTokenFor(secret) };
    const before = (await server.parts.stores.keys.listApiKeys(accountId)).length;

    const wider = await call(server, 'POST', '/console/api/keys', {
      ...session,
      json: { scopes: ['backups:read', 'backups:write'], expiresInDays: 7 },
    });
    expect(wider.status).toBe(403);
    expect(wider.body).toMatchObject({ code: 'insufficient_scope', details: { requiredPermission: 'backups:write' } });
    expect(wider.body.message).toContain('backups:write');
    expect((await server.parts.stores.keys.listApiKeys(accountId)).length).toBe(before);

    const within = await call(server, 'POST', '/console/api/keys', { ...session, json: { scopes: ['backups:read'], expiresInDays: 7 } });
    expect(within.status).toBe(201);
    expect(within.body.scopes).toEqual(['backups:read']);
  });

  it('a revoked signing key ends its session: it can no longer mint keys', async () => {
    const signing = await server.newKey({ accountId });
    const session = await signIn(server, { apiKey: signing.apiKey });
    const revoke = await call(server, 'DELETE', `/console/api/keys/${signing.keyId}`, session);
    expect(revoke.body).toMatchObject({ status: 'revoked', usedByThisSession: true });
    const minted = await call(server, 'POST', '/console/api/keys', { ...session, json: { scopes: ['backups:read'], expiresInDays: null } });
    expect(minted.status).toBe(401);
    expect((await call(server, 'GET', '/console/api/session', session)).status).toBe(401);
  });
});

const engines = [
  { name: 'sqlite', skip: false },
  { name: 'postgres', skip: skipPg },
];

describe('a key minted in a console session, while the clock moves', () => {
  // Every read of this clock is a millisecond later: a key must still last exactly what was asked.
  const clock = new ManualClock();
  const ticking = { now: () => (clock.advance(1), clock.now()) };
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ clock: ticking });
  });
  afterAll(() => server?.stop());

  it('lasts exactly the days asked for, counted from its creation', async () => {
    const { accountId } = await server.newKey();
    const owner = await signIn(server, { loginToken: await linkFor(server, accountId) });
    const created = await call(server, 'POST', '/console/api/keys', { ...owner, json: { scopes: ['backups:read'], expiresInDays: 7 } });
    expect(created.status).toBe(201);
    const listed = await call(server, 'GET', '/console/api/keys', owner);
    const key = listed.body.keys.find((entry: any) => entry.keyId === created.body.keyId);
    expect(Date.parse(key.expiresAt) - Date.parse(key.createdAt)).toBe(7 * 24 * HOUR);
  });
});

describe.each(engines)('the sweeper prunes ended console sessions and login links ($name)', ({ name, skip }) => {
  const clock = new ManualClock();
  let server: TestServer;
  let schema: TestSchema | undefined;

  beforeAll(async () => {
    if (skip) return;
    const env: Record<string, string> = { COFFER_SIGNIN_ATTEMPTS: '1000' };
    if (name === 'postgres') {
      requirePg();
      schema = await createTestSchema('coffer_sessions');
      env.COFFER_DATABASE_URL = schema.url;
    }
    server = await startTestServer({ clock, env });
  });
  afterAll(async () => {
    await server?.stop();
    await schema?.drop();
  });

  it.skipIf(skip)('signed-out, used, revoked-key and expired rows go on the next sweep; live sessions stay', async () => {
    const { stores } = server.parts;
    const owner = await server.newKey();
    const live = await signIn(server, { loginToken: await linkFor(server, owner.accountId) });
    const many: SignedIn[] = [];
    for (let i = 0; i < 60; i++) many.push(await signIn(server, { apiKey: owner.apiKey }));
    const doomedKey = await server.newKey({ accountId: owner.accountId });
    const ofDoomedKey = await signIn(server, { apiKey: doomedKey.apiKey });
    const signedOut = many.slice(0, 20);
    for (const session of signedOut) expect((await call(server, 'DELETE', '/console/api/session', session)).status).toBe(204);
    await stores.keys.revokeApiKey(doomedKey.keyId, clock.now());
    const unused = await server.parts.sessions.createLoginLink(owner.accountId);
    const exists = async (session: SignedIn) => (await stores.sessions.findSessionByHash(sha256(session.secret))) !== undefined;

    clock.advance(1);
    await server.sweepOnce();
    for (const session of [...signedOut, ofDoomedKey]) expect(await exists(session)).toBe(false);
    for (const session of [live, ...many.slice(20)]) expect(await exists(session)).toBe(true);
    expect((await call(server, 'GET', '/console/api/session', live)).status).toBe(200);
    // An unused link stays until it expires.
    expect(await stores.sessions.consumeLoginLink(sha256(unused!.token), clock.now())).toBeDefined();

    clock.advance(12 * HOUR);
    await server.sweepOnce();
    for (const session of [live, ...many]) expect(await exists(session)).toBe(false);
  });
});

describe('sign-in attempts are limited per client address', () => {
  const clock = new ManualClock();
  let server: TestServer;
  let accountId: string;
  let apiKey: string;

  beforeAll(async () => {
    server = await startTestServer({ clock, env: { COFFER_SIGNIN_ATTEMPTS: '3', COFFER_SIGNIN_WINDOW: '5m' } });
    ({ accountId, apiKey } = await server.newKey());
  });
  afterAll(() => server?.stop());
  afterEach(() => clock.advance(5 * 60_000)); // a fresh window for the next case

  it('the attempt over the limit gets 429 with Retry-After and no session; another address is unaffected', async () => {
    const attempt = (body: unknown, from?: string) => call(server, 'POST', '/console/api/session', { json: body, from });
    // Successes, failures and malformed requests all count.
    expect((await attempt({ apiKey })).status).toBe(200);
    expect((await attempt({ apiKey: `cfk_${'x'.repeat(43)}` })).status).toBe(401);
    expect((await attempt({ loginToken: await linkFor(server, accountId), apiKey })).status).toBe(400);

    const refused = await attempt({ loginToken: await linkFor(server, accountId) });
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('300');
    expect(refused.headers['set-cookie']).toBeUndefined();
    expect(refused.body).toMatchObject({
      code: 'too_many_sign_in_attempts',
      message: 'Too many sign-in attempts from this address. Try again in 5 minutes.',
      details: { retryAfterSeconds: 300 },
      resolution: expect.stringContaining('Retry-After'),
    });
    clock.advance(4 * 60_000);
    expect((await attempt({ apiKey })).headers['retry-after']).toBe('60');

    expect((await attempt({ apiKey }, '127.0.0.2')).status).toBe(200);
  });

  it('an address may sign in again once the window has passed', async () => {
    for (let i = 0; i < 3; i++) expect((await call(server, 'POST', '/console/api/session', { json: { apiKey } })).status).toBe(200);
    expect((await call(server, 'POST', '/console/api/session', { json: { apiKey } })).status).toBe(429);
    clock.advance(5 * 60_000);
    expect((await call(server, 'POST', '/console/api/session', { json: { apiKey } })).status).toBe(200);
  });
});
