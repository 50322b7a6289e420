/**
 * A hostile or broken server: the stored ciphertext, sizes, wrapped keys and metadata are altered behind the
 * client's back, and hostile archives (made with the real key) try to write outside the target. Every
 * restore must fail loudly with exit code 4 and write nothing.
 */
import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHUNK_BYTES, STREAM_ABYTES, STREAM_HEADER_BYTES, wipe } from '../../src/client/envelope.js';
import { CofferClient } from '../../src/client/sdk.js';
import { unlockVault } from '../../src/client/vault.js';
import type { Backup } from '../../src/domain/entities.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, exists, json, tarArchive, uploadArchive, type TarEntrySpec } from './helpers.js';

const PASSPHRASE = 'tamper-test passphrase';
const FRAME = CHUNK_BYTES + STREAM_ABYTES;

describe('restore refuses altered backups and hostile archives (exit 4, nothing written)', () => {
  let server: TestServer;
  let clock: ManualClock;
  let work: string;
  let cli: ReturnType<typeof cliFor>;
  let client: CofferClient;
  let a: Backup;
  let b: Backup;

  const blobFile = (backup: Backup) => path.join(server.dataDir, 'blobs', backup.blobKey!);
  const nextSlotAllowed = () => clock.advance(31 * 60 * 1000); // pro plan: one backup per 30 minutes

  async function backupOf(dir: string): Promise<Backup> {
    const detail = json(await cli(['backup', dir, '--json']));
    nextSlotAllowed();
    return (await server.parts.stores.backups.getBackup(detail.id))!;
  }

  /** Restores into a fresh target, expecting an integrity failure that leaves no trace. */
  async function expectRefused(id: string, pattern: RegExp) {
    const target = path.join(work, `target-${randomBytes(4).toString('hex')}`);
    const result = await cli(['restore', id, target]);
    expect(result.code, result.stderr).toBe(4);
    expect(result.stderr).toMatch(/integrity check failed/);
    expect(result.stderr).toMatch(pattern);
    expect(exists(target)).toBe(false);
    return result;
  }

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    const { apiKey } = await server.newKey({ plan: 'pro' });
    work = tempDir('coffer-tamper-');
    cli = cliFor(server.url, apiKey, PASSPHRASE);
    client = new CofferClient({ baseUrl: server.url, apiKey });
    expect((await cli(['init'])).code).toBe(0);
    for (const name of ['a', 'b']) {
      const dir = path.join(work, `source-${name}`);
      await fsp.mkdir(dir, { recursive: true });
      await fsp.writeFile(path.join(dir, 'random.bin'), randomBytes(3 * CHUNK_BYTES + 1000)); // 4+ chunks
      await fsp.writeFile(path.join(dir, 'note.txt'), `backup ${name}\n`);
    }
    a = await backupOf(path.join(work, 'source-a'));
    b = await backupOf(path.join(work, 'source-b'));
    expect(a.ciphertextSizeBytes).toBeGreaterThan(STREAM_HEADER_BYTES + 3 * FRAME);
  });

  afterAll(async () => {
    await server?.stop();
  });

  /** Runs `work` with the blob and record of `a` altered, then puts them back. */
  async function withAltered(alter: (bytes: Buffer) => Buffer, patch: Partial<Backup>, check: () => Promise<unknown>) {
    const original = await fsp.readFile(blobFile(a));
    const altered = alter(Buffer.from(original));
    await fsp.writeFile(blobFile(a), altered);
    await server.parts.stores.backups.updateBackup(a.id, { statuses: ['READY'] }, { ciphertextSizeBytes: altered.length, ...patch });
    try {
      await check();
    } finally {
      await fsp.writeFile(blobFile(a), original);
      await server.parts.stores.backups.updateBackup(
        a.id,
        { statuses: ['READY'] },
        {
          ciphertextSizeBytes: a.ciphertextSizeBytes,
          wrappedDek: a.wrappedDek,
          wrappedDekNonce: a.wrappedDekNonce,
          encryptedMetadata: a.encryptedMetadata,
          encryptedMetadataNonce: a.encryptedMetadataNonce,
        },
      );
    }
  }

  const flip = (offset: number) => (bytes: Buffer) => {
    bytes[offset]! ^= 0x40;
    return bytes;
  };

  it('restores the untouched backup (control)', async () => {
    const target = path.join(work, 'control');
    expect((await cli(['restore', a.id, target])).code).toBe(0);
    expect(await fsp.readFile(path.join(target, 'note.txt'), 'utf8')).toBe('backup a\n');
  });

  it('a flipped ciphertext byte in a middle chunk', () =>
    withAltered(flip(STREAM_HEADER_BYTES + FRAME + 1234), {}, () => expectRefused(a.id, /chunk 1 failed authentication/)));

  it('a flipped byte in the stream header', () => withAltered(flip(5), {}, () => expectRefused(a.id, /chunk 0 failed authentication/)));

  it('a truncated archive: the final chunk dropped (sizes made consistent by the server)', () =>
    withAltered(
      (bytes) => bytes.subarray(0, STREAM_HEADER_BYTES + 3 * FRAME),
      {},
      () => expectRefused(a.id, /truncated \(final chunk missing\)/),
    ));

  it('a truncated archive: cut inside the final chunk', () =>
    withAltered(
      (bytes) => bytes.subarray(0, bytes.length - 100),
      {},
      () => expectRefused(a.id, /failed authentication/),
    ));

  it('data appended after the final chunk', () =>
    withAltered(
      (bytes) => Buffer.concat([bytes, randomBytes(FRAME)]),
      {},
      () => expectRefused(a.id, /failed authentication|after its final chunk/),
    ));

  it('a wrappedDek swapped in from another backup', () =>
    withAltered(
      (bytes) => bytes,
      { wrappedDek: b.wrappedDek, wrappedDekNonce: b.wrappedDekNonce },
      () => expectRefused(a.id, /data key does not belong to this backup/),
    ));

  it('a whole archive swapped in from another backup (with its own size)', async () => {
    const other = await fsp.readFile(blobFile(b));
    await withAltered(
      () => other,
      {},
      () => expectRefused(a.id, /failed authentication/),
    );
  });

  it('altered metadata', () => {
    const sealed = Buffer.from(a.encryptedMetadata!, 'base64');
    sealed[10]! ^= 0x01;
    return withAltered(
      (bytes) => bytes,
      { encryptedMetadata: sealed.toString('base64') },
      () => expectRefused(a.id, /metadata was altered/),
    );
  });

  // ---- hostile archives, sealed with the right keys: authentic but unsafe ----

  /** Uploads a hand-made tar as a READY backup, sealed with the right keys. */
  async function uploadHostile(entries: TarEntrySpec[]): Promise<string> {
    const { masterKey } = await unlockVault(client, PASSPHRASE);
    try {
      return await uploadArchive(client, masterKey, tarArchive(entries));
    } finally {
      wipe(masterKey);
      nextSlotAllowed();
    }
  }

  it('refuses an archive with ../ entries', async () => {
    const id = await uploadHostile([
      { path: 'fine.txt', body: 'ok' },
      { path: '../escaped.txt', body: 'pwned' },
    ]);
    await expectRefused(id, /leaves the target directory/);
    expect(exists(path.join(work, 'escaped.txt'))).toBe(false);
  });

  it('refuses an archive with an absolute path', async () => {
    const outside = path.join(work, 'absolute-escape.txt');
    const id = await uploadHostile([{ path: outside, body: 'pwned' }]);
    await expectRefused(id, /absolute path/);
    expect(exists(outside)).toBe(false);
  });

  it('refuses an archive that writes through its own symlink', async () => {
    const outsideDir = path.join(work, 'outside-dir');
    await fsp.mkdir(outsideDir);
    const id = await uploadHostile([
      { path: 'jump', type: 'SymbolicLink', linkpath: outsideDir },
      { path: 'jump/pwned.txt', body: 'pwned' },
    ]);
    await expectRefused(id, /through a symlink/);
    expect(await fsp.readdir(outsideDir)).toEqual([]);
  });

  it('refuses a hard link to a file outside the target', async () => {
    const id = await uploadHostile([{ path: 'passwd', type: 'Link', linkpath: '../../../../etc/passwd' }]);
    await expectRefused(id, /hard link target leaves the target directory/);
  });
});
