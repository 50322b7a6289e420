/**
 * Restore drills through the real CLI and a real server (docs/client.md#restore-drills): `coffer verify --drill`
 * records an attestation whose mac verifies with the vault's key and whose facts are the verification's (the
 * ciphertext's SHA-256 and size as stored, the plaintext size and file count as sealed); a tampered backup records a
 * failed drill and exits 4; a backup that cannot be checked records nothing; a server without the attestation route
 * (a proxy answering its unknown-route 404) leaves the verification's exit and records nothing; a write-only host (its key, its
 * recipient without a passphrase, an append-only key) is refused and records nothing; the kit drills too. The agent
 * with `"drill": "daily"` drills the newest READY backup and one older one, records both, remembers when, and
 * notifies a failed drill; a profile with a recipient and a drill is refused.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DRILL_CHECKS, type AttestationBody, type AttestationPayloadBody } from '../../src/contract/attestation.js';
import { verifyAttestation } from '../../src/client/attestation.js';
import { masterKeys, nodePrimitives, wipe } from '../../src/client/envelope.js';
import { openBackup } from '../../src/client/restore.js';
import { unlockVault } from '../../src/client/vault.js';
import type { TestServer } from '../helpers/server.js';
import { cliFor, json, listenHttp, runCli, startVault, type VaultFixture } from './helpers.js';

const PASSPHRASE = 'drill test passphrase';
/** Tests that spawn several CLI processes: a bound against hangs on a loaded machine, not a timing check. */
const SEVERAL_CLIS = 120_000;

/** A loopback receiver of notifications: every JSON body posted to it. */
async function receiver() {
  const bodies: Record<string, unknown>[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (d: string) => (body += d));
    req.on('end', () => {
      bodies.push(JSON.parse(body) as Record<string, unknown>);
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/drills`;
  return { url, bodies, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('restore drills: coffer verify --drill and the agent', () => {
  let vault: VaultFixture;
  let server: TestServer;
  let accountId: string;
  let material: Buffer;
  let first: string;
  let second: string;

  /** The backup's attestations as the server shows them to the owner's key (GET /api/backups/{id}/attestations), newest first. */
  async function stored(backupId: string): Promise<AttestationBody[]> {
    const response = await fetch(`${server.url}/api/backups/${backupId}/attestations`, {
      headers: { authorization: `Bearer ${vault.apiKey}` },
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { attestations: AttestationBody[] }).attestations;
  }
  const blobFile = async (backupId: string) =>
    path.join(server.dataDir, 'blobs', (await server.parts.stores.backups.getBackup(backupId))!.blobKey!);

  /** The newest stored attestation of a backup, checked with the vault's keys: its authenticated payload. */
  async function newestVerified(backupId: string): Promise<AttestationPayloadBody> {
    const [newest] = await stored(backupId);
    expect(newest).toBeDefined();
    const verdict = verifyAttestation(nodePrimitives, masterKeys(material), newest!);
    expect(verdict.status, JSON.stringify(verdict)).toBe('verified');
    if (verdict.status !== 'verified') throw new Error('not verified');
    return verdict.payload;
  }

  /** A key of the vault's account, as `coffer admin keys create --append-only --scopes …` makes it. */
  async function appendOnlyKey(scopes: ('backups:read' | 'backups:restore' | 'backups:write')[]) {
    const account = (await server.parts.stores.accounts.getAccount(accountId))!;
    return (await server.parts.keys.issueKey(account, { scopes, appendOnly: true })).apiKey;
  }

  /** Runs `check` with one byte in the middle of a backup's stored ciphertext flipped, then puts it back. */
  async function withTampered(backupId: string, check: () => Promise<void>) {
    const file = await blobFile(backupId);
    const original = await fsp.readFile(file);
    const altered = Buffer.from(original);
    altered[Math.floor(altered.length / 2)]! ^= 0x01;
    await fsp.writeFile(file, altered);
    try {
      await check();
    } finally {
      await fsp.writeFile(file, original);
    }
  }

  beforeAll(async () => {
    vault = await startVault('coffer-drill-', PASSPHRASE);
    server = vault.server;
    accountId = (await server.parts.keys.authenticate(vault.apiKey))!.accountId;
    material = (await unlockVault(vault.client, PASSPHRASE)).masterKey;
    first = await vault.backup(vault.owner);
    second = await vault.backup(vault.owner);
  }, SEVERAL_CLIS);
  afterAll(async () => {
    if (material) wipe(material);
    await vault?.stop();
  });

  it('verify --drill records a passed drill whose mac verifies with the vault key and whose facts are the verification’s', async () => {
    const result = await vault.owner(['verify', '--drill', first]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`verified ${first}`);
    expect(result.stdout).toContain(`drill passed for ${first}, recorded`);
    expect(result.stdout).toContain('1 drill recorded');

    const payload = await newestVerified(first);
    const ciphertext = await fsp.readFile(await blobFile(first));
    const opened = await openBackup(vault.client, material, first);
    wipe(opened.dek);
    expect(payload).toMatchObject({
      accountId,
      backupId: first,
      result: 'passed',
      failure: null,
      checks: [...DRILL_CHECKS],
      ciphertextSizeBytes: ciphertext.length,
      ciphertextSha256: createHash('sha256').update(ciphertext).digest('hex'),
      plaintextSizeBytes: opened.metadata.plaintextSizeBytes,
      fileCount: opened.metadata.fileCount,
      drilledBy: { machine: os.hostname(), client: expect.stringMatching(/^coffer-cli\/\d/) },
    });
    expect(opened.metadata.fileCount).toBeGreaterThan(5);
    expect(Date.now() - Date.parse(payload.checkedAt)).toBeLessThan(3_600_000);

    // --json says the same, per backup; --all drills every READY backup.
    const all = await vault.owner(['verify', '--drill', '--all', '--json']);
    expect(all.code, all.stderr).toBe(0);
    const report = JSON.parse(all.stdout) as {
      results: { backupId: string; drill: { result: string; recorded: boolean } }[];
      drills: unknown;
    };
    expect(report.results.map((r) => [r.backupId, r.drill.result, r.drill.recorded]).sort()).toEqual(
      [
        [first, 'passed', true],
        [second, 'passed', true],
      ].sort(),
    );
    expect(report.drills).toEqual({ recorded: 2, notRecorded: 0 });
    expect(await stored(second)).toHaveLength(1);
  });

  it('a tampered backup is a failed drill, recorded (exit 4); a backup that cannot be checked records nothing', async () => {
    await withTampered(second, async () => {
      const before = (await stored(second)).length;
      const result = await vault.owner(['verify', '--drill', second]);
      expect(result.code, result.stderr).toBe(4);
      expect(result.stdout).toContain(`FAILED   ${second}`);
      expect(result.stdout).toContain(`drill FAILED for ${second}, recorded`);
      expect(await stored(second)).toHaveLength(before + 1);
      const payload = await newestVerified(second);
      expect(payload).toMatchObject({ result: 'failed', backupId: second, accountId, checks: ['download'] });
      expect(payload.failure).toMatch(/failed authentication/);
    });

    const missing = '01900000-0000-7000-8000-0000000000ff';
    const unknown = await vault.owner(['verify', '--drill', missing]);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toContain(`no drill result for ${missing}: it could not be checked; nothing recorded`);
    expect(unknown.stdout).toContain('0 drills recorded');
  });

  it('a server without the attestation route: the drill is verified, not recorded, and the exit is the verification’s', async () => {
    // A proxy to the real server whose attestation route answers as an older server does: the unknown route's 404.
    const older = await listenHttp((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const route = /\/attestations$/.test(req.url!) ? '/api/no-such-route' : req.url!;
        const headers = Object.fromEntries(
          ['authorization', 'content-type', 'range', 'if-range', 'accept'].flatMap((h) =>
            req.headers[h] ? [[h, String(req.headers[h])]] : [],
          ),
        );
        const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
        void fetch(`${server.url}${route}`, { method: req.method, headers, body }).then(async (answer) => {
          const kept = ['content-type', 'content-length', 'content-range', 'etag', 'accept-ranges', 'x-coffer-account-id'];
          res.writeHead(
            answer.status,
            Object.fromEntries(kept.flatMap((h) => (answer.headers.get(h) ? [[h, answer.headers.get(h)!]] : []))),
          );
          res.end(Buffer.from(await answer.arrayBuffer()));
        });
      });
    });
    try {
      const before = (await stored(first)).length;
      const result = await cliFor(older.url, vault.apiKey, PASSPHRASE)(['verify', '--drill', first]);
      expect(result.code, result.stdout + result.stderr).toBe(0);
      expect(result.stdout).toContain(`verified ${first}`);
      expect(result.stdout).toContain(`drill passed for ${first}, NOT recorded: this server does not record restore drills`);
      expect(result.stderr).toContain('this server does not record restore drills (it is older than this coffer');
      expect(await stored(first)).toHaveLength(before);
    } finally {
      await older.close();
    }
  });

  it(
    'a write-only host cannot drill: its key, its recipient without a passphrase, an append-only key; nothing is recorded',
    async () => {
      const before = (await stored(first)).length;
      const recipient = json<{ recipient: string }>(await vault.owner(['recipient', '--json'])).recipient;
      const writeOnly = await appendOnlyKey(['backups:write']);

      const host = cliFor(server.url, writeOnly, undefined, { COFFER_RECIPIENT: recipient });
      const onHost = await host(['verify', '--drill', first]);
      expect(onHost.code).toBe(2);
      expect(onHost.stderr).toContain('this is a backup host');
      expect(onHost.stderr).toContain("the owner's workstation");

      const withPassphrase = await cliFor(server.url, writeOnly, PASSPHRASE)(['verify', '--drill', first]);
      expect(withPassphrase.code).toBe(2);
      expect(withPassphrase.stderr).toContain('it lacks the backups:read permission');
      expect(withPassphrase.stderr).toContain('never the backup host');

      const reader = await appendOnlyKey(['backups:read', 'backups:restore', 'backups:write']);
      const appendOnly = await cliFor(server.url, reader, PASSPHRASE)(['verify', '--drill', first]);
      expect(appendOnly.code).toBe(2);
      expect(appendOnly.stderr).toContain('this API key is append-only');
      expect(appendOnly.stderr).toContain('--kit-file');
      expect(await stored(first)).toHaveLength(before);

      // With the kit, even that append-only key drills: the kit opens the backups, no vault is needed from the server.
      const kitFile = path.join(vault.work, 'kit.txt');
      const kit = await vault.owner(['kit', '--output', kitFile]);
      expect(kit.code, kit.stderr).toBe(0);
      const withKit = await cliFor(server.url, reader, undefined)(['verify', '--drill', first, '--kit-file', kitFile]);
      expect(withKit.code, withKit.stdout + withKit.stderr).toBe(0);
      expect(withKit.stdout).toContain(`drill passed for ${first}, recorded`);
      expect((await newestVerified(first)).result).toBe('passed');

      // A key that may read but not download (no backups:restore): the backup is not checked, no drill result (exit 1),
      // never a failed drill.
      const noDownload = await appendOnlyKey(['backups:read', 'backups:write']);
      const before2 = (await stored(first)).length;
      const refused = await cliFor(server.url, noDownload, undefined)(['verify', '--drill', first, '--kit-file', kitFile]);
      expect(refused.code, refused.stdout + refused.stderr).toBe(1);
      expect(refused.stdout).toContain(`could not verify ${first}: this API key is not allowed to download backups`);
      expect(refused.stdout).toContain(`no drill result for ${first}`);
      expect(await stored(first)).toHaveLength(before2);
      fs.rmSync(kitFile);
    },
    SEVERAL_CLIS,
  );

  describe('the agent', () => {
    let notifications: Awaited<ReturnType<typeof receiver>>;
    let env: Record<string, string>;
    const coffer = (args: string[]) => runCli(args, env);
    const counts = async (ids: string[]) => Promise.all(ids.map(async (id) => (await stored(id)).length));

    beforeAll(async () => {
      notifications = await receiver();
      const work = path.join(vault.work, 'agent');
      env = {
        XDG_CONFIG_HOME: path.join(work, 'config'),
        XDG_STATE_HOME: path.join(work, 'state'),
        COFFER_PASSPHRASE: PASSPHRASE,
        COFFER_KDF: 'min',
      };
      const keyFile = path.join(vault.work, 'agent.key');
      fs.writeFileSync(keyFile, `${vault.apiKey}\n`, { mode: 0o600 });
      const profile = ['--url', server.url, '--api-key-file', keyFile, '--path', vault.source];
      const added = await coffer(['profile', 'add', 'home', ...profile, '--drill', 'daily', '--notify-failure', notifications.url]);
      expect(added.code, added.stderr).toBe(0);

      // A profile that seals to a recipient is a backup host's: a drill there is refused when it is saved.
      const recipient = json<{ recipient: string }>(await vault.owner(['recipient', '--json'])).recipient;
      const refused = await coffer(['profile', 'add', 'host', ...profile, '--recipient', recipient, '--drill', 'weekly']);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain('profiles.host.drill: a profile with a recipient runs on a backup host');
    }, SEVERAL_CLIS);
    afterAll(() => notifications?.close());

    it(
      'drills the newest READY backup and one older one when due, records both, and not again until the next is due',
      async () => {
        const shown = await coffer(['profile', 'show', 'home']);
        expect(shown.stdout).toContain('drills:      daily (the newest backup and a random older one)');

        const before = await counts([first, second]);
        const run = await coffer(['run', '--json']);
        expect(run.code, run.stderr).toBe(0);
        const outcome = JSON.parse(run.stdout) as { backupId: string; drill: { ran: boolean; backups: { backupId: string }[] } };
        const newest = outcome.backupId;
        expect(run.stderr).toContain(`drill passed for ${newest}, recorded`);
        // --json reports the drill: the newest and one older backup, both passed and recorded.
        expect(outcome.drill.ran).toBe(true);
        expect(outcome.drill.backups).toHaveLength(2);
        expect(outcome.drill.backups[0]).toEqual({ backupId: newest, result: 'passed', recorded: true });
        expect([first, second]).toContain(outcome.drill.backups[1]!.backupId);
        expect(outcome.drill.backups[1]).toMatchObject({ result: 'passed', recorded: true });
        expect((await newestVerified(newest)).result).toBe('passed');
        const after = await counts([first, second]);
        // Exactly one of the older backups was drilled besides the newest.
        expect(after[0]! + after[1]! - before[0]! - before[1]!).toBe(1);
        const state = JSON.parse(fs.readFileSync(path.join(env.XDG_STATE_HOME!, 'coffer/runs/home.json'), 'utf8')) as {
          lastDrillAt: string;
        };
        expect(Date.parse(state.lastDrillAt)).toBeGreaterThan(Date.now() - 3_600_000);

        // The next run: no backup due (30 minutes) and no drill due (daily).
        const again = await coffer(['run', '--json']);
        expect(again.code, again.stderr).toBe(0);
        expect(again.stderr).not.toContain('drill');
        expect(JSON.parse(again.stdout)).not.toHaveProperty('drill');
        expect(await counts([first, second, newest])).toEqual([...after, 1]);
      },
      SEVERAL_CLIS,
    );

    it(
      'a due drill that cannot run (no passphrase here) is reported by --json beside the backup it failed too, and stays due',
      async () => {
        const stateFile = path.join(env.XDG_STATE_HOME!, 'coffer/runs/home.json');
        const state = JSON.parse(fs.readFileSync(stateFile, 'utf8')) as Record<string, unknown>;
        const due = new Date(Date.now() - 2 * 86_400_000).toISOString();
        fs.writeFileSync(stateFile, JSON.stringify({ ...state, lastDrillAt: due }));
        // The server's clock is days behind: this CLI always finds a backup due, and it needs the passphrase too.
        const run = await runCli(['run', '--json'], { ...env, COFFER_PASSPHRASE: '' });
        expect(run.code, run.stderr).toBe(2);
        const outcome = JSON.parse(run.stdout) as { outcome: string; message: string; drill: { ran: boolean; why: string } };
        expect(outcome.outcome).toBe('failure');
        expect(outcome.drill).toEqual({ ran: false, why: outcome.message });
        expect(outcome.drill.why).toContain('COFFER_PASSPHRASE is set to nothing');
        expect(run.stderr).toContain(`restore drill of profile home not run: ${outcome.drill.why}`);
        expect((JSON.parse(fs.readFileSync(stateFile, 'utf8')) as { lastDrillAt: string }).lastDrillAt).toBe(due);
      },
      SEVERAL_CLIS,
    );

    it(
      'a failed drill is recorded and notified to the failure targets',
      async () => {
        const stateFile = path.join(env.XDG_STATE_HOME!, 'coffer/runs/home.json');
        const state = JSON.parse(fs.readFileSync(stateFile, 'utf8')) as Record<string, unknown>;
        fs.writeFileSync(stateFile, JSON.stringify({ ...state, lastDrillAt: new Date(Date.now() - 2 * 86_400_000).toISOString() }));
        const newest = state.lastBackupId as string;
        await withTampered(newest, async () => {
          const run = await coffer(['run', '--json']);
          expect(run.code, run.stderr).toBe(0);
          expect(run.stderr).toContain(`drill FAILED for ${newest}, recorded`);
          const { drill } = JSON.parse(run.stdout) as { drill: { backups: unknown[] } };
          expect(drill.backups).toContainEqual({ backupId: newest, result: 'failed', recorded: true });
        });
        expect((await newestVerified(newest)).result).toBe('failed');
        const failed = notifications.bodies.filter((body) => body.event === 'drill-failed');
        expect(failed).toEqual([expect.objectContaining({ backupId: newest, failure: 'integrity', profile: 'home' })]);
        expect(String(failed[0]!.text)).toContain(`restore drill FAILED for backup ${newest}`);
      },
      SEVERAL_CLIS,
    );
  });
});
