/**
 * The vault rolled back, through the real CLI and the console routes: with a deletion grace of 7 days (set by
 * `coffer admin accounts set-deletion-grace`), `coffer passphrase` says the previous envelope stays recoverable for
 * 7 days (and says nothing of the kind without a grace); a stolen key rotates garbage over the vault, so no
 * passphrase opens it and `coffer restore` fails; the owner restores the earlier envelope from the console and the
 * passphrase that opened it restores the backup again, byte for byte.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, envelope } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, makeTree, runCli, snapshot } from './helpers.js';

const FIRST = 'rollback passphrase one';
const SECOND = 'rollback passphrase two';

describe('vault history through the CLI', () => {
  let server: TestServer;
  let work: string;

  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer();
    work = tempDir('coffer-rollback-');
  });
  afterAll(() => server?.stop());

  async function consoleSession(accountId: string) {
    const { token } = (await server.parts.sessions.createLoginLink(accountId))!;
    const response = await fetch(`${server.url}/console/api/session`, {
      method: 'POST',
      headers: { origin: server.url, 'content-type': 'application/json' },
      body: JSON.stringify({ loginToken: token }),
    });
    const cookie = response.headers.get('set-cookie')!.split(';')[0]!;
    const { csrfToken } = (await response.json()) as { csrfToken: string };
    return async (method: string, url: string) => {
      const answer = await fetch(`${server.url}${url}`, { method, headers: { cookie, origin: server.url, 'x-csrf-token': csrfToken } });
      return { status: answer.status, body: (await answer.json()) as any };
    };
  }

  it('`coffer passphrase` tells how long the old envelope stays recoverable; a garbage rotate is rolled back from the console', async () => {
    const { apiKey, accountId } = await server.newKey({ plan: 'pro' });
    const grace = await runCli(['admin', 'accounts', 'set-deletion-grace', accountId, '7'], { COFFER_DATA_DIR: server.dataDir });
    expect(grace.code, grace.stderr).toBe(0);
    expect(grace.stdout).toContain('stay restorable for 7 days');
    const cli = cliFor(server.url, apiKey, FIRST);
    const source = path.join(work, 'source');
    await makeTree(source);
    expect((await cli(['init'])).code).toBe(0);
    const backupId = json(await cli(['backup', source, '--json'])).id as string;

    const changed = await cli(['passphrase'], { COFFER_NEW_PASSPHRASE: SECOND });
    expect(changed.code, changed.stderr).toBe(0);
    expect(changed.stdout + changed.stderr).toMatch(/keeps the previous vault envelope for 7 days/);

    // A stolen key rotates garbage over the vault: neither passphrase opens it any more.
    const stolen = api(server.url, apiKey);
    expect((await stolen('POST', '/api/backup-account/rotate', { json: envelope(0x5a) })).status).toBe(200);
    const broken = await cli(['restore', backupId, path.join(work, 'broken')], { COFFER_PASSPHRASE: SECOND });
    expect(broken.code).toBe(4);

    // The owner restores the envelope the garbage replaced (the newest kept one): SECOND opens the vault again.
    const send = await consoleSession(accountId);
    const { entries } = (await send('GET', '/console/api/vault/history')).body;
    expect(entries.map((e: { reason: string }) => e.reason)).toEqual(['rotate', 'rotate']);
    expect((await send('POST', `/console/api/vault/history/${entries[0].id}/restore`)).status).toBe(200);
    const target = path.join(work, 'restored');
    const restored = await cli(['restore', backupId, target], { COFFER_PASSPHRASE: SECOND });
    expect(restored.code, restored.stderr).toBe(0);
    expect(await snapshot(target)).toEqual(await snapshot(source));

    // And the envelope before the passphrase change: the first passphrase opens the vault again.
    const older = (await send('GET', '/console/api/vault/history')).body.entries.find(
      (e: { storedAt: string; reason: string }) => e.reason === 'rotate',
    );
    expect((await send('POST', `/console/api/vault/history/${older.id}/restore`)).status).toBe(200);
    const first = await cli(['restore', backupId, path.join(work, 'first')], { COFFER_PASSPHRASE: FIRST });
    expect(first.code, first.stderr).toBe(0);
  });

  it('without a grace `coffer passphrase` promises nothing', async () => {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const cli = cliFor(server.url, apiKey, FIRST);
    expect((await cli(['init'])).code).toBe(0);
    const changed = await cli(['passphrase'], { COFFER_NEW_PASSPHRASE: SECOND });
    expect(changed.code, changed.stderr).toBe(0);
    expect(changed.stdout + changed.stderr).not.toMatch(/previous vault envelope/);
  });
});
