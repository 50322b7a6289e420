/**
 * The state the fuzzer plays against: three accounts on one real server with a clock that stands still, so
 * nothing changes unless a request changes it. A snapshot of everything a request could touch (accounts,
 * vaults, keys, every backup record of the world's accounts including tombstones, their blob files, temp
 * files and multipart leftovers) lets a test prove that a refused request changed nothing.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { envelope, finalizeBody } from '../helpers/api.js';
import type { ManualClock } from '../helpers/clock.js';
import { Conformance, conformantApi } from '../helpers/conformance.js';
import { type Fixture, bytes, createSlot, upload } from '../helpers/fixture.js';
import { startTestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Like useServer(), with the data directory in memory (/dev/shm) when the machine has one: the fuzzer is about
 * what the API answers, not about durability, and thousands of fsyncs would be most of its run time.
 */
export function useFuzzServer(clock: ManualClock, env: Record<string, string> = {}): Fixture {
  const fixture = {} as Fixture;
  beforeAll(async () => {
    const dataDir = tempDir('coffer-fuzz-', fs.existsSync('/dev/shm') ? '/dev/shm' : undefined);
    fixture.server = await startTestServer({ clock, dataDir, env });
    fixture.conformance = await Conformance.load(fixture.server.url);
    fixture.client = (apiKey) => conformantApi(fixture.server.url, fixture.conformance, apiKey);
  });
  afterAll(async () => {
    await fixture.server?.stop();
  });
  return fixture;
}

export const KEY_KINDS = ['all', 'read', 'write', 'restore', 'revoked', 'expired'] as const;
export type KeyKind = (typeof KEY_KINDS)[number];
export const ACTORS = ['a', 'b', 'c', 'd', 'e'] as const;
export type ActorName = (typeof ACTORS)[number];

export interface Actor {
  accountId: string;
  keys: Record<KeyKind, string>;
  scopes: Record<KeyKind, string[]>;
}

/**
 * a: vault, two READY backups, a tombstone (DELETED) and a PENDING_UPLOAD slot.
 * b: vault, one READY backup and an UPLOADED slot of UPLOADED_SIZE bytes (finalize can succeed).
 * c: no vault, no backups (bootstrap creates; create is vault_not_initialized).
 * d: vault and a READY backup created just now (create is backup_cadence_exceeded).
 * e: vault, no backups (create succeeds; reset succeeds without deleteBackups).
 */
export const ID_NAMES = ['aReady1', 'aReady2', 'aDeleted', 'aPending', 'bReady', 'bUploaded', 'dReady'] as const;
export type IdName = (typeof ID_NAMES)[number];
export const SIZES: Record<IdName, number> = {
  aReady1: 300,
  aReady2: 4096,
  aDeleted: 0,
  aPending: 0,
  bReady: 1000,
  bUploaded: 777,
  dReady: 1,
};
export const UPLOADED_SIZE = SIZES.bUploaded;

/** Which of the ids each actor may see: visible ones (docs/api-rules.md#statuses) of its own account. */
export const VISIBLE: Record<ActorName, IdName[]> = {
  a: ['aReady1', 'aReady2', 'aPending'],
  b: ['bReady', 'bUploaded'],
  c: [],
  d: ['dReady'],
  e: [],
};

export interface World {
  actors: Record<ActorName, Actor>;
  ids: Record<IdName, string>;
  generation: number;
}

const MINUTES_31 = 31 * 60_000;

let generation = 0;

/** Builds a fresh world (new accounts) through the real API; the clock moves only here. */
export async function buildWorld(fx: Fixture, clock: ManualClock): Promise<World> {
  clock.advance(MINUTES_31);
  const actor = async (vault: boolean): Promise<Actor> => {
    const all = await fx.server.newKey({ plan: 'pro' });
    const accountId = all.accountId;
    const issue = async (scopes?: ('backups:read' | 'backups:write' | 'backups:restore')[], expiresInMs?: number) =>
      fx.server.newKey({ accountId, scopes, expiresInMs });
    const read = await issue(['backups:read']);
    const write = await issue(['backups:write']);
    const restore = await issue(['backups:restore']);
    const revoked = await issue();
    await fx.server.parts.stores.keys.revokeApiKey(revoked.keyId, clock.now());
    const expired = await issue(undefined, 1000);
    if (vault) {
      const response = await fx.client(all.apiKey)('POST', '/api/backup-account/bootstrap', { json: envelope() });
      if (response.status !== 200) throw new Error(`bootstrap: ${response.text}`);
    }
    const allScopes = ['backups:read', 'backups:write', 'backups:restore'];
    return {
      accountId,
      keys: {
        all: all.apiKey,
        read: read.apiKey,
        write: write.apiKey,
        restore: restore.apiKey,
        revoked: revoked.apiKey,
        expired: expired.apiKey,
      },
      scopes: { all: allScopes, read: ['backups:read'], write: ['backups:write'], restore: ['backups:restore'], revoked: [], expired: [] },
    };
  };
  const a = await actor(true);
  const b = await actor(true);
  const c = await actor(false);
  const d = await actor(true);
  const e = await actor(true);
  const callA = fx.client(a.keys.all);
  const callB = fx.client(b.keys.all);

  const ready = async (call: ReturnType<Fixture['client']>, size: number, advance = true) => {
    const id = await createSlot(call);
    const uploaded = await upload(call, id, bytes(size, size & 0xff));
    if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.text}`);
    const finalized = await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(size) });
    if (finalized.status !== 200) throw new Error(`finalize: ${finalized.text}`);
    if (advance) clock.advance(MINUTES_31);
    return id;
  };
  const aReady1 = await ready(callA, SIZES.aReady1);
  const aReady2 = await ready(callA, SIZES.aReady2);
  const aDeleted = await createSlot(callA);
  if ((await callA('DELETE', `/api/backups/${aDeleted}`)).status !== 200) throw new Error('delete failed');
  const aPending = await createSlot(callA);
  const bReady = await ready(callB, SIZES.bReady);
  const bUploaded = await createSlot(callB);
  if ((await upload(callB, bUploaded, bytes(UPLOADED_SIZE, 3))).status !== 201) throw new Error('upload failed');
  // The expired keys expire now; nothing else is due (slots expire an hour after this point).
  clock.advance(2000);
  const dReady = await ready(fx.client(d.keys.all), SIZES.dReady, false);
  generation += 1;
  return { actors: { a, b, c, d, e }, ids: { aReady1, aReady2, aDeleted, aPending, bReady, bUploaded, dReady }, generation };
}

function files(root: string): Record<string, number> {
  if (!fs.existsSync(root)) return {};
  const out: Record<string, number> = {};
  for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath, entry.name);
    if (entry.isFile()) out[path.relative(root, full)] = fs.statSync(full).size;
  }
  return out;
}

/** Everything of the world a request could change, as plain data. */
export async function snapshot(fx: Fixture, world: World) {
  const { stores } = fx.server.parts;
  const dataDir = fx.server.dataDir;
  const accounts: Record<string, unknown> = {};
  for (const name of ACTORS) {
    const { accountId } = world.actors[name];
    accounts[name] = {
      account: await stores.accounts.getAccount(accountId),
      vault: (await stores.vaults.getVault(accountId)) ?? null,
      keys: await stores.keys.listApiKeys(accountId),
      backups: await stores.backups.listBackups(accountId, ['PENDING_UPLOAD', 'UPLOADED', 'READY', 'FAILED', 'DELETING', 'DELETED']),
      blobs: files(path.join(dataDir, 'blobs', 'backups', accountId)),
    };
  }
  return { accounts, tmp: files(path.join(dataDir, 'tmp')), uploads: files(path.join(dataDir, 'uploads')) };
}
