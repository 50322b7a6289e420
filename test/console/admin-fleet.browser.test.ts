/**
 * The operator console's usage view of a fleet in headless Chromium against a real server (docs/operations.md#fleets):
 * an owner's host accounts are listed right under it with "the owner's" quota, the owner's row carries the fleet's
 * total, a host account's page names its owner, a plan change on a host account is refused with the owner named and
 * one on the owner reaches its host accounts; at 1280 px and at 390 px (no sideways scroll).
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assertBuilt, json, runCli } from '../client/helpers.js';
import { assertConsoleBuilt, hasChromium, launchChromium } from './helpers.js';

describe.skipIf(!hasChromium)("the operator console's usage view of an owner and its host accounts", { timeout: 240_000 }, () => {
  let server: TestServer;
  let browser: Browser;

  beforeAll(async () => {
    assertBuilt();
    assertConsoleBuilt();
    server = await startTestServer();
    browser = await launchChromium();
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  const admin = (args: string[]) => runCli(['admin', ...args], { COFFER_DATA_DIR: server.dataDir, COFFER_PUBLIC_URL: server.url });

  /** An owner (quota 10,000 bytes) storing 1,000 bytes and two host accounts storing 300 and 200 through their keys. */
  async function fleet() {
    const owner = await server.newKey({ plan: 'pro' });
    expect((await api(server.url, owner.apiKey)('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    const hosts: { accountId: string; apiKey: string }[] = [];
    for (const label of ['web', 'db']) hosts.push(json(await admin(['accounts', 'add-host', owner.accountId, '--label', label, '--json'])));
    for (const [apiKey, size] of [
      [owner.apiKey, 1000],
      [hosts[0]!.apiKey, 300],
      [hosts[1]!.apiKey, 200],
    ] as const) {
      const call = api(server.url, apiKey);
      const id = (await call('POST', '/api/backups')).body.backupId as string;
      await call('POST', `/api/backups/upload?backupId=${id}`, {
        body: new Uint8Array(size),
        headers: { 'content-type': 'application/octet-stream' },
      });
      expect((await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(size) })).status).toBe(200);
    }
    expect((await admin(['accounts', 'set-quota', owner.accountId, '10000'])).code).toBe(0);
    return { ownerId: owner.accountId, hostIds: hosts.map((h) => h.accountId) };
  }

  async function signedIn(width: number): Promise<{ page: Page; errors: string[] }> {
    const printed = json(await admin(['login-link', '--operator', '--json']));
    const page = await browser.newPage({ viewport: { width, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(String(error)));
    await page.goto(printed.url);
    await page.getByRole('heading', { name: 'Operator console' }).waitFor();
    return { page, errors };
  }

  for (const [name, width] of [
    ['desktop', 1280],
    ['narrow', 390],
  ] as const) {
    it(`${name} (${width} px): host accounts under their owner, the fleet total, plan changes through the owner`, async () => {
      const { ownerId, hostIds } = await fleet();
      const { page, errors } = await signedIn(width);
      const table = page.getByTestId('accounts');
      await table.waitFor();

      // The owner's row, then its two host accounts; nothing between.
      const order = await table.locator('tbody tr').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-account')));
      const at = order.indexOf(ownerId);
      expect(order.slice(at, at + 3)).toEqual([ownerId, ...hostIds]);
      const ownerRow = table.locator(`tr[data-account="${ownerId}"]`);
      expect(await ownerRow.getByTestId('fleet-total').textContent()).toMatch(/with its 2 host accounts: 1\.5 KiB/);
      for (const [i, label] of ['web', 'db'].entries()) {
        const row = table.locator(`tr[data-account="${hostIds[i]}"]`);
        expect(await row.getAttribute('data-owner')).toBe(ownerId);
        expect(await row.textContent()).toContain(`host “${label}” of ${ownerId}`);
        expect(await row.textContent()).toContain('the owner’s');
      }
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth)).toBe(true);

      // A host account's page names its owner; its plan is changed on the owner only.
      await table.locator(`tr[data-account="${hostIds[0]}"]`).getByRole('link', { name: hostIds[0] }).click();
      await page.getByTestId('owner').waitFor();
      expect(await page.getByTestId('owner').textContent()).toContain(ownerId);
      expect(await page.getByTestId('quota').textContent()).toContain('its owner’s');
      const form = (button: string) => page.locator('form.admin-inline').filter({ has: page.getByRole('button', { name: button }) });
      await form('Change plan').locator('select').selectOption('free');
      await page.getByRole('button', { name: 'Change plan' }).click();
      await page
        .getByRole('alert')
        .filter({ hasText: `is a host account of ${ownerId}` })
        .waitFor();
      expect((await server.parts.stores.accounts.getAccount(hostIds[0]!))!.plan).toBe('pro');

      await page.goto(`${server.url}/admin/accounts/${ownerId}`);
      await page.getByTestId('fleet-total').waitFor();
      await form('Change plan').locator('select').selectOption('plus');
      await page.getByRole('button', { name: 'Change plan' }).click();
      await page.getByText('The plan is now plus.').waitFor();
      for (const id of hostIds) expect((await server.parts.stores.accounts.getAccount(id))!.plan).toBe('plus');
      expect(errors).toEqual([]);
      await page.close();
    });
  }
});
