/**
 * `coffer rekey` through the real CLI and a real server on loopback (docs/crypto.md §1b): a new master key in front
 * of the keyring. Older backups (wrapped with the master key, and sealed to the old recipient) still restore; a new
 * backup uses the new key, which the vault envelope saved before the rekey cannot open even with the passphrase of
 * that time; hosts still sealing to the old recipient keep working.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IntegrityError, masterKeys, unwrapDek, unwrapMasterKey, wipe } from '../../src/client/envelope.js';
import { CofferClient, type BackupAccountBody } from '../../src/client/sdk.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, makeTree, snapshot } from './helpers.js';

const PASSPHRASE = 'rekey-test passphrase';

describe('coffer rekey: a new master key from now on, every older backup still readable', () => {
  let server: TestServer;
  let clock: ManualClock;
  let client: CofferClient;
  let work: string;
  let source: string;
  let owner: ReturnType<typeof cliFor>;
  let host: ReturnType<typeof cliFor>;
  let oldRecipient: string;
  let oldFingerprint: string;
  let oldEnvelope: BackupAccountBody;
  let wrappedBefore: string;
  let sealedBefore: string;

  const nextSlotAllowed = () => clock.advance(31 * 60 * 1000); // pro plan: one backup per 30 minutes

  async function backup(cli: ReturnType<typeof cliFor>, env: Record<string, string> = {}) {
    const detail = json(await cli(['backup', source, '--json'], env));
    nextSlotAllowed();
    return detail.id as string;
  }

  let restores = 0;
  async function expectRestores(id: string) {
    const target = path.join(work, `restored-${(restores += 1)}`);
    const result = await owner(['restore', id, target]);
    expect(result.code, result.stderr).toBe(0);
    expect(await snapshot(target)).toEqual(await snapshot(source));
  }

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    const { apiKey } = await server.newKey({ plan: 'pro' });
    client = new CofferClient({ baseUrl: server.url, apiKey });
    work = tempDir('coffer-rekey-');
    source = path.join(work, 'source');
    await makeTree(source);
    owner = cliFor(server.url, apiKey, PASSPHRASE);
    host = cliFor(server.url, apiKey, undefined);
    expect((await owner(['init'])).code).toBe(0);
    ({ recipient: oldRecipient, fingerprint: oldFingerprint } = json(await owner(['recipient', '--json'])));
    wrappedBefore = await backup(owner);
    sealedBefore = await backup(host, { COFFER_RECIPIENT: oldRecipient });
    // What someone who kept a copy of the vault envelope holds (a database backup, a leaked account response).
    oldEnvelope = await client.getAccount();
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('rekeys: prints the new fingerprint and tells the user to give hosts the new recipient', async () => {
    const result = await owner(['rekey']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/keyring now holds 2 keys/);
    const fresh = /new recipient fingerprint (\S+) \(was (\S+)\)/.exec(result.stdout);
    expect(fresh?.[2]).toBe(oldFingerprint);
    expect(fresh?.[1]).not.toBe(oldFingerprint);
    expect(result.stderr).toMatch(/coffer recipient/);
    expect(result.stderr).toContain(`hosts still sealing to ${oldFingerprint} keep working`);

    const account = await client.getAccount();
    expect(account.wrappedMasterKey).not.toBe(oldEnvelope.wrappedMasterKey);
    expect(account.kdf!.salt).not.toBe(oldEnvelope.kdf!.salt); // same passphrase, new salt
    // 16-byte tag + "ckr1" + count + 2 keys.
    expect(Buffer.from(account.wrappedMasterKey!, 'base64').length).toBe(16 + 5 + 2 * 32);
    const material = await unwrapMasterKey(account, PASSPHRASE);
    try {
      const keys = masterKeys(material);
      expect(keys.length).toBe(2);
      const legacy = await unwrapMasterKey(oldEnvelope, PASSPHRASE);
      expect(Buffer.from(keys[1]!).equals(legacy)).toBe(true); // the old key stays, behind the new one
      wipe(legacy);
    } finally {
      wipe(material);
    }
  });

  it('`coffer recipient` now prints a new recipient', async () => {
    const { recipient, fingerprint } = json(await owner(['recipient', '--json']));
    expect(recipient).not.toBe(oldRecipient);
    expect(fingerprint).not.toBe(oldFingerprint);
  });

  it('backups made before the rekey restore: the master-wrapped one and the one sealed to the old recipient', async () => {
    await expectRestores(wrappedBefore);
    await expectRestores(sealedBefore);
  });

  it('a new backup uses the new key: the old envelope with the old passphrase cannot open its data key', async () => {
    const id = await backup(owner);
    await expectRestores(id);
    const detail = await client.getBackup(id);
    const oldKey = await unwrapMasterKey(oldEnvelope, PASSPHRASE);
    try {
      expect(() => unwrapDek(oldKey, id, detail)).toThrow(IntegrityError);
      // The same key still opens the backup made before the rekey: the check above is not vacuous.
      wipe(unwrapDek(oldKey, wrappedBefore, await client.getBackup(wrappedBefore)));
    } finally {
      wipe(oldKey);
    }
  });

  it('a new backup sealed to the new recipient: the old key cannot open it either', async () => {
    const { recipient, fingerprint } = json(await owner(['recipient', '--json']));
    const id = await backup(host, { COFFER_RECIPIENT: recipient });
    await expectRestores(id);
    const detail = await client.getBackup(id);
    const oldKey = await unwrapMasterKey(oldEnvelope, PASSPHRASE);
    try {
      expect(() => unwrapDek(oldKey, id, detail)).toThrow(new RegExp(`sealed to another recipient ${fingerprint}`));
    } finally {
      wipe(oldKey);
    }
  });

  it('a host still sealing to the old recipient after the rekey keeps working: its backup restores', async () => {
    const id = await backup(host, { COFFER_RECIPIENT: oldRecipient });
    await expectRestores(id);
  });

  it('a second rekey keeps all three keys, and everything still restores', async () => {
    const result = await owner(['rekey', '--json']);
    expect(json(result)).toMatchObject({ rotated: true, keys: 3, previousFingerprint: expect.any(String) });
    await expectRestores(wrappedBefore);
    await expectRestores(sealedBefore);
  });

  it('a wrong passphrase rekeys nothing (exit 4)', async () => {
    const before = await client.getAccount();
    const result = await owner(['rekey'], { COFFER_PASSPHRASE: 'not it' });
    expect(result.code).toBe(4);
    expect(await client.getAccount()).toEqual(before);
  });
});
