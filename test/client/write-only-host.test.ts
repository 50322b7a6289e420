/**
 * A backup host with a write-only, append-only key (`backups:write` alone) and the vault's recipient, through the real
 * CLI and a real server (docs/api-rules.md#append-only-keys, docs/crypto.md §3a): `coffer backup` and `coffer run`
 * back up without ever reading the account, the owner restores with the passphrase, and no append-only key is ever
 * handed the vault's wrapped master key, its nonce or the KDF parameters (what an offline passphrase guess needs).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from '../helpers/server.js';
import { cliFor, json, listenHttp, runCli, snapshot, startVault, type VaultFixture } from './helpers.js';

const PASSPHRASE = 'write-only host test passphrase';

describe('a write-only append-only host key', () => {
  let vault: VaultFixture;
  let server: TestServer;
  let accountId: string;
  let recipient: string;
  let hostKey: string;
  let readerKey: string;

  /** A key of the vault's account, made as `coffer admin keys create --append-only --scopes …` makes it. */
  async function appendOnlyKey(scopes: ('backups:read' | 'backups:write')[]) {
    const account = (await server.parts.stores.accounts.getAccount(accountId))!;
    return (await server.parts.keys.issueKey(account, { scopes, appendOnly: true })).apiKey;
  }

  const accountAs = async (apiKey: string) => {
    const response = await fetch(`${server.url}/api/backup-account`, { headers: { authorization: `Bearer ${apiKey}` } });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    vault = await startVault('coffer-write-only-', PASSPHRASE);
    server = vault.server;
    accountId = (await server.parts.keys.authenticate(vault.apiKey))!.accountId;
    recipient = json<{ recipient: string }>(await vault.owner(['recipient', '--json'])).recipient;
    hostKey = await appendOnlyKey(['backups:write']);
    readerKey = await appendOnlyKey(['backups:read', 'backups:write']);
  });
  afterAll(() => vault?.stop());

  it("is never handed the wrapped master key, its nonce or the KDF parameters; the owner's key still is", async () => {
    const owner = await accountAs(vault.apiKey);
    expect(owner.status).toBe(200);
    expect(owner.body).toMatchObject({
      initialized: true,
      cryptoVersion: 'v1',
      kdf: expect.any(Object),
      wrappedMasterKey: expect.any(String),
    });
    expect(typeof owner.body.wrappedMasterKeyNonce).toBe('string');

    // An append-only key that may read learns that the vault exists and its interval, nothing to guess against.
    const reader = await accountAs(readerKey);
    expect(reader).toEqual({
      status: 200,
      body: {
        initialized: true,
        backupInterval: owner.body.backupInterval,
        cryptoVersion: 'v1',
        kdf: null,
        wrappedMasterKey: null,
        wrappedMasterKeyNonce: null,
      },
    });
    // The write-only key may not read the account at all.
    expect((await accountAs(hostKey)).status).toBe(403);
  });

  it('coffer backup seals to the recipient without reading anything; the owner restores it with the passphrase', async () => {
    const host = cliFor(server.url, hostKey, undefined, { COFFER_RECIPIENT: recipient });
    const result = await host(['backup', vault.source, '--json']);
    expect(result.code, result.stderr).toBe(0);
    const { id, status } = JSON.parse(result.stdout) as { id: string; status: string };
    expect(status).toBe('READY');
    vault.nextSlotAllowed();
    const target = path.join(vault.work, 'restored-backup');
    const restored = await vault.owner(['restore', id, target]);
    expect(restored.code, restored.stderr).toBe(0);
    expect(await snapshot(target)).toEqual(await snapshot(vault.source));
  });

  it('coffer run backs up from a profile, then, not due, says when from its own state without opening a slot', async () => {
    const config = path.join(vault.work, 'run-config');
    const state = path.join(vault.work, 'run-state');
    const env = { XDG_CONFIG_HOME: config, XDG_STATE_HOME: state };
    const keyFile = path.join(vault.work, 'host.key');
    fs.writeFileSync(keyFile, `${hostKey}\n`, { mode: 0o600 });
    const add = await runCli(
      ['profile', 'add', 'host', '--url', server.url, '--api-key-file', keyFile, '--recipient', recipient, '--path', vault.source],
      env,
    );
    expect(add.code, add.stderr).toBe(0);

    const first = await runCli(['run', '--json'], env);
    expect(first.code, first.stderr).toBe(0);
    const outcome = JSON.parse(first.stdout) as { outcome: string; backupId: string };
    expect(outcome.outcome).toBe('success');
    const target = path.join(vault.work, 'restored-run');
    expect((await vault.owner(['restore', outcome.backupId, target])).code).toBe(0);
    expect(await snapshot(target)).toEqual(await snapshot(vault.source));

    // At once again: the server refuses the slot (429), the host says when and opens nothing.
    const before = (await server.parts.stores.backups.listBackups(accountId, ['PENDING_UPLOAD', 'UPLOADED', 'READY'])).length;
    const second = await runCli(['run', '--json'], env);
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({ outcome: 'skipped', nextDueAt: expect.any(String) });
    expect((await server.parts.stores.backups.listBackups(accountId, ['PENDING_UPLOAD', 'UPLOADED', 'READY'])).length).toBe(before);
  });

  it('coffer schedule status after a successful run: the next due time is not "now"; after install --cron it shows the line', async () => {
    const dir = path.join(vault.work, 'status-host');
    const env = { XDG_CONFIG_HOME: path.join(dir, 'config'), XDG_STATE_HOME: path.join(dir, 'state') };
    fs.mkdirSync(dir, { recursive: true });
    const keyFile = path.join(dir, 'host.key');
    fs.writeFileSync(keyFile, `${hostKey}\n`, { mode: 0o600 });
    const add = await runCli(
      ['profile', 'add', 'status', '--url', server.url, '--api-key-file', keyFile, '--recipient', recipient, '--path', vault.source],
      env,
    );
    expect(add.code, add.stderr).toBe(0);
    vault.nextSlotAllowed();
    const ran = await runCli(['run', '--json'], env);
    expect(ran.code, ran.stderr).toBe(0);
    expect(JSON.parse(ran.stdout)).toMatchObject({ outcome: 'success' });
    vault.nextSlotAllowed();
    const status = await runCli(['schedule', 'status'], env);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/last run: .*: success/);
    expect(status.stdout).not.toMatch(/next due:\s+now/);
    expect(status.stdout).toMatch(/next due:\s+not known here \(this API key may not read the plan's interval\)/);

    const cron = await runCli(['schedule', 'install', '--cron'], env);
    expect(cron.code, cron.stderr).toBe(0);
    const line = cron.stdout.trim();
    const after = await runCli(['schedule', 'status'], env);
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout).not.toContain('units:      not installed');
    expect(after.stdout).toContain(`cron:       ${line}`);
    expect(after.stdout).toContain('printed by `coffer schedule install --cron`');
    expect(json(await runCli(['schedule', 'status', '--json'], env)).cron).toMatchObject({ line });
    // Removing the schedule forgets the line (and says to take it out of the crontab).
    const removed = await runCli(['schedule', 'remove', '--no-enable'], env);
    expect(removed.stderr).toContain('crontab -e');
    expect(json(await runCli(['schedule', 'status', '--json'], env)).cron).toBeNull();
  });

  it('coffer schedule install needs no --interval: the shortest (the key cannot read the plan), or what the last run saw', async () => {
    const dir = path.join(vault.work, 'schedule-host');
    const env = { XDG_CONFIG_HOME: path.join(dir, 'config'), XDG_STATE_HOME: path.join(dir, 'state') };
    fs.mkdirSync(dir, { recursive: true });
    const keyFile = path.join(dir, 'host.key');
    fs.writeFileSync(keyFile, `${hostKey}\n`, { mode: 0o600 });
    const add = await runCli(
      ['profile', 'add', 'host', '--url', server.url, '--api-key-file', keyFile, '--recipient', recipient, '--path', vault.source],
      env,
    );
    expect(add.code, add.stderr).toBe(0);
    const cron = await runCli(['schedule', 'install', '--cron'], env);
    expect(cron.code, cron.stderr).toBe(0);
    expect(cron.stdout).toContain('*/6 * * * *');
    expect(cron.stderr).toContain("this API key may not read the account's plan: the timer uses the shortest interval (30m)");
    // Once a run has seen the plan's interval (--interval here, as the agent keeps it), install uses that one.
    fs.mkdirSync(path.join(env.XDG_STATE_HOME, 'coffer', 'runs'), { recursive: true });
    fs.writeFileSync(
      path.join(env.XDG_STATE_HOME, 'coffer', 'runs', 'host.json'),
      JSON.stringify({
        version: 1,
        interval: '1d',
        firstRunAt: new Date().toISOString(),
        lastRunAt: new Date().toISOString(),
        lastOutcome: 'skipped',
        lastSuccessAt: null,
        lastBackupId: null,
        nextDueAt: null,
        overdueNotifiedAt: null,
      }),
    );
    const seen = await runCli(['schedule', 'install', '--cron'], env);
    expect(seen.code, seen.stderr).toBe(0);
    expect(seen.stdout).toMatch(/^\d+ \*\/6 \* \* \* /m);
    expect(seen.stderr).toContain('the interval its last run saw (1d)');
  });

  it("on an account without a vault, the server's answer to create is the refusal, and nothing is left open", async () => {
    const { accountId: empty } = await server.newKey({ plan: 'pro' });
    const account = (await server.parts.stores.accounts.getAccount(empty))!;
    const key = (await server.parts.keys.issueKey(account, { scopes: ['backups:write'], appendOnly: true })).apiKey;
    const host = cliFor(server.url, key, undefined, { COFFER_RECIPIENT: recipient });
    const result = await host(['backup', vault.source]);
    expect(result.code).not.toBe(0);
    // The key is the wrong one (an account without a vault): never "run coffer init" on a host.
    expect(result.stderr).toContain("this API key's account has no vault");
    expect(result.stderr).toContain('wrong key');
    expect(result.stderr).not.toContain('run `coffer init` first');
    expect(await server.parts.stores.backups.listBackups(empty, ['PENDING_UPLOAD', 'UPLOADED', 'READY'])).toEqual([]);
  });

  it.each([
    ['write-only', ['backups:write'] as const],
    ['read-write', ['backups:read', 'backups:write'] as const],
  ])('coffer run with a %s key of an account without a vault: the failure notification says "configuration"', async (name, scopes) => {
    const { accountId: empty } = await server.newKey({ plan: 'pro' });
    const account = (await server.parts.stores.accounts.getAccount(empty))!;
    const key = (await server.parts.keys.issueKey(account, { scopes: [...scopes], appendOnly: true })).apiKey;
    const bodies: Record<string, unknown>[] = [];
    const receiver = await listenHttp((req, res) => {
      let text = '';
      req.on('data', (chunk: Buffer) => (text += chunk.toString()));
      req.on('end', () => {
        bodies.push(JSON.parse(text) as Record<string, unknown>);
        res.writeHead(200).end('ok');
      });
    });
    try {
      const dir = path.join(vault.work, `no-vault-${name}`);
      const env = { XDG_CONFIG_HOME: path.join(dir, 'config'), XDG_STATE_HOME: path.join(dir, 'state') };
      fs.mkdirSync(dir, { recursive: true });
      const keyFile = path.join(dir, 'host.key');
      fs.writeFileSync(keyFile, `${key}\n`, { mode: 0o600 });
      const add = await runCli(
        [
          'profile',
          'add',
          'host',
          '--url',
          server.url,
          '--api-key-file',
          keyFile,
          '--recipient',
          recipient,
          '--path',
          vault.source,
          '--notify-failure',
          `${receiver.url}/hook`,
        ],
        env,
      );
      expect(add.code, add.stderr).toBe(0);
      const run = await runCli(['run'], env);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain("this API key's account has no vault");
      expect(run.stderr).not.toContain('run `coffer init` first');
      expect(bodies).toHaveLength(1);
      expect(bodies[0]).toMatchObject({ event: 'failure', failure: 'configuration' });
    } finally {
      await receiver.close();
    }
  });
});
