/**
 * Recipients through the real CLI and a real server on loopback (docs/crypto.md §2b): a backup host that holds only
 * an API key and the recipient string backs up without any passphrase (none in the environment, none in a file,
 * stdin not a terminal: being asked would fail), cannot restore, and the owner restores byte-identical. A hostile
 * server that swaps a sealed data key or re-seals it to a key of its own is refused.
 */
import fs from 'node:fs';
import path from 'node:path';
import { bech32m } from '@scure/base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveRecipient, newKey, RECIPIENT, sealDek, SEALED_DEK_BYTES } from '../../src/client/envelope.js';
import type { Backup } from '../../src/domain/entities.js';
import type { TestServer } from '../helpers/server.js';
import { type Cli, exists, json, snapshot, startVault, type VaultFixture } from './helpers.js';

const PASSPHRASE = 'recipient-test passphrase';

describe('backing up to a recipient: a host that can add backups but never read one', () => {
  let vault: VaultFixture;
  let server: TestServer;
  let work: string;
  let source: string;
  let owner: Cli;
  let host: Cli;
  let recipient: string;
  let fingerprint: string;
  let sealed: Backup;
  let other: Backup;

  const nextSlotAllowed = () => vault.nextSlotAllowed();

  async function expectRefused(id: string, pattern: RegExp) {
    const target = path.join(work, `refused-${Math.random().toString(16).slice(2)}`);
    const result = await owner(['restore', id, target]);
    expect(result.code, result.stderr).toBe(4);
    expect(result.stderr).toMatch(/integrity check failed/);
    expect(result.stderr).toMatch(pattern);
    expect(exists(target)).toBe(false);
  }

  /** Runs `check` with backup `sealed`'s record altered as a hostile server would, then puts it back. */
  async function withRecord(patch: Partial<Backup>, check: () => Promise<unknown>) {
    await server.parts.stores.backups.updateBackup(sealed.id, { statuses: ['READY'] }, patch);
    try {
      await check();
    } finally {
      await server.parts.stores.backups.updateBackup(
        sealed.id,
        { statuses: ['READY'] },
        {
          wrappedDek: sealed.wrappedDek,
          wrappedDekNonce: sealed.wrappedDekNonce,
        },
      );
    }
  }

  beforeAll(async () => {
    vault = await startVault('coffer-recipient-', PASSPHRASE);
    // host: no COFFER_PASSPHRASE, no --passphrase-file; runCli's stdin is a closed pipe, so a prompt is impossible.
    ({ server, work, source, owner, host } = vault);
    ({ recipient, fingerprint } = json(await owner(['recipient', '--json'])));
  });

  afterAll(async () => {
    await vault?.stop();
  });

  it('`coffer recipient` prints the Bech32m string (alone on stdout) and its fingerprint', async () => {
    expect(recipient).toMatch(/^coffer1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]{1952}$/);
    expect(fingerprint).toMatch(/^[0-9a-f]{4}(-[0-9a-f]{4}){3}$/);
    const human = await owner(['recipient']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toBe(`${recipient}\n`);
    expect(human.stderr).toContain(`fingerprint ${fingerprint}`);
    // Without the passphrase there is no recipient to print.
    const denied = await host(['recipient']);
    expect(denied.code).toBe(2);
    expect(denied.stderr).toMatch(/no passphrase/);
  });

  it('the host backs up with only the API key and COFFER_RECIPIENT: no passphrase asked, the DEK sealed (1,180 bytes, cxw1)', async () => {
    const result = await host(['backup', source, '--json'], { COFFER_RECIPIENT: recipient });
    const detail = json(result);
    nextSlotAllowed();
    expect(detail).toMatchObject({ status: 'READY', recipientFingerprint: fingerprint });
    sealed = (await server.parts.stores.backups.getBackup(detail.id))!;
    const wrapped = Buffer.from(sealed.wrappedDek!, 'base64');
    expect(wrapped.length).toBe(SEALED_DEK_BYTES);
    expect(wrapped.subarray(0, 4).toString()).toBe('cxw1');
    expect(wrapped.subarray(4, 12).toString('hex')).toBe(fingerprint.replaceAll('-', ''));
  });

  it('--recipient works the same way, and the human output names the fingerprint', async () => {
    const result = await host(['backup', source, '--recipient', recipient]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`sealed to recipient ${fingerprint}`);
    nextSlotAllowed();
    const id = /backup (\S+) READY/.exec(result.stdout)![1]!;
    other = (await server.parts.stores.backups.getBackup(id))!;
    expect(Buffer.from(other.wrappedDek!, 'base64').length).toBe(SEALED_DEK_BYTES);
  });

  it('the host cannot restore: it has no passphrase, and nothing is written', async () => {
    const target = path.join(work, 'host-target');
    const result = await host(['restore', sealed.id, target]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/no passphrase/);
    expect(exists(target)).toBe(false);
  });

  it('the owner restores the sealed backup byte-identical with the passphrase', async () => {
    const target = path.join(work, 'owner-target');
    const result = await owner(['restore', sealed.id, target]);
    expect(result.code, result.stderr).toBe(0);
    expect(await snapshot(target)).toEqual(await snapshot(source));
    const shown = await owner(['show', other.id, '--metadata']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`source:      ${source}`);
  });

  it('a sealed wrappedDek swapped in from another backup is refused', () =>
    withRecord({ wrappedDek: other.wrappedDek, wrappedDekNonce: other.wrappedDekNonce }, () =>
      expectRefused(sealed.id, /data key does not belong to this backup/),
    ));

  it("a DEK re-sealed by the server to a recipient of its own is refused, naming that recipient's fingerprint", async () => {
    // The hostile server cannot know the DEK; it seals a key of its own choosing to its own recipient.
    const hostile = deriveRecipient(newKey());
    const forged = sealDek(hostile, sealed.id, newKey());
    await withRecord(forged, () => expectRefused(sealed.id, new RegExp(`sealed to another recipient ${hostile.fingerprint}`)));
  });

  it('a wrappedDek of neither form (a sealed key cut short) is refused', () => {
    const cut = Buffer.from(sealed.wrappedDek!, 'base64')
      .subarray(0, SEALED_DEK_BYTES - 1)
      .toString('base64');
    return withRecord({ wrappedDek: cut }, () => expectRefused(sealed.id, /data key does not belong/));
  });

  it('a corrupted recipient string is refused with a clear message (exit 2), before any upload', async () => {
    const at = 500;
    const typo = recipient.slice(0, at) + (recipient[at] === 'q' ? 'p' : 'q') + recipient.slice(at + 1);
    const all = ['PENDING_UPLOAD', 'UPLOADED', 'READY', 'FAILED', 'DELETING', 'DELETED'] as const;
    const before = await server.parts.stores.backups.listBackups(sealed.accountId, all);
    const bad = await host(['backup', source], { COFFER_RECIPIENT: typo });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/COFFER_RECIPIENT: the recipient string is damaged: its Bech32m checksum does not match/);
    const foreign = await host(['backup', source, '--recipient', 'age1qyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqs3290gq']);
    expect(foreign.code).toBe(2);
    expect(foreign.stderr).toMatch(/--recipient: not a Coffer recipient: it must start with "coffer1"/);
    expect(await server.parts.stores.backups.listBackups(sealed.accountId, all)).toEqual(before);
  });

  /** The recipient with non-zero padding bits in its last character and a matching checksum (never written by coffer). */
  const withPaddingBits = () => {
    const words = [...bech32m.decode(recipient as `${string}1${string}`, false).words];
    words[words.length - 1]! |= 1;
    return bech32m.encode(RECIPIENT.hrp, words, false);
  };
  const mistyped = (text: string, at = 500) => text.slice(0, at) + (text[at] === 'q' ? 'p' : 'q') + text.slice(at + 1);
  /** A well-formed string of 1,216 bytes that is no ML-KEM key (coefficients ≥ q). */
  const notAKey = () => bech32m.encode(RECIPIENT.hrp, bech32m.toWords(new Uint8Array(RECIPIENT.publicKeyBytes).fill(0xff)), false);

  it('non-zero padding bits are refused with their own message, not as a damaged checksum (exit 2, before any upload)', async () => {
    const padded = withPaddingBits();
    expect(padded.toLowerCase()).not.toBe(recipient);
    const all = ['PENDING_UPLOAD', 'UPLOADED', 'READY', 'FAILED', 'DELETING', 'DELETED'] as const;
    const before = await server.parts.stores.backups.listBackups(sealed.accountId, all);
    for (const [args, env, origin] of [
      [['backup', source, '--recipient', padded], {}, '--recipient'],
      [['backup', source], { COFFER_RECIPIENT: padded }, 'COFFER_RECIPIENT'],
    ] as const) {
      const result = await host([...args], env);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`${origin}: the recipient string's last character has non-zero padding bits`);
      expect(result.stderr).not.toMatch(/checksum does not match/);
    }
    expect(await server.parts.stores.backups.listBackups(sealed.accountId, all)).toEqual(before);
  });

  describe('coffer profile add --recipient: the same reader, at add time', () => {
    let home: string;
    let keyFile: string;
    /** The host's CLI with its own HOME and XDG directories (the profile file lives there). */
    const hostCli = (args: string[], more: Record<string, string> = {}) =>
      host(args, { HOME: home, XDG_CONFIG_HOME: path.join(home, 'config'), XDG_STATE_HOME: path.join(home, 'state'), ...more });
    const configFile = () => path.join(home, 'config', 'coffer', 'config.json');
    const add = (name: string, value: string) =>
      hostCli(['profile', 'add', name, '--url', server.url, '--api-key-file', keyFile, '--path', source, '--recipient', value]);

    beforeAll(() => {
      home = path.join(work, 'profile-home');
      fs.mkdirSync(home, { recursive: true });
      keyFile = path.join(home, 'api.key');
      fs.writeFileSync(keyFile, `${vault.apiKey}\n`, { mode: 0o600 });
    });

    it('accepts the recipient in upper case with surrounding white space, keeps it canonical, and a run seals to it', async () => {
      const added = await add('upper', `  ${recipient.toUpperCase()}\n`);
      expect(added.code, added.stderr).toBe(0);
      const shown = json(await hostCli(['profile', 'show', 'upper', '--json']));
      expect(shown.profile.recipient).toBe(recipient);
      nextSlotAllowed();
      const run = await hostCli(['run', '--profile', 'upper', '--json']);
      expect(run.code, run.stderr).toBe(0);
      nextSlotAllowed();
      const record = (await server.parts.stores.backups.getBackup(JSON.parse(run.stdout).backupId))!;
      expect(Buffer.from(record.wrappedDek!, 'base64').subarray(4, 12).toString('hex')).toBe(fingerprint.replaceAll('-', ''));
    });

    it.each([
      [
        'a damaged checksum',
        () => mistyped(recipient),
        /--recipient: the recipient string is damaged: its Bech32m checksum does not match/,
      ],
      ['non-zero padding bits', withPaddingBits, /--recipient: the recipient string's last character has non-zero padding bits/],
      [
        'a string that is no X-Wing key',
        notAKey,
        /--recipient: the recipient is not a valid X-Wing public key \(its ML-KEM part fails the modulus check\)/,
      ],
      [
        'mixed case',
        () => `${recipient.slice(0, 100)}${recipient.slice(100).toUpperCase()}`,
        /--recipient: the recipient string mixes upper and lower case/,
      ],
      ['an empty value', () => '', /--recipient: not a Coffer recipient: it must start with "coffer1"/],
    ])(
      'refuses %s at add time with the message of every other reader (exit 2), the profile file unchanged',
      async (_name, value, message) => {
        const before = fs.existsSync(configFile()) ? fs.readFileSync(configFile(), 'utf8') : null;
        const result = await add('bad', value());
        expect(result.code, result.stderr).toBe(2);
        expect(result.stderr).toMatch(message);
        expect(fs.existsSync(configFile()) ? fs.readFileSync(configFile(), 'utf8') : null).toBe(before);
        // The same string given to `coffer backup` is refused with the same reason.
        const backup = await host(['backup', source, '--recipient', value()]);
        expect(backup.code).toBe(2);
        expect(backup.stderr).toMatch(message);
      },
    );
  });

  it('the owner without a recipient backs up exactly as before (48-byte wrapped DEK)', async () => {
    const detail = json(await owner(['backup', source, '--json']));
    nextSlotAllowed();
    expect(detail.recipientFingerprint).toBeUndefined();
    expect(Buffer.from(detail.wrappedDek, 'base64').length).toBe(48);
  });
});
