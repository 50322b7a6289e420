/**
 * A profile never decides for another account (issue 35, point 3; docs/client.md#profiles, "Which settings apply"):
 * the real CLI against a real server with two accounts and a default profile `web` of account 1 (its key and its
 * recipient). A command whose environment names account 2 (its key, its passphrase) never seals to account 1's
 * recipient, never uses account 1's key; a named profile and a contradicting variable are refused; an empty
 * COFFER_API_KEY is an error, not the profile's key; a recipient that is not this vault's is refused before anything
 * is uploaded when the passphrase is at hand; every backup says on stderr which profile and recipient it uses.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BackupStatus } from '../../src/domain/backups.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, json, makeTree, runCli } from './helpers.js';

/** A bound against a hang only: a dozen CLI processes on a busy machine. */
const HANG_GUARD = 300_000;
const ALL: BackupStatus[] = ['PENDING_UPLOAD', 'UPLOADED', 'READY', 'FAILED', 'DELETING', 'DELETED'];

describe('two accounts on one machine, a default profile for the first', { timeout: HANG_GUARD }, () => {
  let server: TestServer;
  let clock: ManualClock;
  let work: string;
  let source: string;
  let home: Record<string, string>;
  const accounts: { apiKey: string; accountId: string; passphrase: string; recipient: string; fingerprint: string; kit: string }[] = [];
  let fresh: { apiKey: string; accountId: string };

  /** The CLI in this machine's home (the profile file is there), the clock moved past the cadence after each command. */
  async function coffer(args: string[], env: Record<string, string | undefined> = {}) {
    const result = await runCli(args, { ...home, COFFER_KDF: 'min', ...env });
    clock.advance(31 * 60 * 1000);
    return result;
  }
  const as = (n: 0 | 1, extra: Record<string, string> = {}) => ({
    COFFER_URL: server.url,
    COFFER_API_KEY: accounts[n]!.apiKey,
    COFFER_PASSPHRASE: accounts[n]!.passphrase,
    ...extra,
  });
  const stored = (accountId: string) => server.parts.stores.backups.listBackups(accountId, ALL);

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    work = tempDir('coffer-profile-accounts-');
    source = path.join(work, 'source');
    await makeTree(source);
    const root = path.join(work, 'home');
    fs.mkdirSync(root, { mode: 0o700 });
    home = { HOME: root, XDG_CONFIG_HOME: path.join(root, 'config'), XDG_STATE_HOME: path.join(root, 'state') };
    for (const passphrase of ['account one passphrase', 'account two passphrase']) {
      const { apiKey, accountId } = await server.newKey({ plan: 'pro' });
      const env = { COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: passphrase };
      expect((await coffer(['init'], env)).code).toBe(0);
      const kit = path.join(work, `kit-${accounts.length + 1}.txt`);
      expect((await coffer(['kit', '--output', kit], env)).code).toBe(0);
      const { recipient, fingerprint } = json<{ recipient: string; fingerprint: string }>(await coffer(['recipient', '--json'], env));
      accounts.push({ apiKey, accountId, passphrase, recipient, fingerprint, kit });
    }
    // Account 1 rekeys after its kit was printed: its newest key is then one account 2's restores must never hear of.
    expect((await coffer(['rekey'], as(0))).code).toBe(0);
    Object.assign(accounts[0]!, json(await coffer(['recipient', '--json'], as(0))));
    fresh = await server.newKey({ plan: 'pro' });
    const keyFile = path.join(root, 'web.key');
    fs.writeFileSync(keyFile, `${accounts[0]!.apiKey}\n`, { mode: 0o600 });
    const added = await coffer(
      ['profile', 'add', 'web', '--url', server.url, '--api-key-file', keyFile, '--path', source, '--recipient', accounts[0]!.recipient],
      {},
    );
    expect(added.code, added.stderr).toBe(0);
  }, HANG_GUARD);

  afterAll(async () => {
    await server.stop();
  });

  it("account 2's key and passphrase in the environment: its own vault's key, never the default profile's recipient", async () => {
    const result = await coffer(['backup', source, '--json'], as(1));
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('the default profile web is not used');
    expect(result.stderr).not.toContain('sealing to recipient');
    const backup = JSON.parse(result.stdout) as { id: string; wrappedDek: string };
    expect(Buffer.from(backup.wrappedDek, 'base64')).toHaveLength(48); // the master-key form, not sealed to anyone
    // Account 2's owner reads it: its metadata, and a restore with its own kit (no note of account 1's keys).
    expect((await coffer(['show', backup.id, '--metadata'], as(1))).code).toBe(0);
    const target = path.join(work, 'restored-2');
    const restored = await coffer(['restore', backup.id, target, '--kit-file', accounts[1]!.kit], {
      COFFER_URL: server.url,
      COFFER_API_KEY: accounts[1]!.apiKey,
    });
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.stderr).not.toContain('before a rekey');
    expect(restored.stderr).not.toContain(accounts[0]!.fingerprint);
  });

  it("a wrong passphrase with account 2's key fails (exit 4) and uploads nothing", async () => {
    const before = await stored(accounts[1]!.accountId);
    const result = await coffer(['backup', source], as(1, { COFFER_PASSPHRASE: 'wrong passphrase' }));
    expect(result.code, result.stderr).toBe(4);
    expect(await stored(accounts[1]!.accountId)).toEqual(before);
  });

  it('a fresh account (no vault) is told to set up its vault, not "do not run coffer init"', async () => {
    const env = { COFFER_URL: server.url, COFFER_API_KEY: fresh.apiKey, COFFER_PASSPHRASE: 'a new owner' };
    const plain = await coffer(['backup', source], env);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain('run `coffer init` first');
    // Even given a recipient (account 1's), the advice covers an owner's new account.
    const sealed = await coffer(['backup', source], { ...env, COFFER_RECIPIENT: accounts[0]!.recipient });
    expect(sealed.code).toBe(1);
    expect(sealed.stderr).toContain('set up its vault first (`coffer init`');
    expect(sealed.stderr).not.toMatch(/Do not run `coffer init`/);
    expect(await stored(fresh.accountId)).toEqual([]);
  });

  it("an empty COFFER_API_KEY is an error (exit 2), never the profile's key", async () => {
    const before = await stored(accounts[0]!.accountId);
    for (const value of ['', '  ']) {
      const result = await coffer(['backup', source], { COFFER_API_KEY: value });
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain('COFFER_API_KEY is set to nothing');
    }
    expect(await stored(accounts[0]!.accountId)).toEqual(before);
  });

  it('a named profile and a variable naming another key or recipient: refused (exit 2), nothing uploaded', async () => {
    const before = await Promise.all(accounts.map((a) => stored(a.accountId)));
    for (const [args, env, variable] of [
      [['--profile', 'web'], { COFFER_API_KEY: accounts[1]!.apiKey }, 'COFFER_API_KEY'],
      [[], { COFFER_PROFILE: 'web', COFFER_API_KEY: accounts[1]!.apiKey }, 'COFFER_API_KEY'],
      [['--profile', 'web'], { COFFER_RECIPIENT: accounts[1]!.recipient }, 'COFFER_RECIPIENT'],
      [[], { COFFER_RECIPIENT: accounts[1]!.recipient }, 'COFFER_RECIPIENT'], // the default profile applies: the same
      [['--profile', 'web'], { COFFER_URL: 'http://127.0.0.1:9' }, 'COFFER_URL'],
    ] as const) {
      const result = await coffer(['backup', source, ...args], env);
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(`${variable} `);
      expect(result.stderr).toContain('would mix two accounts');
    }
    expect(await Promise.all(accounts.map((a) => stored(a.accountId)))).toEqual(before);
    // The same values repeated are no conflict: the profile's own key, named.
    const same = await coffer(['list', '--json', '--profile', 'web'], { COFFER_API_KEY: accounts[0]!.apiKey, COFFER_URL: server.url });
    expect(same.code, same.stderr).toBe(0);
  });

  it('a recipient of another vault is refused before anything is uploaded when the key reads the vault and the passphrase is at hand', async () => {
    const before = await stored(accounts[1]!.accountId);
    for (const extra of [{ COFFER_RECIPIENT: accounts[0]!.recipient }, {}] as Record<string, string>[]) {
      const args = 'COFFER_RECIPIENT' in extra ? ['backup', source] : ['backup', source, '--recipient', accounts[0]!.recipient];
      const result = await coffer(args, as(1, extra));
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(`the recipient ${accounts[0]!.fingerprint}`);
      expect(result.stderr).toContain("is not a key of this account's vault");
      expect(result.stderr).toContain(`its recipient is ${accounts[1]!.fingerprint}`);
    }
    expect(await stored(accounts[1]!.accountId)).toEqual(before);
    // Its own recipient passes the same check and is named.
    const own = await coffer(['backup', source], as(1, { COFFER_RECIPIENT: accounts[1]!.recipient }));
    expect(own.code, own.stderr).toBe(0);
    expect(own.stderr).toContain(`no profile: sealing to recipient ${accounts[1]!.fingerprint} (from COFFER_RECIPIENT)`);
  });

  it('the default profile, alone: its key and its recipient, and stderr says so', async () => {
    const result = await coffer(['backup', source, '--json'], {});
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(`profile web: sealing to recipient ${accounts[0]!.fingerprint} (from the profile)`);
    const { id } = JSON.parse(result.stdout) as { id: string };
    expect((await stored(accounts[0]!.accountId)).map((b) => b.id)).toContain(id);
    expect(json(await coffer(['show', id, '--json'], as(0))).id).toBe(id);
  });
});
