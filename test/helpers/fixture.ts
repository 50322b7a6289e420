/** One real server per test file plus helpers that drive the API into a given state. */
import { afterAll, beforeAll } from 'vitest';
import type { Plan } from '../../src/domain/plans.js';
import type { Scope } from '../../src/domain/scopes.js';
import { envelope, finalizeBody } from './api.js';
import { Conformance, conformantApi } from './conformance.js';
import { createTestSchema, requirePg, type TestSchema } from './pg.js';
import { type TestServer, type TestServerOptions, startTestServer } from './server.js';

export type Call = ReturnType<typeof conformantApi>;

export interface Fixture {
  server: TestServer;
  conformance: Conformance;
  /** A conformance-checked client with the given key (or none). */
  client(apiKey?: string): Call;
  /** A new account with a key; `vault` bootstraps it. */
  account(options?: { plan?: Plan; scopes?: Scope[]; vault?: boolean }): Promise<{ call: Call; apiKey: string; accountId: string }>;
}

/** `postgres`: the server's database is PostgreSQL (a schema of its own, dropped after); skip the file with skipPg. */
export function useServer(options: TestServerOptions & { postgres?: boolean } = {}): Fixture {
  const fixture = {} as Fixture;
  let schema: TestSchema | undefined;
  beforeAll(async () => {
    const { postgres, ...serverOptions } = options;
    if (postgres) {
      requirePg();
      schema = await createTestSchema('coffer_fixture');
      serverOptions.env = { ...serverOptions.env, COFFER_DATABASE_URL: schema.url };
    }
    fixture.server = await startTestServer(serverOptions);
    fixture.conformance = await Conformance.load(fixture.server.url);
    fixture.client = (apiKey) => conformantApi(fixture.server.url, fixture.conformance, apiKey);
    fixture.account = async ({ plan = 'pro', scopes, vault = true } = {}) => {
      const { apiKey, accountId } = await fixture.server.newKey({ plan, scopes });
      const call = fixture.client(apiKey);
      if (vault) {
        const admin = fixture.client((await fixture.server.newKey({ accountId })).apiKey);
        const response = await admin('POST', '/api/backup-account/bootstrap', { json: envelope() });
        if (response.status !== 200) throw new Error(`bootstrap failed: ${response.text}`);
      }
      return { call, apiKey, accountId };
    };
  });
  afterAll(async () => {
    await fixture.server?.stop();
    await schema?.drop();
  });
  return fixture;
}

export const bytes = (size: number, seed = 7) => {
  const buffer = Buffer.alloc(size);
  for (let i = 0; i < size; i++) buffer[i] = (i * 31 + seed) & 0xff;
  return buffer;
};

export async function createSlot(call: Call): Promise<string> {
  const response = await call('POST', '/api/backups');
  if (response.status !== 201) throw new Error(`create failed: ${response.status} ${response.text}`);
  return response.body.backupId;
}

export async function upload(call: Call, backupId: string, body: Buffer) {
  return call('POST', `/api/backups/upload?backupId=${backupId}`, {
    body: new Uint8Array(body),
    headers: { 'content-type': 'application/octet-stream' },
  });
}

/** create → upload → finalize; returns the id and the uploaded bytes. */
export async function readyBackup(call: Call, size = 1000, seed = 7): Promise<{ id: string; data: Buffer }> {
  const id = await createSlot(call);
  const data = bytes(size, seed);
  const uploaded = await upload(call, id, data);
  if (uploaded.status !== 201) throw new Error(`upload failed: ${uploaded.text}`);
  const finalized = await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(size) });
  if (finalized.status !== 200) throw new Error(`finalize failed: ${finalized.text}`);
  return { id, data };
}
