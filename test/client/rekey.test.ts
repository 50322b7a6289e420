/**
 * `coffer rekey` through the real CLI and a real server on loopback (docs/crypto.md §1b): a new master key in front
 * of the keyring. Older backups (wrapped with the master key, and sealed to the old recipient) still restore; a new
 * backup uses the new key, which the vault envelope saved before the rekey cannot open even with the passphrase of
 * that time; hosts still sealing to the old recipient keep working.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buffer } from 'node:stream/consumers';
import sodium from 'sodium-native';
import {
  AD,
  deriveKek,
  IntegrityError,
  KEYRING,
  masterKeys,
  newKdfParams,
  SEALED_DEK_BYTES,
  unwrapDek,
  unwrapMasterKey,
  wipe,
} from '../../src/client/envelope.js';
import { CofferClient, type BackupAccountBody } from '../../src/client/sdk.js';
import { type Cli, cliFor, json, listenHttp, snapshot, startCli, startVault, type VaultFixture } from './helpers.js';

const PASSPHRASE = 'rekey-test passphrase';

describe('coffer rekey: a new master key from now on, every older backup still readable', () => {
  let vault: VaultFixture;
  let client: CofferClient;
  let work: string;
  let source: string;
  let owner: Cli;
  let host: Cli;
  let oldRecipient: string;
  let oldFingerprint: string;
  let oldEnvelope: BackupAccountBody;
  let wrappedBefore: string;
  let sealedBefore: string;

  const backup = (cli: Cli, env: Record<string, string> = {}) => vault.backup(cli, env);

  let restores = 0;
  async function expectRestores(id: string) {
    const target = path.join(work, `restored-${(restores += 1)}`);
    const result = await owner(['restore', id, target]);
    expect(result.code, result.stderr).toBe(0);
    expect(await snapshot(target)).toEqual(await snapshot(source));
  }

  beforeAll(async () => {
    vault = await startVault('coffer-rekey-', PASSPHRASE);
    ({ client, work, source, owner, host } = vault);
    ({ recipient: oldRecipient, fingerprint: oldFingerprint } = json(await owner(['recipient', '--json'])));
    wrappedBefore = await backup(owner);
    sealedBefore = await backup(host, { COFFER_RECIPIENT: oldRecipient });
    // What someone who kept a copy of the vault envelope holds (a database backup, a leaked account response).
    oldEnvelope = await client.getAccount();
  });

  afterAll(async () => {
    await vault?.stop();
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

  it('two rekeys racing from two devices: one wins, the other is refused with a clear error and changes nothing', async () => {
    // A proxy in front of the real server holds each rotate until both have arrived, so both rekeys have read (and
    // unwrapped) the same vault before either writes: the race every time, not by luck of timing.
    const held: (() => void)[] = [];
    const ifMatches: (string | undefined)[] = [];
    const proxy = await proxyTo(vault.server.url, {
      beforeRotate: (ifMatch) =>
        new Promise<void>((resolve) => {
          ifMatches.push(ifMatch);
          held.push(resolve);
          if (held.length === 2) for (const release of held) release();
        }),
    });
    try {
      const before = await client.getAccount();
      const keysBefore = masterKeys(await unwrapMasterKey(before, PASSPHRASE)).length;
      const env = { COFFER_URL: proxy.url, COFFER_API_KEY: vault.apiKey, COFFER_PASSPHRASE: PASSPHRASE, COFFER_KDF: 'min' };
      const runs = await Promise.all(
        [startCli(['rekey', '--json'], env), startCli(['rekey', '--json'], env)].map((run) => run.within(120_000)),
      );
      expect(held).toHaveLength(2);
      // Both sent the ETag of the one vault they had read.
      expect(ifMatches[0]).toMatch(/^"vault-/);
      expect(ifMatches[1]).toBe(ifMatches[0]);
      const [winner, loser] = runs[0]!.code === 0 ? runs : [runs[1]!, runs[0]!];
      expect(winner!.code, winner!.stderr).toBe(0);
      expect(loser!.code, loser!.stderr).toBe(1);
      expect(loser!.stderr).toMatch(/the vault was changed by another client during the rekey; nothing was changed, run it again/);
      expect(loser!.stdout).toBe('');
      // The winner's ring, exactly: one key more, its recipient the current one; the loser's key is nowhere.
      const after = await client.getAccount();
      const ring = await unwrapMasterKey(after, PASSPHRASE);
      expect(masterKeys(ring)).toHaveLength(keysBefore + 1);
      wipe(ring);
      expect(json(await owner(['recipient', '--json'])).fingerprint).toBe(json(winner!).fingerprint);
      await expectRestores(wrappedBefore);
      await expectRestores(sealedBefore);
    } finally {
      for (const release of held) release();
      await proxy.close();
    }
  });

  it('against a server that sends no ETag (older than conditional rotate) rekey still works, rotating unconditionally', async () => {
    const seen: (string | undefined)[] = [];
    const proxy = await proxyTo(vault.server.url, { stripEtag: true, beforeRotate: async (ifMatch) => void seen.push(ifMatch) });
    try {
      const keysBefore = masterKeys(await unwrapMasterKey(await client.getAccount(), PASSPHRASE)).length;
      const result = await startCli(['rekey', '--json'], {
        COFFER_URL: proxy.url,
        COFFER_API_KEY: vault.apiKey,
        COFFER_PASSPHRASE: PASSPHRASE,
        COFFER_KDF: 'min',
      }).within(120_000);
      expect(result.code, result.stderr).toBe(0);
      expect(seen).toEqual([undefined]);
      expect(masterKeys(await unwrapMasterKey(await client.getAccount(), PASSPHRASE))).toHaveLength(keysBefore + 1);
      await expectRestores(wrappedBefore);
    } finally {
      await proxy.close();
    }
  });

  it('a wrong passphrase rekeys nothing (exit 4)', async () => {
    const before = await client.getAccount();
    const result = await owner(['rekey'], { COFFER_PASSPHRASE: 'not it' });
    expect(result.code).toBe(4);
    expect(await client.getAccount()).toEqual(before);
  });
});

/**
 * A loopback proxy to the real server: `beforeRotate` runs (with the If-Match the client sent) before a rotate is
 * passed on; `stripEtag` hides the ETag headers, as a server older than conditional rotate would.
 */
async function proxyTo(
  upstreamUrl: string,
  options: { beforeRotate?: (ifMatch: string | undefined) => Promise<void>; stripEtag?: boolean },
) {
  const hop = ['host', 'connection', 'content-length', 'transfer-encoding'];
  return listenHttp((req, res) => {
    void (async () => {
      const body = await buffer(req);
      if (req.method === 'POST' && req.url === '/api/backup-account/rotate') await options.beforeRotate?.(req.headers['if-match']);
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !hop.includes(name))) as Record<string, string>;
      const upstream = await fetch(`${upstreamUrl}${req.url}`, { method: req.method, headers, body: body.length > 0 ? body : undefined });
      const answer = Buffer.from(await upstream.arrayBuffer());
      const out = [...upstream.headers].filter(([name]) => !hop.includes(name) && !(options.stripEtag && name === 'etag'));
      res.writeHead(upstream.status, Object.fromEntries(out)).end(answer);
    })().catch((error: Error) => res.writeHead(502).end(error.message));
  });
}

/** Wraps `plaintext` under `passphrase` exactly as §1 does, whatever it holds (a form of a future version). */
async function wrapAnything(plaintext: Buffer, passphrase: string) {
  const kdf = newKdfParams('min');
  const kek = await deriveKek(passphrase, kdf);
  const nonce = Buffer.alloc(24, 9);
  const wrapped = Buffer.alloc(plaintext.length + 16);
  sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(wrapped, plaintext, Buffer.from(AD.master), null, nonce, kek);
  wipe(kek);
  const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
  return {
    cryptoVersion: 'v1' as const,
    kdf: { salt: b64(kdf.salt), opslimit: kdf.opslimit, memlimit: kdf.memlimit },
    wrappedMasterKey: b64(wrapped),
    wrappedMasterKeyNonce: b64(nonce),
  };
}

describe('forms of a newer coffer: "upgrade", never "wrong passphrase"', () => {
  const PASS = 'newer-forms passphrase';
  let vault: VaultFixture;

  beforeAll(async () => {
    vault = await startVault('coffer-newer-', PASS);
  });
  afterAll(async () => {
    await vault?.stop();
  });

  it.each([
    ['a keyring of a later version ("ckr2")', Buffer.concat([Buffer.from('ckr2'), Buffer.from([2]), Buffer.alloc(64, 1)]), /"ckr2"/],
    [
      'a "ckr1" keyring larger than this version allows',
      Buffer.concat([Buffer.from(KEYRING.magic), Buffer.from([65]), Buffer.alloc(65 * 32, 1)]),
      /"ckr1", 2085 bytes/,
    ],
    ['material of no known form', Buffer.alloc(40, 3), /40 bytes/],
  ])('a vault holding %s, opened with the right passphrase: exit 1 "made by a newer coffer"', async (_name, plaintext, detail) => {
    const other = await vault.server.newKey({ plan: 'pro' });
    const sdk = new CofferClient({ baseUrl: vault.server.url, apiKey: other.apiKey });
    expect((await sdk.bootstrap(await wrapAnything(plaintext, PASS))).created).toBe(true);
    const cli = cliFor(vault.server.url, other.apiKey, PASS);
    const right = await cli(['recipient']);
    expect(right.code, right.stderr).toBe(1);
    expect(right.stderr).toMatch(/made by a newer coffer/);
    expect(right.stderr).toMatch(detail);
    expect(right.stderr).not.toMatch(/wrong passphrase|integrity check failed/);
    // The AEAD tag still tells a wrong passphrase apart.
    const wrong = await cli(['recipient'], { COFFER_PASSPHRASE: 'not it' });
    expect(wrong.code).toBe(4);
    expect(wrong.stderr).toMatch(/wrong passphrase/);
  });

  it('a backup whose data key has a later sealed form ("cxw2"): exit 1 naming both readings, nothing written', async () => {
    const id = await vault.backup(vault.owner);
    const record = (await vault.server.parts.stores.backups.getBackup(id))!;
    const future = Buffer.concat([Buffer.from('cxw2'), Buffer.alloc(SEALED_DEK_BYTES + 100 - 4, 5)]).toString('base64');
    await vault.server.parts.stores.backups.updateBackup(id, { statuses: ['READY'] }, { wrappedDek: future });
    try {
      const target = path.join(vault.work, 'newer-target');
      const result = await vault.owner(['restore', id, target]);
      expect(result.code, result.stderr).toBe(1);
      expect(result.stderr).toMatch(
        /"cxw2", 1280 bytes\): it was made by a newer coffer \(upgrade coffer to restore it\), or the server altered it/,
      );
      expect(fs.existsSync(target)).toBe(false);
    } finally {
      await vault.server.parts.stores.backups.updateBackup(id, { statuses: ['READY'] }, { wrappedDek: record.wrappedDek });
    }
    expect((await vault.owner(['restore', id, path.join(vault.work, 'after')])).code).toBe(0);
  });
});
