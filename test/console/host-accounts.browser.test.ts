/**
 * "Add a backup host" with its own schedule, in headless Chromium against a real server and the real CLI
 * (docs/console.md "API keys", issue 25 point 2): the signed-in owner picks "Its own", names the host and types the
 * passphrase; the page makes a host account (POST /console/api/host-accounts) and shows its append-only key once with
 * the recipient derived in the page. The host then backs up with those settings right after the owner's own backup
 * (its own cadence), and the owner finds that backup under "Host accounts" and opens it. At 390 px nothing scrolls
 * sideways. Screenshots go to test-artifacts/ (not committed).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, makeTree } from '../client/helpers.js';
import { ARTIFACTS, assertConsoleBuilt, hasChromium, launchChromium } from './helpers.js';

const PASSPHRASE = 'host account console passphrase';

describe.skipIf(!hasChromium)('the console adds a backup host with its own schedule (a host account)', { timeout: 180_000 }, () => {
  let server: TestServer;
  let browser: Browser;
  let accountId: string;
  let apiKey: string;
  let source: string;
  let recipient: string;
  let ownBackup: string;
  const pageErrors: string[] = [];

  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `host-account-${name}.png`), fullPage: true });

  async function signedIn(width: number): Promise<Page> {
    const context = await browser.newContext({ viewport: { width, height: 844 } });
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    const { token } = (await server.parts.sessions.createLoginLink(accountId))!;
    await page.goto(`${server.url}/console/login#token=${token}`);
    await page.getByRole('heading', { level: 1, name: 'Backups' }).waitFor();
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    return page;
  }

  beforeAll(async () => {
    assertBuilt();
    assertConsoleBuilt();
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    server = await startTestServer();
    ({ apiKey, accountId } = await server.newKey({ plan: 'pro' }));
    source = path.join(tempDir('coffer-host-account-console-'), 'site');
    await makeTree(source);
    const owner = cliFor(server.url, apiKey, PASSPHRASE);
    expect((await owner(['init'])).code).toBe(0);
    ({ recipient } = json<{ recipient: string }>(await owner(['recipient', '--json'])));
    const own = await owner(['backup', source, '--json']); // the owner's cadence is now taken for 30 minutes
    expect(own.code, own.stderr).toBe(0);
    ownBackup = json<{ id: string }>(own).id;
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  it('makes a host account with the same vault; the host backs up at once and the owner opens its backup', async () => {
    const page = await signedIn(1280);
    await page.getByText('No host accounts yet').waitFor();
    await page.getByLabel(/Its own/).check();
    // A name that is not one makes nothing.
    await page.getByLabel('Host name').fill('web; rm -rf');
    await page.getByRole('button', { name: 'Add backup host' }).click();
    await page.getByText(/Nothing was made: name the host/).waitFor();
    expect(await server.parts.stores.accounts.listHostAccounts(accountId)).toEqual([]);

    await page.getByLabel('Host name').fill('web');
    await page.getByLabel('Vault passphrase (optional)').fill(PASSPHRASE);
    await page.getByRole('button', { name: 'Add backup host' }).click();
    const settings = page.getByLabel('Host settings');
    await settings.waitFor();
    const text = await settings.inputValue();
    const value = (name: string) => new RegExp(`^export ${name}='([^']*)'$`, 'm').exec(text)?.[1];
    expect(value('COFFER_URL')).toBe(server.url);
    expect(value('COFFER_RECIPIENT')).toBe(recipient);
    const hostKey = value('COFFER_API_KEY')!;
    expect(hostKey).toMatch(/^cfk_[A-Za-z0-9_-]{43}$/);
    const [hostAccount] = await server.parts.stores.accounts.listHostAccounts(accountId);
    expect(hostAccount).toMatchObject({ ownerAccountId: accountId, label: 'web', plan: 'pro' });
    expect(await page.getByTestId('host-account-made').innerText()).toMatch(/host account web .*one backup every 30m on the pro plan/s);
    await shot(page, 'made-desktop');

    // The host, with exactly those settings, backs up now: the owner's backup a moment ago does not hold it back.
    const host = cliFor(server.url, hostKey, undefined);
    const made = await host(['backup', source, '--json'], { COFFER_RECIPIENT: recipient });
    expect(made.code, made.stderr).toBe(0);
    const hostBackup = json<{ id: string }>(made).id;

    await page.getByRole('button', { name: 'I have stored it' }).click();
    expect(await page.locator('main').innerText()).not.toContain(hostKey);
    await page.reload();
    const entry = page.locator(`[data-host-account="${hostAccount!.id}"]`);
    await entry.locator(`[data-backup-id="${hostBackup}"]`).waitFor();
    expect(await entry.innerText()).toMatch(/web[\s\S]*every 30m[\s\S]*Same vault as yours[\s\S]*1 backup/);
    await shot(page, 'listed-desktop');
    await entry.getByRole('link', { name: /of web, open details/ }).click();
    await page.getByRole('heading', { level: 1, name: /Backup/ }).waitFor();
    expect(page.url()).toContain(hostBackup);

    // The Backups page lists the host account's backup with the owner's own, marked with its host, as `coffer list`
    // does; the owner's own carries no mark.
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Backups' }).click();
    const hostRow = page.locator(`tr[data-backup-id="${hostBackup}"]`);
    await hostRow.waitFor();
    expect(await hostRow.getByTestId('host-badge').textContent()).toBe('host web');
    expect(await page.locator(`tr[data-backup-id="${ownBackup}"]`).getByTestId('host-badge').count()).toBe(0);
    expect(await page.locator('tr[data-backup-id]').count()).toBe(2);
    expect(await page.locator('.lede').innerText()).toContain('2 backups (1 of your host accounts)');
    // Unlocked in the page, the host's backup shows its sealed name too (the same vault).
    await page.getByLabel('Vault passphrase').fill(PASSPHRASE);
    await page.getByRole('button', { name: 'Show keys' }).click();
    expect(await hostRow.getByTestId('backup-name').innerText()).toBe(`site from ${source}`);
    await shot(page, 'backups-desktop');
    await page.context().close();
  });

  it('at 390 px the form and the host accounts fit without sideways scroll', async () => {
    const page = await signedIn(390);
    await page.getByLabel(/Its own/).check();
    await page.getByLabel('Host name').waitFor();
    await page.locator('[data-host-account]').first().waitFor();
    await page.waitForLoadState('networkidle');
    const { scrollWidth, innerWidth } = await page.evaluate(() => ({
      scrollWidth: document.scrollingElement!.scrollWidth,
      innerWidth: window.innerWidth,
    }));
    expect(scrollWidth).toBeLessThanOrEqual(innerWidth);
    await shot(page, '390');
    await page.context().close();
    expect(pageErrors).toEqual([]);
  });
});
