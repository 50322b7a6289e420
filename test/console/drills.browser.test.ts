/**
 * Restore drills in the owner's console (docs/console.md#restore-drills, issue 39 points 3 and 5), in headless
 * Chromium against a real server and the real CLI: the owner backs up `photos`, a host account of its own (`web`)
 * backs up `mail`. Attestations are made with the vault's current key (signAttestation, key_0 of the ring, unwrapped
 * here with the passphrase) and recorded with the owner's API key (POST /api/backups/{id}/attestations), as a drill
 * does. Hostile ones are recorded the same way: one whose payload was re-encoded with another time (the mac kept),
 * one with a random mac. The server cannot be made to show other facts than it was sent through its API, so the
 * hostile server's mismatch is arranged in its database: an authentic failed drill's row is changed to `passed`.
 *
 * Before unlock nothing is proven; after unlock the genuine drills are verified and give "last proven restorable",
 * the altered and forged ones are flagged "forged or altered" and the relabelled one "other facts than were signed",
 * none counted; a 40-day-old proof is warned at the default 14 days and not at 90 (remembered in localStorage). A
 * restore on the host backup's page verifies its attestations in the worker. Screenshots go to test-artifacts/.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signAttestation, type DrillOutcome } from '../../src/client/attestation.js';
import { masterKeys, nodePrimitives, unwrapMasterKey, wipe } from '../../src/client/envelope.js';
import { onDatabase } from '../helpers/arrange-db.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, makeTree } from '../client/helpers.js';
import { ARTIFACTS, assertConsoleBuilt, hasChromium, launchChromium, signInWithKey } from './helpers.js';

const PASSPHRASE = 'drills console passphrase';
const DAY = 86_400_000;

describe.skipIf(!hasChromium)('the console verifies restore drills after unlock', { timeout: 240_000 }, () => {
  let server: TestServer;
  let browser: Browser;
  let accountId: string;
  let apiKey: string;
  let hostAccountId: string;
  let ownBackup: string;
  let hostBackup: string;
  let masterKey: Buffer;
  const ids: Record<string, string> = {};
  const pageErrors: string[] = [];

  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `drills-${name}.png`), fullPage: true });

  const outcome = (backupId: string, owner: string, checkedAt: number, failure: string | null = null): DrillOutcome => ({
    accountId: owner,
    backupId,
    checkedAt: new Date(checkedAt),
    result: failure ? 'failed' : 'passed',
    failure,
    checks: failure
      ? ['download', 'decrypt', 'decompress', 'archive', 'sizes']
      : ['download', 'decrypt', 'decompress', 'archive', 'sizes', 'sha256'],
    ciphertextSizeBytes: 1234,
    ciphertextSha256: 'ab'.repeat(32),
    plaintextSizeBytes: 4321,
    fileCount: 7,
    drilledBy: { machine: 'drill-box', client: 'coffer-cli/test' },
  });

  /** Records an attestation as a drill does: POST with the owner's API key (backups:read); the stored id. */
  async function record(backupId: string, body: { payload: string; mac: string }): Promise<string> {
    const response = await fetch(`${server.url}/api/backups/${backupId}/attestations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const answer = (await response.json()) as { id: string };
    expect(response.status, JSON.stringify(answer)).toBe(201);
    return answer.id;
  }

  /** The same payload with other members (its mac kept): what an altered attestation is. */
  const altered = (body: { payload: string; mac: string }, change: Record<string, unknown>) => ({
    payload: Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(body.payload, 'base64').toString('utf8')), ...change })).toString(
      'base64',
    ),
    mac: body.mac,
  });

  async function signedIn(width = 1280): Promise<Page> {
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    const { token } = (await server.parts.sessions.createLoginLink(accountId))!;
    await page.goto(`${server.url}/console/login#token=${token}`);
    await page.getByRole('heading', { level: 1, name: 'Backups' }).waitFor();
    return page;
  }

  const openDrills = async (page: Page) => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Restore drills' }).click();
    await page.getByRole('heading', { level: 1, name: 'Restore drills' }).waitFor();
  };

  const unlockDrills = async (page: Page) => {
    await page.getByLabel('Vault passphrase').fill(PASSPHRASE);
    await page.getByRole('button', { name: 'Check drills' }).click();
    await page.getByTestId('drill-profiles').waitFor();
  };

  const profileRow = (page: Page, host: string) => page.locator(`[data-testid="drill-profiles"] tr[data-host="${host}"]`);

  beforeAll(async () => {
    assertBuilt();
    assertConsoleBuilt();
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    server = await startTestServer();
    ({ apiKey, accountId } = await server.newKey({ plan: 'pro' }));
    const work = tempDir('coffer-drills-console-');
    const photos = path.join(work, 'photos');
    const mail = path.join(work, 'mail');
    await makeTree(photos);
    await makeTree(mail);
    const owner = cliFor(server.url, apiKey, PASSPHRASE);
    expect((await owner(['init'])).code).toBe(0);
    const { recipient } = json<{ recipient: string }>(await owner(['recipient', '--json']));
    ownBackup = json<{ id: string }>(await owner(['backup', photos, '--json'])).id;

    // A host account with its own schedule (the console's own route), backing up with the recipient only.
    const session = await signInWithKey(server.url, apiKey);
    const made = await fetch(`${server.url}/console/api/host-accounts`, {
      method: 'POST',
      headers: { cookie: session.cookie, 'x-csrf-token': session.csrf, origin: server.url, 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'web', expiresInDays: null }),
    });
    const host = (await made.json()) as { accountId: string; apiKey: string };
    expect(made.status, JSON.stringify(host)).toBe(201);
    hostAccountId = host.accountId;
    const hostCli = cliFor(server.url, host.apiKey, undefined);
    hostBackup = json<{ id: string }>(await hostCli(['backup', mail, '--json'], { COFFER_RECIPIENT: recipient })).id;

    const account = await (await fetch(`${server.url}/api/backup-account`, { headers: { authorization: `Bearer ${apiKey}` } })).json();
    const material = await unwrapMasterKey(account, PASSPHRASE);
    masterKey = Buffer.from(masterKeys(material)[0]!);
    wipe(material);

    const now = Date.now();
    const sign = (backupId: string, owner: string, daysAgo: number, failure: string | null = null) =>
      signAttestation(nodePrimitives, masterKey, outcome(backupId, owner, now - daysAgo * DAY, failure));
    // The owner's photos: proven 3 days ago, a failed drill yesterday, and two that must not count (newer than both).
    const proven = sign(ownBackup, accountId, 3);
    ids.proven = await record(ownBackup, proven);
    ids.failed = await record(ownBackup, sign(ownBackup, accountId, 1, "the archive's SHA-256 does not match"));
    ids.altered = await record(ownBackup, altered(proven, { checkedAt: new Date(now - 3_600_000).toISOString() }));
    ids.forged = await record(ownBackup, {
      payload: altered(proven, { checkedAt: new Date(now - 600_000).toISOString() }).payload,
      mac: randomBytes(32).toString('base64'),
    });
    // The host's mail: proven 40 days ago only; a failed drill 2 days ago that a hostile server shows as passed.
    ids.old = await record(hostBackup, sign(hostBackup, hostAccountId, 40));
    ids.relabelled = await record(hostBackup, sign(hostBackup, hostAccountId, 2, 'the download failed'));
    await onDatabase(server, [["UPDATE restore_attestations SET result = 'passed' WHERE id = ?", [ids.relabelled]]]);
    browser = await launchChromium();
  });

  afterAll(async () => {
    masterKey?.fill(0);
    await browser?.close();
    await server?.stop();
  });

  it('before unlock shows nothing as proven; after unlock the Backups list shows each backup’s newest verified drill and flags the rest', async () => {
    const page = await signedIn();
    const ownRow = page.locator(`tr[data-backup-id="${ownBackup}"]`);
    const hostRow = page.locator(`tr[data-backup-id="${hostBackup}"]`);
    await hostRow.waitFor();
    expect(await ownRow.locator('td[data-label="Restore drill"]').innerText()).toBe('Checked after unlock');
    expect(await page.locator('main').innerText()).not.toContain('Proven restorable');

    await openDrills(page);
    expect(await page.getByTestId('drill-profiles').count()).toBe(0);
    expect(await page.locator('main').innerText()).toContain('Attestations are checked after the vault is unlocked');
    await unlockDrills(page);
    await shot(page, 'page-desktop');

    // Back on the list (the keys were dropped, the verdicts kept in the page's memory).
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Backups' }).click();
    await ownRow.getByTestId('drill-cell').waitFor();
    // The newest verified drill of photos is yesterday's failure; the altered and forged ones (newer) are not counted.
    expect(await ownRow.getByTestId('drill-cell').locator('[data-drill-result]').getAttribute('data-drill-result')).toBe('failed');
    expect(await ownRow.getByTestId('drill-cell').innerText()).toMatch(/^Drill failed\s+1 day ago\s+2 attestations do not verify$/);
    expect(await hostRow.getByTestId('drill-cell').innerText()).toMatch(
      /^Proven restorable\s+40 days ago\s+1 attestation does not verify$/,
    );
    await shot(page, 'backups-desktop');
    await page.context().close();
  });

  it('per host and profile: last proven restorable, the failed drill, flags, and the age warning (chosen, remembered)', async () => {
    const page = await signedIn();
    await openDrills(page);
    expect(await page.locator('#drill-max-age').inputValue()).toBe('14');
    await unlockDrills(page);
    const own = profileRow(page, '');
    const web = profileRow(page, 'web');
    expect(await page.locator('[data-testid="drill-profiles"] tbody tr').count()).toBe(2);

    expect(await own.getAttribute('data-drill-standing')).toBe('proven');
    expect(await own.locator('td[data-label="Profile"]').innerText()).toMatch(/^photos from .*\/photos$/);
    expect(await own.getByTestId('last-proven').innerText()).toMatch(/\(3 days ago\)$/);
    expect(await own.getByTestId('drill-failed').innerText()).toContain("Drill failed 1 day ago the archive's SHA-256 does not match");
    expect(await own.getByTestId('drill-flagged').innerText()).toBe('2 attestations do not verify');

    expect(await web.getAttribute('data-drill-standing')).toBe('stale');
    expect(await web.locator('td[data-label="Host"]').innerText()).toBe('host web');
    expect(await web.locator('td[data-label="Profile"]').innerText()).toMatch(/^mail from .*\/mail$/);
    expect(await web.getByTestId('last-proven').innerText()).toMatch(/\(40 days ago\) Older than 14 days$/);
    expect(await web.getByTestId('drill-flagged').innerText()).toBe('1 attestation does not verify');
    expect(await page.getByTestId('drill-summary').innerText()).toContain('1 profile has no passed drill in the last 14 days');
    await shot(page, 'stale-desktop');

    await page.locator('#drill-max-age').selectOption('90');
    expect(await web.getAttribute('data-drill-standing')).toBe('proven');
    expect(await web.getByTestId('drill-warning').count()).toBe(0);
    expect(await page.getByTestId('drill-summary').innerText()).toBe('Every profile was proven restorable in the last 90 days.');
    await page.locator('#drill-max-age').selectOption('30');
    expect(await web.getByTestId('drill-warning').innerText()).toBe('Older than 30 days');

    // Remembered in this browser; a reload drops the verdicts with the page's memory: nothing is proven until unlocked.
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Restore drills' }).waitFor();
    expect(await page.locator('#drill-max-age').inputValue()).toBe('30');
    expect(await page.getByTestId('drill-profiles').count()).toBe(0);
    await page.context().close();
  });

  it('at 390 px the drills page fits without sideways scroll', async () => {
    const page = await signedIn(390);
    await openDrills(page);
    await unlockDrills(page);
    const { scrollWidth, innerWidth } = await page.evaluate(() => ({
      scrollWidth: document.scrollingElement!.scrollWidth,
      innerWidth: window.innerWidth,
    }));
    await shot(page, '390');
    expect(scrollWidth).toBeLessThanOrEqual(innerWidth);
    await page.context().close();
  });

  it('the Backup page lists each attestation: verified ones with what they checked, forged, altered and relabelled ones flagged', async () => {
    const page = await signedIn();
    await openDrills(page);
    await unlockDrills(page);
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Backups' }).click();
    await page.locator(`tr[data-backup-id="${ownBackup}"] a`).first().click();
    const panel = page.getByTestId('backup-drills');
    await panel.waitFor();
    const entry = (id: string) => panel.locator(`[data-attestation-id="${id}"]`);
    expect(await entry(ids.proven!).getAttribute('data-drill-status')).toBe('verified');
    expect(await entry(ids.proven!).innerText()).toMatch(/Proven restorable\s+3 days ago.*drill-box.*coffer-cli\/test.*sha256 passed/s);
    expect(await entry(ids.failed!).getAttribute('data-drill-status')).toBe('verified');
    expect(await entry(ids.failed!).innerText()).toContain("failed: the archive's SHA-256 does not match");
    for (const id of [ids.altered!, ids.forged!]) {
      expect(await entry(id).getAttribute('data-drill-status')).toBe('forged');
      expect(await entry(id).innerText()).toContain('This attestation does not verify: forged or altered. Not counted as proof.');
    }
    expect(await panel.getByTestId('backup-last-proven').innerText()).toMatch(/\(3 days ago\)\.$/);
    await shot(page, 'backup-desktop');
    await page.context().close();
  });

  it('a restore on the host backup’s page verifies its attestations in the worker: the relabelled one is a mismatch', async () => {
    const page = await signedIn();
    await page.goto(`${server.url}/console/backups/${hostBackup}`);
    const panel = page.getByTestId('backup-drills');
    await panel.waitFor();
    expect(await panel.innerText()).toContain('until then nothing is shown as proven');
    await page.getByLabel('Vault passphrase').fill(PASSPHRASE);
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Decrypt and save' }).click();
    await download;
    const relabelled = panel.locator(`[data-attestation-id="${ids.relabelled}"]`);
    await relabelled.waitFor();
    expect(await relabelled.getAttribute('data-drill-status')).toBe('mismatch');
    expect(await relabelled.innerText()).toContain('The server shows other facts than were signed. Not counted as proof.');
    expect(await relabelled.innerText()).toContain('The server shows it as a passed drill');
    expect(await panel.locator(`[data-attestation-id="${ids.old}"]`).getAttribute('data-drill-status')).toBe('verified');
    expect(await panel.getByTestId('backup-last-proven').innerText()).toMatch(/\(40 days ago\)\.$/);
    await shot(page, 'host-backup-desktop');
    await page.context().close();
    expect(pageErrors).toEqual([]);
  });
});
