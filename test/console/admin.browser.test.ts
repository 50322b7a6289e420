/**
 * The operator console in headless Chromium against a real server (docs/operations.md#operator-console): signs in with
 * a link printed by the real `coffer admin login-link --operator`, sees the accounts table with the overdue account
 * first, changes a plan and revokes a key on the account page, at desktop width and at 390 px (no sideways scroll),
 * and no script error on the page from sign-in to the last step.
 * Screenshots go to COFFER_SHOTS (default test-artifacts/).
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assertBuilt, json, runCli } from '../client/helpers.js';
import { ARTIFACTS, assertConsoleBuilt, hasChromium, launchChromium } from './helpers.js';

const SHOTS = process.env.COFFER_SHOTS ?? ARTIFACTS;

describe.skipIf(!hasChromium)('the operator console in a browser', () => {
  let server: TestServer;
  let browser: Browser;
  const DAY = 86_400_000;
  // Accounts made 3 days back that never backed up: overdue (counted from creation). The clock then catches up with
  // the real one, which the CLI's links use.
  const clock = new ManualClock(Date.now() - 3 * DAY);
  const late: Record<string, { accountId: string; keyId: string }> = {};

  beforeAll(async () => {
    assertBuilt();
    assertConsoleBuilt();
    await fsp.mkdir(SHOTS, { recursive: true });
    server = await startTestServer({ clock });
    for (const name of ['desktop', 'narrow']) late[name] = await server.newKey({ plan: 'free' });
    clock.advance(3 * DAY);
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  /** The errors each page has thrown so far: every test checks them at its end, not only after signing in. */
  const pageErrors = new Map<Page, string[]>();

  async function signedIn(width: number): Promise<Page> {
    const printed = json(
      await runCli(['admin', 'login-link', '--operator', '--json'], { COFFER_DATA_DIR: server.dataDir, COFFER_PUBLIC_URL: server.url }),
    );
    const page = await browser.newPage({ viewport: { width, height: 900 } });
    const errors: string[] = [];
    pageErrors.set(page, errors);
    page.on('pageerror', (error) => errors.push(String(error)));
    await page.goto(printed.url);
    await page.getByRole('heading', { name: 'Operator console' }).waitFor();
    expect(new URL(page.url()).hash).toBe(''); // the token left the address bar
    expect(errors).toEqual([]);
    return page;
  }

  const noSideways = async (page: Page) =>
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth)).toBe(true);

  for (const [name, width] of [
    ['desktop', 1280],
    ['narrow', 390],
  ] as const) {
    it(`${name} (${width} px): the table, a plan change and a key revocation`, async () => {
      // A fresh account that has backed up nothing is not overdue yet.
      const fresh = await server.newKey({ plan: 'plus' });
      const mine = late[name]!;

      const page = await signedIn(width);
      const table = page.getByTestId('accounts');
      await table.waitFor();
      const first = table.locator('tbody tr').first();
      expect(Object.values(late).map((a) => a.accountId)).toContain(await first.getAttribute('data-account'));
      expect(await first.textContent()).toContain('overdue');
      expect(await table.locator(`tr[data-account="${fresh.accountId}"]`).textContent()).not.toContain('overdue');
      expect(await table.locator(`tr[data-account="${fresh.accountId}"]`).textContent()).toContain('plus');
      await noSideways(page);
      await page.screenshot({ path: path.join(SHOTS, `admin-${name}-accounts.png`), fullPage: true });

      await table.locator(`tr[data-account="${mine.accountId}"] a`).click();
      await page.getByTestId('plan').waitFor();
      const form = (button: string) => page.locator('form.admin-inline').filter({ has: page.getByRole('button', { name: button }) });
      await form('Change plan').locator('select').selectOption('pro');
      await page.getByRole('button', { name: 'Change plan' }).click();
      await page.getByText('The plan is now pro.').waitFor();
      expect(await page.getByTestId('plan').textContent()).toBe('pro');
      expect((await server.parts.stores.accounts.getAccount(mine.accountId))!.plan).toBe('pro');

      // The quota: the account's own in bytes, shown with where it comes from, and audited.
      expect(await page.getByTestId('quota').textContent()).toBe("none (the plan's)");
      await form('Set quota').locator('select').selectOption('bytes');
      await form('Set quota').locator('input[type=number]').fill('2000000');
      await page.getByRole('button', { name: 'Set quota' }).click();
      await page.getByText('The quota is now 1.9 MiB.').waitFor();
      expect(await page.getByTestId('quota').textContent()).toBe('1.9 MiB (this account’s own)');
      expect((await server.parts.stores.accounts.getAccount(mine.accountId))!.quotaOverride).toBe(2_000_000);
      await page.getByTestId('audit').getByText('account.quota').waitFor();

      // A revoked key cannot come back: the first click only asks; Cancel keeps the key.
      const keyRow = page.locator(`tr[data-key="${mine.keyId}"]`);
      await keyRow.getByRole('button', { name: `Revoke key ${mine.keyId}` }).click();
      await keyRow.getByRole('group', { name: `Confirm revoking key ${mine.keyId}` }).waitFor();
      expect(server.parts.keys.status((await server.parts.stores.keys.getApiKey(mine.keyId))!)).toBe('active');
      await keyRow.getByRole('button', { name: 'Cancel' }).click();
      expect(server.parts.keys.status((await server.parts.stores.keys.getApiKey(mine.keyId))!)).toBe('active');
      await keyRow.getByRole('button', { name: `Revoke key ${mine.keyId}` }).click();
      await keyRow.getByRole('button', { name: 'Revoke now' }).click();
      await page.getByText(`Key ${mine.keyId} revoked.`).waitFor();
      expect(server.parts.keys.status((await server.parts.stores.keys.getApiKey(mine.keyId))!)).toBe('revoked');
      await page.getByTestId('audit').getByText('account.plan').waitFor();
      expect(await page.getByTestId('audit').textContent()).toContain('operator');
      await noSideways(page);
      await page.screenshot({ path: path.join(SHOTS, `admin-${name}-account.png`), fullPage: true });
      expect(pageErrors.get(page)).toEqual([]);
      await page.close();
    });
  }

  it('labels: set by the operator, searched, shown with whose host account is whose, key labels and the quota column', async () => {
    const admin = async (args: string[]) => json(await runCli(['admin', ...args, '--json'], { COFFER_DATA_DIR: server.dataDir }));
    const owner = await server.newKey({ plan: 'plus' });
    const b64 = (n: number) => Buffer.alloc(n, 3).toString('base64');
    const bootstrapped = await fetch(`${server.url}/api/backup-account/bootstrap`, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        cryptoVersion: 'v1',
        kdf: { salt: b64(16), opslimit: 2, memlimit: 8192 },
        wrappedMasterKey: b64(48),
        wrappedMasterKeyNonce: b64(24),
      }),
    });
    expect(bootstrapped.ok).toBe(true);
    const host = (await admin(['accounts', 'add-host', owner.accountId, '--label', 'web'])) as { accountId: string };
    await admin(['accounts', 'set-label', owner.accountId, 'ACME corp']);
    const laptop = (await admin(['keys', 'create', '--account', owner.accountId, '--label', 'laptop'])) as { keyId: string };
    await admin(['accounts', 'set-quota', owner.accountId, '3000000']);

    const page = await signedIn(1280);
    const table = page.getByTestId('accounts');
    await table.waitFor();
    await page.getByLabel('Search label or id').fill('acme');
    // The owner by its label, and its host account by its owner's label, nothing else.
    await expect
      .poll(async () => (await table.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-account')))).sort())
      .toEqual([owner.accountId, host.accountId].sort());
    const ownerRow = table.locator(`tr[data-account="${owner.accountId}"]`);
    expect(await ownerRow.innerText()).toContain('ACME corp');
    expect(await ownerRow.locator('[data-label="Quota"]').innerText()).toBe('2.9 MiB (own)');
    expect(await table.locator(`tr[data-account="${host.accountId}"]`).getByTestId('host-of').innerText()).toMatch(
      /^\s*host “web” of ACME corp$/,
    );
    await page.getByLabel('Search label or id').fill('web');
    await expect.poll(() => table.locator('tbody tr').count()).toBe(1);
    await page.screenshot({ path: path.join(SHOTS, 'admin-desktop-labels.png'), fullPage: true });

    await table.locator(`tr[data-account="${host.accountId}"]`).getByRole('link', { name: host.accountId }).click();
    await page.getByTestId('owner').waitFor();
    expect(await page.getByTestId('owner').innerText()).toContain('ACME corp');

    await page.goto(`${server.url}/admin/accounts/${owner.accountId}`);
    await page.getByTestId('hosts').waitFor();
    expect(await page.getByTestId('hosts').innerText()).toContain(`“web”: ${host.accountId}`);
    expect(await page.locator(`tr[data-key="${laptop.keyId}"]`).innerText()).toContain('laptop');
    await page.getByRole('textbox', { name: 'Label' }).fill('ACME Corporation');
    await page.getByRole('button', { name: 'Set label' }).click();
    await page.getByText('The label is now “ACME Corporation”.').waitFor();
    expect((await server.parts.stores.accounts.getAccount(owner.accountId))!.operatorLabel).toBe('ACME Corporation');
    await page.getByTestId('audit').getByText('account.label').first().waitFor();
    // A label that is not one: a clear refusal, nothing changed.
    await page.getByRole('textbox', { name: 'Label' }).fill('<script>');
    await page.getByRole('button', { name: 'Set label' }).click();
    await page
      .getByRole('alert')
      .getByText(/The label was not changed/)
      .waitFor();
    expect((await server.parts.stores.accounts.getAccount(owner.accountId))!.operatorLabel).toBe('ACME Corporation');
    await page.close();
  });
});
