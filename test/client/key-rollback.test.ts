/**
 * After `coffer rekey`, a server that puts the envelope from before it back (or rotates it back with a key allowed to)
 * is caught by the client that saw the rekey, through the real CLI and a real server: it remembers the newest vault
 * key per server and vault (<state dir>/keys.json, 0600) and refuses a vault or kit without it (exit 4, nothing
 * made), unless told to accept the older envelope on purpose (COFFER_ACCEPT_OLDER_KEYS=1).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Vault } from '../../src/domain/entities.js';
import { json, startVault, type VaultFixture } from './helpers.js';

const PASSPHRASE = 'key rollback test passphrase';

describe('an envelope from before a rekey, served again', () => {
  let vault: VaultFixture;
  let accountId: string;
  let oldVault: Vault;
  let oldKit: string;
  let oldFingerprint: string;
  let newFingerprint: string;
  let state: string;

  const records = () => vault.server.parts.stores.backups.listBackups(accountId, ['PENDING_UPLOAD', 'UPLOADED', 'READY']);

  beforeAll(async () => {
    vault = await startVault('coffer-key-rollback-', PASSPHRASE);
    accountId = (await vault.server.parts.keys.authenticate(vault.apiKey))!.accountId;
    state = path.join(vault.work, 'state');
    const owner = (args: string[], env: Record<string, string> = {}) => vault.owner(args, { XDG_STATE_HOME: state, ...env });
    oldFingerprint = json<{ fingerprint: string }>(await owner(['recipient', '--json'])).fingerprint;
    oldVault = (await vault.server.parts.stores.vaults.getVault(accountId))!;
    const kit = await owner(['kit']);
    expect(kit.code, kit.stderr).toBe(0);
    oldKit = path.join(vault.work, 'old-kit.txt');
    fs.writeFileSync(oldKit, kit.stdout, { mode: 0o600 });
    await vault.backup(vault.owner, { XDG_STATE_HOME: state });
    const rekey = await owner(['rekey', '--json']);
    expect(rekey.code, rekey.stderr).toBe(0);
    newFingerprint = JSON.parse(rekey.stdout).fingerprint;
    expect(newFingerprint).not.toBe(oldFingerprint);
    // The server puts the envelope from before the rekey back.
    expect(await vault.server.parts.stores.vaults.replaceVault(accountId, oldVault)).toBe(true);
  });
  afterAll(() => vault?.stop());

  const owner = (args: string[], env: Record<string, string> = {}) => vault.owner(args, { XDG_STATE_HOME: state, ...env });

  it('the machine that saw the rekey remembers the newest key, in a file only its user can read', () => {
    const file = path.join(state, 'coffer', 'keys.json');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.stringify(JSON.parse(fs.readFileSync(file, 'utf8')))).toContain(newFingerprint);
  });

  it('coffer recipient refuses to hand out the old recipient (exit 4), naming what happened', async () => {
    const result = await owner(['recipient']);
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(/lacks the newest vault key this machine has seen/);
    expect(result.stderr).toContain(newFingerprint);
    expect(result.stdout).not.toContain(oldFingerprint);
  });

  it('coffer backup with the passphrase refuses to make a backup with the old key: nothing is created', async () => {
    const before = (await records()).length;
    const result = await owner(['backup', vault.source]);
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(/before a rekey/);
    expect((await records()).length).toBe(before);
  });

  it('coffer recover with the kit from before the rekey does not succeed quietly: exit 4, the vault unchanged', async () => {
    const result = await owner(['recover', '--kit-file', oldKit, '--force'], { COFFER_NEW_PASSPHRASE: 'a new passphrase' });
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(/the kit lacks the newest vault key/);
    expect(await vault.server.parts.stores.vaults.getVault(accountId)).toMatchObject({ wrappedMasterKey: oldVault.wrappedMasterKey });
  });

  it('a deliberate return to the older envelope is accepted with COFFER_ACCEPT_OLDER_KEYS=1, and is the newest from then on', async () => {
    const accepted = await owner(['recipient', '--json'], { COFFER_ACCEPT_OLDER_KEYS: '1' });
    expect(accepted.code, accepted.stderr).toBe(0);
    expect(JSON.parse(accepted.stdout).fingerprint).toBe(oldFingerprint);
    const after = await owner(['recipient', '--json']);
    expect(after.code, after.stderr).toBe(0);
    expect(JSON.parse(after.stdout).fingerprint).toBe(oldFingerprint);
  });
});
