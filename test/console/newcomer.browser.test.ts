/**
 * The console as a newcomer meets it (issue 25, points 14-16), in headless Chromium against a real server and the
 * real CLI: with a deletion grace the backup page says what a delete will do and the list confirms it, never showing
 * "No backups yet." while a backup can be undeleted; unlocking the vault in the page shows each backup's sealed name
 * and source; a key made with a label is listed and named in the activity trail; and at 390 px no page scrolls
 * sideways. Screenshots (desktop and 390 px) go to test-artifacts/ (not committed).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, makeTree, runCli } from '../client/helpers.js';
import { ARTIFACTS, assertConsoleBuilt, hasChromium, launchChromium } from './helpers.js';

const PASSPHRASE = 'newcomer passphrase 2026';

describe.skipIf(!hasChromium)('the console for a newcomer (deletion grace, sealed names, key labels, 390 px)', () => {
  let server: TestServer;
  let browser: Browser;
  let accountId: string;
  let apiKey: string;
  let source: string;
  let backupId: string;
  const pageErrors: string[] = [];

  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `newcomer-${name}.png`), fullPage: true });

  /** A page signed in with a fresh one-time link, at the given width. */
  async function signedIn(width: number): Promise<Page> {
    const context = await browser.newContext({ viewport: { width, height: 844 } });
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    const { token } = (await server.parts.sessions.createLoginLink(accountId))!;
    await page.goto(`${server.url}/console/login#token=${token}`);
    await page.getByRole('heading', { level: 1, name: 'Backups' }).waitFor();
    return page;
  }

  beforeAll(async () => {
    assertBuilt();
    assertConsoleBuilt();
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    server = await startTestServer();
    ({ apiKey, accountId } = await server.newKey({ plan: 'pro' }));
    const work = tempDir('coffer-newcomer-');
    source = path.join(work, 'holiday-photos');
    await makeTree(source);
    const cli = cliFor(server.url, apiKey, PASSPHRASE);
    const init = await cli(['init']);
    expect(init.code, init.stderr).toBe(0);
    const made = await cli(['backup', source, '--json']);
    expect(made.code, made.stderr).toBe(0);
    backupId = json(made).id;
    const grace = await runCli(['admin', 'accounts', 'set-deletion-grace', accountId, '7'], { COFFER_DATA_DIR: server.dataDir });
    expect(grace.code, grace.stderr).toBe(0);
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("unlocking the vault in the page shows each backup's sealed name and source (decrypted there)", async () => {
    const page = await signedIn(1280);
    const row = page.locator(`tr[data-backup-id="${backupId}"]`);
    await row.waitFor();
    expect(await row.getByTestId('backup-name').count()).toBe(0); // sealed until unlocked
    await page.getByLabel('Vault passphrase').fill(PASSPHRASE);
    await page.getByRole('button', { name: 'Show keys' }).click();
    const name = row.getByTestId('backup-name');
    await name.waitFor();
    expect(await name.innerText()).toBe(`holiday-photos from ${source}`);
    await shot(page, 'backups-unlocked-desktop');
    await row.locator('a').first().click();
    await page.getByRole('heading', { level: 1, name: /Backup/ }).waitFor();
    expect(await page.getByTestId('backup-name').innerText()).toBe(`holiday-photos from ${source}`);
    // READY once, in the badge: not "READY Ready".
    expect(await page.locator('.facts').innerText()).not.toMatch(/READY\s+Ready/);
    await page.context().close();
  });

  it('with a deletion grace, the backup page says what a delete does; the list confirms it and offers Undelete, never "No backups yet."', async () => {
    const page = await signedIn(1280);
    await page.goto(`${server.url}/console/backups/${backupId}`);
    const words = page.getByTestId('delete-words');
    await words.filter({ hasText: 'restorable' }).waitFor();
    expect(await words.innerText()).toContain('keeps it restorable for 7 days');
    expect(await words.innerText()).not.toContain('for good, at once');
    expect(await page.getByRole('heading', { level: 2, name: 'Restore files' }).count()).toBe(1);
    await shot(page, 'backup-delete-desktop');
    await page.getByRole('button', { name: 'Delete this backup…' }).click();
    await page.getByRole('button', { name: 'Yes, delete it' }).click();
    await page.getByRole('heading', { level: 1, name: 'Backups' }).waitFor();
    const flash = page.getByTestId('flash');
    await flash.waitFor();
    expect(await flash.innerText()).toContain('stays restorable for 7 days');
    const scheduled = page.locator(`tr[data-scheduled-id="${backupId}"]`);
    await scheduled.waitFor();
    await page.getByText('1 deleted backup can still be undeleted below.').waitFor();
    expect(await page.getByText('No backups yet.').count()).toBe(0);
    await shot(page, 'backups-after-delete-desktop');
    await scheduled.getByRole('button', { name: /^Undelete backup/ }).click();
    await page.locator(`tr[data-backup-id="${backupId}"] [data-status="READY"]`).waitFor();
    await page.context().close();
  });

  it('a key made with a label is listed with it and named in the activity trail', async () => {
    const page = await signedIn(1280);
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    await page.getByLabel(/^Label/).fill('<b>bad</b>');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByText(/No key was made: a label holds letters/).waitFor();
    await page.getByLabel(/^Label/).fill("Anna's laptop");
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByLabel('API key', { exact: true }).waitFor();
    const listed = page.locator('tr[data-key-id]', { hasText: "Anna's laptop" });
    await listed.waitFor();
    await shot(page, 'keys-label-desktop');
    await page.getByRole('link', { name: 'Activity' }).click();
    const made = page.locator('tr[data-action="key.create"]').first();
    await made.waitFor();
    expect(await made.innerText()).toContain("Anna's laptop");
    await shot(page, 'activity-desktop');
    await page.context().close();
  });

  it('at 390 px wide no page scrolls sideways (navigation wraps, code blocks stay inside)', async () => {
    const page = await signedIn(390);
    const pages: [string, string | RegExp][] = [
      ['', 'Backups'],
      [`/backups/${backupId}`, /Backup/],
      ['/drills', 'Restore drills'],
      ['/plan', 'Plan and cadence'],
      ['/vault', 'Vault'],
      ['/recover', /Recover/],
      ['/keys', 'API keys'],
      ['/activity', 'Activity'],
      ['/cli', 'Coffer CLI'],
      ['/self-test', /./],
      ['/no-such-page', 'Page not found'],
    ];
    const wide: string[] = [];
    for (const [at, heading] of pages) {
      await page.goto(`${server.url}/console${at}`);
      await page.getByRole('heading', { level: 1, name: heading }).first().waitFor();
      if (at === '/cli') await page.getByLabel('Install command').waitFor();
      if (at === '') await page.locator('tr[data-backup-id]').first().waitFor();
      await page.waitForLoadState('networkidle');
      const { scrollWidth, innerWidth } = await page.evaluate(() => ({
        scrollWidth: document.scrollingElement!.scrollWidth,
        innerWidth: window.innerWidth,
      }));
      if (scrollWidth > innerWidth) wide.push(`${at || '/'}: ${scrollWidth} > ${innerWidth}`);
      // Code blocks wrap: nothing in them is cut off behind a scroll bar of their own.
      const cut = await page.locator('pre').evaluateAll((blocks) => blocks.filter((b) => b.scrollWidth > b.clientWidth).length);
      if (cut > 0) wide.push(`${at || '/'}: ${cut} code block(s) cut off`);
      await shot(page, `390-${at.startsWith('/backups/') ? 'backup' : at.slice(1) || 'backups'}`);
    }
    expect(wide).toEqual([]);
    // Every navigation link is inside the viewport (none cut off or out of sight).
    const links = await page.getByRole('navigation', { name: 'Console' }).getByRole('link').all();
    expect(links).toHaveLength(7);
    for (const link of links) {
      const box = (await link.boundingBox())!;
      expect(box.x).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width).toBeLessThanOrEqual(390);
    }
    await page.context().close();

    // The same pages on a desktop (screenshots of the changed pages; nothing scrolls sideways there either).
    const desktop = await signedIn(1280);
    for (const [at, heading] of pages) {
      await desktop.goto(`${server.url}/console${at}`);
      await desktop.getByRole('heading', { level: 1, name: heading }).first().waitFor();
      if (at === '/cli') await desktop.getByLabel('Install command').waitFor();
      await desktop.waitForLoadState('networkidle');
      expect(await desktop.evaluate(() => document.scrollingElement!.scrollWidth <= window.innerWidth)).toBe(true);
      await shot(desktop, `desktop-${at.startsWith('/backups/') ? 'backup' : at.slice(1) || 'backups'}`);
    }
    await desktop.context().close();
    expect(pageErrors).toEqual([]);
  }, 180_000);
});
