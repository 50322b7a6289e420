/** docs/api-rules.md#scopes: the scope matrix for every operation, credentials, and cross-account isolation. */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Scope } from '../../src/domain/scopes.js';
import { openSqliteDatabase } from '../../src/store/sqlite-driver.js';
import { type ApiResponse, envelope, finalizeBody } from '../helpers/api.js';
import { type Call, bytes, createSlot, readyBackup, upload, useServer } from '../helpers/fixture.js';

const fx = useServer();

interface Operation {
  name: string;
  needs: Scope;
  /** Issues the request; `id` is a READY backup of the caller's account. */
  send(call: Call, id: string): Promise<ApiResponse<any>>;
}

const octet = { 'content-type': 'application/octet-stream' };

const OPERATIONS: Operation[] = [
  { name: 'GET /api/backup-account', needs: 'backups:read', send: (c) => c('GET', '/api/backup-account') },
  { name: 'PATCH /api/backup-account', needs: 'backups:write', send: (c) => c('PATCH', '/api/backup-account', { json: {} }) },
  { name: 'bootstrap', needs: 'backups:write', send: (c) => c('POST', '/api/backup-account/bootstrap', { json: envelope() }) },
  { name: 'rotate', needs: 'backups:write', send: (c) => c('POST', '/api/backup-account/rotate', { json: envelope() }) },
  { name: 'reset', needs: 'backups:write', send: (c) => c('POST', '/api/backup-account/reset', { json: {} }) },
  { name: 'GET /api/backups', needs: 'backups:read', send: (c) => c('GET', '/api/backups') },
  { name: 'POST /api/backups', needs: 'backups:write', send: (c) => c('POST', '/api/backups') },
  {
    name: 'upload',
    needs: 'backups:write',
    send: (c, id) => c('POST', `/api/backups/upload?backupId=${id}`, { body: 'x', headers: octet }),
  },
  { name: 'GET /api/backups/{id}', needs: 'backups:read', send: (c, id) => c('GET', `/api/backups/${id}`) },
  { name: 'DELETE /api/backups/{id}', needs: 'backups:write', send: (c, id) => c('DELETE', `/api/backups/${id}`) },
  {
    name: 'finalize',
    needs: 'backups:write',
    send: (c, id) => c('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(1) }),
  },
  { name: 'content', needs: 'backups:restore', send: (c, id) => c('GET', `/api/backups/${id}/content`) },
  { name: 'events', needs: 'backups:read', send: (c, id) => c('GET', `/api/backups/${id}/events`) },
];

const SCOPE_KEYS: Scope[] = ['backups:read', 'backups:write', 'backups:restore'];

describe('scope matrix', () => {
  const keys = {} as Record<Scope, Call>;
  let id: string;

  beforeAll(async () => {
    const owner = await fx.account();
    ({ id } = await readyBackup(owner.call));
    for (const scope of SCOPE_KEYS) {
      keys[scope] = fx.client((await fx.server.newKey({ accountId: owner.accountId, scopes: [scope] })).apiKey);
    }
  });

  for (const operation of OPERATIONS) {
    for (const scope of SCOPE_KEYS) {
      const allowed = scope === operation.needs;
      it(`${operation.name} with only ${scope}: ${allowed ? 'passes the scope check' : '403 insufficient_scope'}`, async () => {
        const response = await operation.send(keys[scope], id);
        if (allowed) {
          expect([401, 403]).not.toContain(response.status);
        } else {
          expect(response.status).toBe(403);
          expect(response.body).toMatchObject({
            code: 'insufficient_scope',
            details: { requiredPermission: operation.needs },
          });
        }
      });
    }
  }
});

describe('credentials', () => {
  let id: string;
  let apiKey: string;
  let accountId: string;
  beforeAll(async () => {
    const owner = await fx.account();
    ({ apiKey, accountId } = owner);
    id = await createSlot(owner.call);
  });

  it('accepts the key as Bearer or as x-api-key', async () => {
    const viaHeader = await fx.client()('GET', `/api/backups/${id}`, { headers: { 'x-api-key': apiKey } });
    expect(viaHeader.status).toBe(200);
    expect((await fx.client(apiKey)('GET', `/api/backups/${id}`)).status).toBe(200);
  });

  it.each([
    ['no credential', {}],
    ['an unknown key', { authorization: 'Bearer cfk_' + 'A'.repeat(43) }],
    ['a malformed key', { 'x-api-key': 'hello' }],
    ['a non-Bearer scheme', { authorization: 'Basic dXNlcjpwYXNz' }],
  ])('answers 401 authentication_required for every operation with %s', async (_name, headers) => {
    for (const operation of OPERATIONS) {
      const call = ((method: string, path: string, options: { headers?: Record<string, string> } = {}) =>
        fx.client()(method, path, { ...options, headers: { ...options.headers, ...headers } })) as Call;
      const response = await operation.send(call, id);
      expect(response.status, operation.name).toBe(401);
      expect(response.body.code).toBe('authentication_required');
    }
  });

  it('answers 401 when the two headers carry different keys', async () => {
    const other = await fx.server.newKey({ accountId });
    const response = await fx.client(apiKey)('GET', '/api/backups', { headers: { 'x-api-key': other.apiKey } });
    expect(response.status).toBe(401);
  });

  it('refuses revoked and expired keys', async () => {
    const revoked = await fx.server.newKey({ accountId });
    await fx.server.parts.stores.keys.revokeApiKey(revoked.keyId, Date.now());
    expect((await fx.client(revoked.apiKey)('GET', '/api/backups')).status).toBe(401);
    const expiring = await fx.server.newKey({ accountId, expiresInMs: 1 });
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await fx.client(expiring.apiKey)('GET', '/api/backups')).status).toBe(401);
  });

  it('stores only a hash of each key', async () => {
    const issued = await fx.server.newKey({ accountId });
    const db = await openSqliteDatabase(`${fx.server.dataDir}/coffer.sqlite`, { readonly: true });
    const rows = db.prepare('select * from api_keys').all([]);
    db.close();
    expect(JSON.stringify(rows)).not.toContain(issued.apiKey);
    expect(JSON.stringify(rows)).not.toContain(issued.apiKey.slice(4));
  });
});

describe('cross-account isolation', () => {
  it("answers 404 for every id-bearing route on another account's backup, and changes nothing", async () => {
    const owner = await fx.account();
    const { id, data } = await readyBackup(owner.call, 64);
    const pending = await fx.account();
    const slot = await createSlot(pending.call);
    const intruder = await fx.account();

    for (const path of [`/api/backups/${id}`, `/api/backups/${id}/content`, `/api/backups/${id}/events`]) {
      const response = await intruder.call('GET', path);
      expect(response.status, path).toBe(404);
      expect(response.body.code).toBe('backup_not_found');
    }
    expect((await intruder.call('DELETE', `/api/backups/${id}`)).status).toBe(404);
    expect((await intruder.call('POST', `/api/backups/${slot}/finalize`, { json: finalizeBody(1) })).status).toBe(404);
    const foreignUpload = await upload(intruder.call, slot, bytes(1));
    expect(foreignUpload.status).toBe(400);
    expect(foreignUpload.body.details.issues[0].path).toBe('backupId');
    expect((await intruder.call('GET', '/api/backups')).body.backups).toEqual([]);

    expect((await owner.call('GET', `/api/backups/${id}`)).body.status).toBe('READY');
    expect((await pending.call('GET', `/api/backups/${slot}`)).body.status).toBe('PENDING_UPLOAD');
    const content = await owner.call('GET', `/api/backups/${id}/content`);
    expect(content.raw.equals(data)).toBe(true);
  });
});
