/**
 * A malformed sealed field is an integrity failure (docs/crypto.md §2b, "A reader tells the forms apart"; issue 35,
 * point 4): a `cxw1` data key of any length but 1,180 bytes, a data key of any other length or form without a
 * newer form's magic, and any nonce or metadata box of the wrong size or form make the reader throw IntegrityError
 * (exit 4), never another error. The parser is property-tested; the CLI is run against a server that hands out such
 * a key and nonce (the record altered in its store, as a hostile server would serve it).
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  IntegrityError,
  NewerFormatError,
  newKey,
  openMetadata,
  sealDek,
  SEALED_DEK_BYTES,
  deriveRecipient,
  unwrapDek,
  wrapDek,
} from '../../src/client/envelope.js';
import type { Backup } from '../../src/domain/entities.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, exists, json } from './helpers.js';

const ID = '0190a8b1-6a8e-7c3e-9d2f-1b2c3d4e5f60';
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const MAGIC = Buffer.from('cxw1');

/** Throws exactly an IntegrityError (a NewerFormatError, exit 1, only where the rule says so). */
function integrityFailure(run: () => unknown): boolean {
  try {
    run();
  } catch (error) {
    return error instanceof IntegrityError && !(error instanceof NewerFormatError);
  }
  return false;
}

describe('the sealed-field reader (property)', () => {
  const master = newKey();
  const dek = newKey();
  const valid = { wrapped: wrapDek(master, ID, dek), sealed: sealDek(deriveRecipient(master), ID, dek) };

  it('opens the two valid forms (control)', () => {
    expect(Buffer.from(unwrapDek(master, ID, valid.wrapped)).equals(Buffer.from(dek))).toBe(true);
    expect(Buffer.from(unwrapDek(master, ID, valid.sealed)).equals(Buffer.from(dek))).toBe(true);
  });

  it('"cxw1" followed by anything of another total length than 1,180 bytes: IntegrityError', () => {
    const sealed = Buffer.from(valid.sealed.wrappedDek, 'base64');
    fc.assert(
      fc.property(fc.integer({ min: 4, max: 3000 }), fc.boolean(), (length, fromReal) => {
        fc.pre(length !== SEALED_DEK_BYTES);
        // Either the real sealed key cut or padded to that length, or "cxw1" and random bytes.
        const body = fromReal
          ? Buffer.concat([sealed, Buffer.alloc(Math.max(0, length - sealed.length))]).subarray(0, length)
          : Buffer.concat([MAGIC, Buffer.from(fc.sample(fc.uint8Array({ minLength: length - 4, maxLength: length - 4 }), 1)[0]!)]);
        return integrityFailure(() => unwrapDek(master, ID, { wrappedDek: b64(body), wrappedDekNonce: valid.sealed.wrappedDekNonce }));
      }),
    );
    // The length the issue found (1,179 bytes), by name.
    const short = sealed.subarray(0, SEALED_DEK_BYTES - 1);
    expect(integrityFailure(() => unwrapDek(master, ID, { wrappedDek: b64(short), wrappedDekNonce: valid.sealed.wrappedDekNonce }))).toBe(
      true,
    );
  });

  it('any other bytes: IntegrityError, or NewerFormatError exactly for three lower-case letters and a digit other than cxw1', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2048 }), (bytes) => {
        const text = Buffer.from(bytes.subarray(0, 4)).toString('latin1');
        const newer = bytes.length >= 4 && /^[a-z]{3}[0-9]$/.test(text) && text !== 'cxw1';
        try {
          unwrapDek(master, ID, { wrappedDek: b64(bytes), wrappedDekNonce: valid.wrapped.wrappedDekNonce });
        } catch (error) {
          return newer ? error instanceof NewerFormatError : error instanceof IntegrityError && !(error instanceof NewerFormatError);
        }
        return false;
      }),
    );
  });

  it('a nonce of any other length, or a field that is not strict base64: IntegrityError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 100 }), fc.constantFrom('wrapped', 'sealed'), (nonce, form) => {
        fc.pre(nonce.length !== 24);
        return integrityFailure(() => unwrapDek(master, ID, { ...valid[form as 'wrapped' | 'sealed'], wrappedDekNonce: b64(nonce) }));
      }),
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), fc.constantFrom('wrappedDek', 'wrappedDekNonce'), (text, field) => {
        fc.pre(!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(text) || text === '');
        return integrityFailure(() => unwrapDek(master, ID, { ...valid.sealed, [field]: text }));
      }),
    );
    for (const missing of [null, undefined]) {
      expect(integrityFailure(() => unwrapDek(master, ID, { ...valid.sealed, wrappedDek: missing as unknown as null }))).toBe(true);
    }
  });

  it('sealed metadata of any length or form: IntegrityError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.uint8Array({ maxLength: 40 }), (box, nonce) =>
        integrityFailure(() => openMetadata(dek, ID, { encryptedMetadata: b64(box), encryptedMetadataNonce: b64(nonce) })),
      ),
    );
  });
});

describe('the CLI against a server that hands out a malformed sealed key', { timeout: 300_000 }, () => {
  let server: TestServer;
  let work: string;
  let owner: ReturnType<typeof cliFor>;
  let backup: Backup;
  let kit: string;
  let clock: ManualClock;

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    const { apiKey } = await server.newKey({ plan: 'pro' });
    work = tempDir('coffer-sealed-fields-');
    const source = path.join(work, 'source');
    await fsp.mkdir(source);
    await fsp.writeFile(path.join(source, 'a.txt'), 'sealed fields\n');
    owner = cliFor(server.url, apiKey, 'sealed fields passphrase');
    expect((await owner(['init'])).code).toBe(0);
    const { recipient } = json<{ recipient: string }>(await owner(['recipient', '--json']));
    const { id } = json<{ id: string }>(await owner(['backup', source, '--json', '--recipient', recipient]));
    backup = (await server.parts.stores.backups.getBackup(id))!;
    // A second, sound backup: `recover` then counts one the kit opens and one it cannot.
    clock.advance(31 * 60 * 1000);
    expect((await owner(['backup', source])).code).toBe(0);
    kit = path.join(work, 'kit.txt');
    expect((await owner(['kit', '--output', kit])).code).toBe(0);
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
  });

  const sealed = () => Buffer.from(backup.wrappedDek!, 'base64');
  it.each([
    ['a cxw1 key of 1,179 bytes', () => ({ wrappedDek: b64(sealed().subarray(0, SEALED_DEK_BYTES - 1)) })],
    ['a cxw1 key of 1,181 bytes', () => ({ wrappedDek: b64(Buffer.concat([sealed(), Buffer.from([0])])) })],
    ['a cxw1 key of 12 bytes', () => ({ wrappedDek: b64(sealed().subarray(0, 12)) })],
    ['a 47-byte key', () => ({ wrappedDek: b64(Buffer.alloc(47, 7)) })],
    ['a nonce of 23 bytes', () => ({ wrappedDekNonce: b64(Buffer.alloc(23, 1)) })],
  ])(
    '%s: show, ls, restore, verify, list --chain and recover fail as an integrity check (exit 4), nothing written',
    async (_name, patch) => {
      await server.parts.stores.backups.updateBackup(backup.id, { statuses: ['READY'] }, patch());
      try {
        for (const args of [
          ['show', backup.id, '--metadata'],
          ['ls', backup.id],
          ['restore', backup.id, path.join(work, 'target')],
          ['restore', backup.id, path.join(work, 'target'), '--kit-file', kit],
          ['verify', backup.id],
          ['verify', '--all'],
          ['list', '--chain'],
          // The kit opens the sound backup and not this one: an altered key, not "a rekey after the kit" (exit 1).
          ['recover', '--kit-file', kit],
        ]) {
          const result = await owner(args, { COFFER_NEW_PASSPHRASE: 'sealed fields passphrase' });
          expect(result.code, `${args[0]}: ${result.stderr}`).toBe(4);
          expect(result.stderr).toMatch(/integrity check failed|1 backup failed verification/);
          expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
        }
        expect(exists(path.join(work, 'target'))).toBe(false);
      } finally {
        await server.parts.stores.backups.updateBackup(
          backup.id,
          { statuses: ['READY'] },
          { wrappedDek: backup.wrappedDek, wrappedDekNonce: backup.wrappedDekNonce },
        );
      }
    },
  );
});
