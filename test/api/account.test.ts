import { describe, expect, it } from 'vitest';
import { envelope } from '../helpers/api.js';
import { readyBackup, useServer } from '../helpers/fixture.js';

const fx = useServer();

describe('GET /api/backup-account', () => {
  it('reports an uninitialized vault and the plan interval', async () => {
    const { call } = await fx.account({ plan: 'plus', vault: false });
    const response = await call('GET', '/api/backup-account');
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      initialized: false,
      backupInterval: '4h',
      cryptoVersion: null,
      kdf: null,
      wrappedMasterKey: null,
      wrappedMasterKeyNonce: null,
    });
  });
});

describe('bootstrap', () => {
  it('stores the envelope once; a second bootstrap changes nothing', async () => {
    const { call } = await fx.account({ vault: false });
    const first = await call('POST', '/api/backup-account/bootstrap', { json: envelope(1) });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ initialized: true, created: true, ...envelope(1) });
    const second = await call('POST', '/api/backup-account/bootstrap', { json: envelope(2) });
    expect(second.status).toBe(200);
    expect(second.body.created).toBe(false);
    expect(second.body.wrappedMasterKey).toBe(envelope(1).wrappedMasterKey);
    const read = await call('GET', '/api/backup-account');
    expect(read.body).toMatchObject({ initialized: true, backupInterval: '30m', kdf: envelope(1).kdf });
  });

  it.each([
    ['wrong cryptoVersion', { ...envelope(), cryptoVersion: 'v2' }, 'cryptoVersion'],
    ['invalid base64', { ...envelope(), wrappedMasterKey: 'not base64!' }, 'wrappedMasterKey'],
    ['salt too short', { ...envelope(), kdf: { ...envelope().kdf, salt: Buffer.alloc(4).toString('base64') } }, 'kdf.salt'],
    ['salt of 7 bytes', { ...envelope(), kdf: { ...envelope().kdf, salt: Buffer.alloc(7).toString('base64') } }, 'kdf.salt'],
    ['wrapped key over 4,096 bytes', { ...envelope(), wrappedMasterKey: Buffer.alloc(4097).toString('base64') }, 'wrappedMasterKey'],
    ['opslimit zero', { ...envelope(), kdf: { ...envelope().kdf, opslimit: 0 } }, 'kdf.opslimit'],
    ['memlimit as string', { ...envelope(), kdf: { ...envelope().kdf, memlimit: '64' } }, 'kdf.memlimit'],
    ['unknown property', { ...envelope(), extra: 1 }, 'extra'],
    ['missing nonce', (({ wrappedMasterKeyNonce: _, ...rest }) => rest)(envelope()), 'wrappedMasterKeyNonce'],
  ])('refuses %s with 400 validation_failed and changes nothing', async (_name, body, path) => {
    const { call } = await fx.account({ vault: false });
    const response = await call('POST', '/api/backup-account/bootstrap', { json: body });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('validation_failed');
    expect(response.body.details.issues.map((i: { path: string }) => i.path)).toContain(path);
    expect((await call('GET', '/api/backup-account')).body.initialized).toBe(false);
  });

  it('accepts a wrapped master key of exactly 4,096 bytes (room for larger key material)', async () => {
    const { call } = await fx.account({ vault: false });
    const body = { ...envelope(), wrappedMasterKey: Buffer.alloc(4096, 7).toString('base64') };
    const response = await call('POST', '/api/backup-account/bootstrap', { json: body });
    expect(response.status).toBe(200);
    expect((await call('GET', '/api/backup-account')).body.wrappedMasterKey).toBe(body.wrappedMasterKey);
  });

  it('answers malformed JSON with 400 invalid_json, a missing body with 400 validation_failed', async () => {
    const { call } = await fx.account({ vault: false });
    const malformed = await call('POST', '/api/backup-account/bootstrap', {
      body: '{"cryptoVersion": ',
      headers: { 'content-type': 'application/json' },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body.code).toBe('invalid_json');
    const empty = await call('POST', '/api/backup-account/bootstrap', { headers: { 'content-type': 'application/json' } });
    expect(empty.status).toBe(400);
    expect(empty.body.code).toBe('validation_failed');
  });

  it('refuses a JSON body over 256 KiB and a non-JSON body with 400 (415 is not declared here)', async () => {
    const { call } = await fx.account({ vault: false });
    const huge = await call('POST', '/api/backup-account/bootstrap', {
      json: { ...envelope(), padding: 'x'.repeat(300 * 1024) },
    });
    expect(huge.status).toBe(400);
    expect(huge.body.code).toBe('validation_failed');
    const wrongType = await call('POST', '/api/backup-account/bootstrap', {
      body: 'cryptoVersion=v1',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.code).toBe('validation_failed');
  });
});

describe('rotate', () => {
  it('needs a vault (409 vault_not_initialized)', async () => {
    const { call } = await fx.account({ vault: false });
    const response = await call('POST', '/api/backup-account/rotate', { json: envelope() });
    expect(response.status).toBe(409);
    expect(response.body.code).toBe('vault_not_initialized');
  });

  it('replaces the material', async () => {
    const { call } = await fx.account();
    const response = await call('POST', '/api/backup-account/rotate', { json: envelope(9) });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ rotated: true, initialized: true, ...envelope(9) });
    expect((await call('GET', '/api/backup-account')).body.wrappedMasterKey).toBe(envelope(9).wrappedMasterKey);
  });

  it('validates like bootstrap and changes nothing on refusal', async () => {
    const { call } = await fx.account();
    const response = await call('POST', '/api/backup-account/rotate', { json: { ...envelope(9), cryptoVersion: 'v0' } });
    expect(response.status).toBe(400);
    expect((await call('GET', '/api/backup-account')).body.wrappedMasterKey).toBe(envelope().wrappedMasterKey);
  });
});

describe('reset', () => {
  it('with no body deletes the material of an empty account', async () => {
    const { call } = await fx.account();
    const response = await call('POST', '/api/backup-account/reset');
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ reset: true, accountDeleted: true, deletedBackups: 0 });
    expect((await call('GET', '/api/backup-account')).body.initialized).toBe(false);
    const again = await call('POST', '/api/backup-account/reset', { json: {} });
    expect(again.body).toEqual({ reset: true, accountDeleted: false, deletedBackups: 0 });
  });

  it('refuses with 409 vault_not_empty while backups remain, then deletes them with deleteBackups', async () => {
    const { call } = await fx.account();
    const { id } = await readyBackup(call);
    const refused = await call('POST', '/api/backup-account/reset', { json: { deleteBackups: false } });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'vault_not_empty', details: { remainingBackups: 1 } });
    expect((await call('GET', `/api/backups/${id}`)).status).toBe(200);

    const done = await call('POST', '/api/backup-account/reset', { json: { deleteBackups: true } });
    expect(done.body).toEqual({ reset: true, accountDeleted: true, deletedBackups: 1 });
    expect((await call('GET', `/api/backups/${id}`)).status).toBe(404);
    expect((await call('GET', '/api/backups')).body.backups).toEqual([]);
  });

  it('keeps the cadence clock across reset', async () => {
    const { call } = await fx.account({ plan: 'free' });
    await readyBackup(call);
    await call('POST', '/api/backup-account/reset', { json: { deleteBackups: true } });
    await call('POST', '/api/backup-account/bootstrap', { json: envelope() });
    const response = await call('POST', '/api/backups');
    expect(response.status).toBe(429);
  });

  it('rejects a non-boolean deleteBackups', async () => {
    const { call } = await fx.account();
    const response = await call('POST', '/api/backup-account/reset', { json: { deleteBackups: 'yes' } });
    expect(response.status).toBe(400);
    expect(response.body.details.issues[0].path).toBe('deleteBackups');
  });
});

describe('PATCH /api/backup-account', () => {
  it('is reserved: 405 method_not_allowed with Allow: GET', async () => {
    const { call } = await fx.account();
    const response = await call('PATCH', '/api/backup-account', { json: { backupInterval: '30m' } });
    expect(response.status).toBe(405);
    expect(response.body.code).toBe('method_not_allowed');
    expect(response.headers.get('allow')).toBe('GET');
  });
});
