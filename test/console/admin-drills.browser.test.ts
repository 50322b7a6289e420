/**
 * The operator console's view of restore drills and locked backups in headless Chromium against a real server
 * (docs/operations.md#restore-drills): the accounts list shows each account's newest drill (its age, a reported
 * failure, "never"), the account page its "Last drill" and "Locked" facts and a "Locked backups" table (a DELETED record
 * still locked included), at 1280 px and at 390 px; no attestation payload reaches the page. Accounts, backups and
 * drills go through the API (the server's clock set back for the old drill); the Object Lock dates are arranged in the
 * database (data only: s3rver and the fs store have no Object Lock).
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { lockUntil, onDatabase } from '../helpers/arrange-db.js';
import { recordDrill } from '../helpers/drills.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assertBuilt, json, runCli } from '../client/helpers.js';
import { assertConsoleBuilt, hasChromium, launchChromium } from './helpers.js';

const DAY = 24 * 3_600_000;
const CANARY = 'drill-canary-machine-93c0';

describe.skipIf(!hasChromium)("the operator console's view of restore drills and locked backups", { timeout: 240_000 }, () => {
  // The server's clock starts 10 days back (two backups of a pro account 30 minutes apart, a drill that passed), moves
  // to three days ago (a drill that reported a failure), then catches up with the real one.
  const clock = new ManualClock(Date.now() - 10 * DAY);
  let server: TestServer;
  let browser: Browser;
  const ids = { drilled: '', never: '' };
  const backups = { kept: '', deleted: '' };
  const until = { kept: 0, deleted: 0 };

  /** create → upload → finalize of `size` bytes; the id. */
  async function ready(call: ReturnType<typeof api>, size: number): Promise<string> {
    const id = (await call('POST', '/api/backups')).body.backupId as string;
    await call('POST', `/api/backups/upload?backupId=${id}`, {
      body: new Uint8Array(size),
      headers: { 'content-type': 'application/octet-stream' },
    });
    const finalized = await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(size) });
    expect(finalized.status, finalized.text).toBe(200);
    return id;
  }

  beforeAll(async () => {
    assertBuilt();
    assertConsoleBuilt();
    server = await startTestServer({ clock });
    browser = await launchChromium();
    const drilled = await server.newKey({ plan: 'pro' });
    ids.drilled = drilled.accountId;
    ids.never = (await server.newKey({ plan: 'free' })).accountId;
    const call = api(server.url, drilled.apiKey);
    expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    backups.kept = await ready(call, 1000);
    clock.advance(31 * 60_000);
    backups.deleted = await ready(call, 3000);
    expect((await call('DELETE', `/api/backups/${backups.deleted}`)).status).toBe(200);
    const backup = { id: backups.kept, accountId: ids.drilled };
    await recordDrill(call, backup, 'passed', CANARY);
    clock.advance(Date.now() - 3 * DAY - 3_600_000 - clock.now());
    await recordDrill(call, backup, 'failed', CANARY);
    clock.advance(Math.max(0, Date.now() - clock.now()));
    Object.assign(until, { kept: clock.now() + 100 * DAY, deleted: clock.now() + 200 * DAY });
    await onDatabase(server, [lockUntil(backups.kept, until.kept), lockUntil(backups.deleted, until.deleted)]);
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  async function signedIn(width: number): Promise<{ page: Page; errors: string[] }> {
    const printed = json(
      await runCli(['admin', 'login-link', '--operator', '--json'], { COFFER_DATA_DIR: server.dataDir, COFFER_PUBLIC_URL: server.url }),
    );
    const page = await browser.newPage({ viewport: { width, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(String(error)));
    await page.goto(printed.url);
    await page.getByRole('heading', { name: 'Operator console' }).waitFor();
    return { page, errors };
  }

  /** A time as the operator console writes it: "2027-03-01 10:00:00 UTC". */
  const utc = (ms: number) =>
    new Date(ms)
      .toISOString()
      .replace('T', ' ')
      .replace(/\.\d+Z$/, ' UTC');

  for (const [name, width] of [
    ['desktop', 1280],
    ['narrow', 390],
  ] as const) {
    it(`${name} (${width} px): the list's last drill per account; the account page's facts and its locked backups`, async () => {
      const { page, errors } = await signedIn(width);
      const table = page.getByTestId('accounts');
      await table.waitFor();
      const drillOf = (id: string) => table.locator(`tr[data-account="${id}"]`).getByTestId('last-drill').textContent();
      expect(await drillOf(ids.drilled)).toBe('3d ago, reported FAILED');
      expect(await drillOf(ids.never)).toBe('never');
      expect(await page.getByTestId('total-drills').textContent()).toBe('1 drilled, 0 stale, 1 reported failed');
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth)).toBe(true);

      await table.locator(`tr[data-account="${ids.drilled}"]`).getByRole('link', { name: ids.drilled }).click();
      await page.getByTestId('locked-backups').waitFor();
      expect(await page.getByTestId('last-drill').textContent()).toMatch(
        /^3d ago, reported FAILED \(.* UTC; the result as the drill reported it/,
      );
      expect(await page.getByTestId('locked').textContent()).toBe(`1 backup and 1 deleted until ${utc(until.deleted)}`);
      const rows = page.getByTestId('locked-backups').locator('tbody tr');
      expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-backup')))).toEqual([backups.deleted, backups.kept]);
      const deletedRow = await rows.nth(0).textContent();
      expect(deletedRow).toContain('DELETED');
      expect(deletedRow).toContain('2.9 KiB');
      expect(await rows.nth(1).textContent()).toContain('READY');
      expect(await page.content()).not.toContain(CANARY);
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth)).toBe(true);

      await page.goto(`${server.url}/admin/accounts/${ids.never}`);
      await page.getByText('No backup of this account is locked.').waitFor();
      expect(await page.getByTestId('last-drill').textContent()).toBe('never');
      expect(await page.getByTestId('locked').textContent()).toBe('none');
      expect(errors).toEqual([]);
      await page.close();
    });
  }
});
