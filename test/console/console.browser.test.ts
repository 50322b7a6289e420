/**
 * The console in headless Chromium against a real server and the real CLI: sign in with a one-time link printed
 * by `coffer admin login-link`; a backup made by `coffer backup` appears and turns READY live (its finalize is held
 * at a proxy so the page is seen showing it UPLOADED first); it is restored in the page with the passphrase (a
 * wrong one first) and the saved archive holds the original files; a key is created (shown once, works, scopes
 * hold) and revoked; cross-origin form posts are refused (same-site: no CSRF token; cross-site: no cookie);
 * sign-out ends the session on the server; the used link is refused. A screenshot of each page goes to
 * test-artifacts/ (not committed).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, makeTree, runCli, snapshot } from '../client/helpers.js';
import { ARTIFACTS, assertConsoleBuilt, hasChromium, holdingProxy, htmlServer, launchChromium } from './helpers.js';

const PASSPHRASE = 'console passphrase ✓ 2026';

describe.skipIf(!hasChromium)('the console in headless Chromium', () => {
  let server: TestServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let work: string;
  let source: string;
  let accountId: string;
  let apiKey: string;
  let loginUrl: string;
  let backupId: string;
  let cookieValue: string;
  const consoleErrors: string[] = [];
  const foreignRequests: string[] = [];

  const shot = (name: string, target: Page = page) =>
    target.screenshot({ path: path.join(ARTIFACTS, `console-${name}.png`), fullPage: true });

  beforeAll(async () => {
    assertBuilt();
    assertConsoleBuilt();
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    server = await startTestServer();
    ({ apiKey, accountId } = await server.newKey({ plan: 'pro' }));
    work = tempDir('coffer-console-');
    source = path.join(work, 'photos');
    await makeTree(source, 300 * 1024);
    const init = await cliFor(server.url, apiKey, PASSPHRASE)(['init']);
    expect(init.code, init.stderr).toBe(0);
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    page = await context.newPage();
    page.on('console', (message) => message.type() === 'error' && consoleErrors.push(message.text()));
    page.on('pageerror', (error) => consoleErrors.push(String(error)));
    page.on('request', (request) => {
      const url = request.url();
      if (!url.startsWith(`${server.url}/`) && !url.startsWith('blob:') && !url.startsWith('data:')) foreignRequests.push(url);
    });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  it('signs in with a one-time link from `coffer admin login-link`; the cookie is httpOnly and SameSite=Strict', async () => {
    const result = await runCli(['admin', 'login-link', accountId, '--json'], {
      COFFER_DATA_DIR: server.dataDir,
      COFFER_PUBLIC_URL: server.url,
    });
    const link = json(result);
    expect(link.url).toMatch(new RegExp(`^${server.url}/console/login#token=cfl_[A-Za-z0-9_-]{43}$`));
    loginUrl = link.url;

    await page.goto(loginUrl);
    await page.getByRole('heading', { level: 1, name: 'Backups' }).waitFor();
    expect(page.url()).toBe(`${server.url}/console`); // the token is gone from the address bar
    const cookies = await context.cookies(server.url);
    const session = cookies.find((c) => c.name === 'coffer_session')!;
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/', secure: false });
    expect(session.value).toMatch(/^cfs_/);
    cookieValue = session.value;
    expect(await page.evaluate(() => document.cookie)).toBe(''); // invisible to scripts
    await page.getByText('No backups yet.').waitFor();
    await shot('backups-empty');
  });

  it('shows a backup made by the CLI appear, then turn from UPLOADED to READY live', async () => {
    const proxy = await holdingProxy(server.url, /\/finalize$/);
    let navigations = 0;
    page.on('framenavigated', (frame) => frame === page.mainFrame() && (navigations += 1));
    try {
      // Made by a backup host that has only the recipient, not the passphrase: the page restores it all the same.
      const { recipient } = json(await cliFor(server.url, apiKey, PASSPHRASE)(['recipient', '--json']));
      const host = cliFor(proxy.url, apiKey, undefined, { COFFER_RECIPIENT: recipient });
      const backup = host(['backup', source, '--json', '--hostapp-version', 'photos-3.2']);
      await proxy.firstHeld; // uploaded; the finalize waits at the proxy
      const row = page.locator('tr[data-backup-id]');
      await row.locator('[data-status="UPLOADED"]').waitFor({ timeout: 10_000 });
      backupId = (await row.getAttribute('data-backup-id'))!;
      await shot('backups-uploaded');
      proxy.release();
      const detail = json(await backup);
      expect(detail.id).toBe(backupId);
      expect(Buffer.from(detail.wrappedDek, 'base64').subarray(0, 4).toString()).toBe('cxw1');
      await row.locator('[data-status="READY"]').waitFor({ timeout: 10_000 });
      expect(navigations).toBe(0); // pushed into the open page, not reloaded
      await expect(row.innerText()).resolves.toContain('photos-3.2');
      await shot('backups');
    } finally {
      proxy.release();
      await proxy.close();
    }
  });

  it('restores the backup in the page: a wrong passphrase is a clear error; the saved archive holds the original files', async () => {
    await page.locator(`tr[data-backup-id="${backupId}"] a`).first().click();
    await page.getByRole('heading', { level: 1, name: /Backup/ }).waitFor();
    await shot('backup');

    await page.getByLabel('Vault passphrase').fill('not the passphrase');
    await page.getByRole('button', { name: 'Decrypt and save' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.innerText()).toMatch(/Wrong passphrase\. The vault could not be unlocked with it/);
    expect(await page.getByLabel('Vault passphrase').getAttribute('aria-invalid')).toBe('true');
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('passphrase');
    await shot('restore-wrong-passphrase');

    await page.getByLabel('Vault passphrase').fill(PASSPHRASE);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Decrypt and save' }).click()]);
    expect(download.suggestedFilename()).toMatch(new RegExp(`^photos-\\d{4}-\\d{2}-\\d{2}-${backupId.slice(0, 8)}\\.tar$`));
    const saved = path.join(work, 'saved.tar');
    await download.saveAs(saved);
    await page.getByText('Decrypted and verified.').waitFor();
    await shot('restore-done');

    // The saved bytes are the very archive the CLI made: its SHA-256 is the one sealed in the metadata.
    const show = await cliFor(server.url, apiKey, PASSPHRASE)(['show', backupId, '--metadata']);
    const sealedSha = /sha-256:\s+([0-9a-f]{64})/.exec(show.stdout)?.[1];
    expect(
      createHash('sha256')
        .update(await fsp.readFile(saved))
        .digest('hex'),
    ).toBe(sealedSha);
    // ...and unpacked, they are the original files.
    const restored = path.join(work, 'restored');
    await fsp.mkdir(restored);
    const untar = spawnSync('tar', ['-xf', saved, '-C', restored], { encoding: 'utf8' }); // GNU tar: symlinks verbatim
    expect(untar.status, untar.stderr).toBe(0);
    const strip = (tree: Awaited<ReturnType<typeof snapshot>>) =>
      Object.fromEntries(
        Object.entries(tree).map(([name, e]) => [name, { type: e.type, size: e.size, sha256: e.sha256, target: e.target }]),
      );
    expect(strip(await snapshot(restored))).toEqual(strip(await snapshot(source)));
  });

  it('shows plan and cadence, and the vault state (creation, KDF parameters, last rotation)', async () => {
    await page.getByRole('link', { name: 'Plan' }).click();
    await page.getByRole('heading', { level: 1, name: 'Plan and cadence' }).waitFor();
    await page.locator('main dl.facts').waitFor(); // the facts, once the overview has arrived (until then: "Loading…")
    const plan = await page.locator('main').innerText();
    expect(plan).toMatch(/Plan\s+pro/i);
    expect(plan).toContain('One backup per 30 minutes');
    expect(plan).toContain('kept 90 days');
    expect(await page.getByTestId('next-allowed').locator('time').getAttribute('datetime')).toMatch(/^\d{4}-/); // one just finished
    expect(await page.getByTestId('last-ready').locator('time').getAttribute('datetime')).toMatch(/^\d{4}-/);
    expect(await page.getByTestId('overdue').count()).toBe(0); // a backup reached READY just now
    expect(await page.getByTestId('quota').innerText()).toMatch(/ used, no quota$/);
    await shot('plan');

    // With a quota, the stored bytes against it; at the quota, a warning.
    const stored = (await server.parts.quotas.quota(accountId))!.usage;
    await server.parts.quotas.setQuota(accountId, stored * 4);
    await page.reload();
    await page.getByTestId('quota-text').waitFor();
    expect(await page.getByTestId('quota-text').innerText()).toMatch(/ of .+ used \(25 %\)$/);
    expect(await page.getByTestId('quota-full').count()).toBe(0);
    await server.parts.quotas.setQuota(accountId, stored);
    await page.reload();
    await page.getByTestId('quota-full').waitFor();
    expect(await page.getByTestId('quota-text').innerText()).toContain('(100 %)');
    await shot('plan-quota');
    await server.parts.quotas.setQuota(accountId, undefined);

    await page.getByRole('link', { name: 'Vault' }).click();
    await page.getByRole('heading', { level: 1, name: 'Vault' }).waitFor();
    await page.locator('main dl.facts').waitFor();
    const vault = await page.locator('main').innerText();
    expect(vault).toContain('Initialized');
    expect(vault).toContain('Argon2id13');
    expect(vault).toMatch(/Memory limit\s+8\.0 KiB \(8,192 bytes\)/); // COFFER_KDF=min in tests
    expect(vault).toContain('Never rotated');

    // `coffer passphrase` re-wraps the master key: the vault page shows when.
    const rotate = await cliFor(server.url, apiKey, PASSPHRASE)(['passphrase'], { COFFER_NEW_PASSPHRASE: `${PASSPHRASE} (new)` });
    expect(rotate.code, rotate.stderr).toBe(0);
    await page.reload();
    const rotation = page.locator('dt:text-is("Last rotation") + dd time');
    await rotation.waitFor();
    expect(Date.now() - Date.parse((await rotation.getAttribute('datetime'))!)).toBeLessThan(60_000);
    await shot('vault');
  });

  it('after `coffer rekey` the page reads the keyring: the backup sealed to the old recipient still restores', async () => {
    const passphrase = `${PASSPHRASE} (new)`;
    const rekey = await cliFor(server.url, apiKey, passphrase)(['rekey']);
    expect(rekey.code, rekey.stderr).toBe(0);
    await page.goto(`${server.url}/console`);
    await page.locator(`tr[data-backup-id="${backupId}"] a`).first().click();
    await page.getByRole('heading', { level: 1, name: /Backup/ }).waitFor();
    await page.getByLabel('Vault passphrase').fill(passphrase);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Decrypt and save' }).click()]);
    await download.saveAs(path.join(work, 'saved-after-rekey.tar'));
    await page.getByText('Decrypted and verified.').waitFor();
    const [before, after] = await Promise.all(['saved.tar', 'saved-after-rekey.tar'].map((f) => fsp.readFile(path.join(work, f))));
    expect(after!.equals(before!)).toBe(true);
  });

  it('with a deletion grace, a backup deleted by the CLI is listed as scheduled for deletion and restored with a click', async () => {
    const grace = await runCli(['admin', 'accounts', 'set-deletion-grace', accountId, '7'], { COFFER_DATA_DIR: server.dataDir });
    expect(grace.code, grace.stderr).toBe(0);
    const deleted = await cliFor(server.url, apiKey, undefined)(['delete', backupId]);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout).toContain('scheduled for deletion');

    await page.goto(`${server.url}/console`);
    const scheduled = page.locator(`tr[data-scheduled-id="${backupId}"]`);
    await scheduled.waitFor();
    expect(await page.locator(`tr[data-backup-id="${backupId}"]`).count()).toBe(0);
    expect(await page.getByLabel('Keep deleted backups restorable for (days)').inputValue()).toBe('7');
    await shot('scheduled-for-deletion');
    await scheduled.getByRole('button', { name: /^Undelete backup/ }).click();
    await page
      .getByText(/is undeleted: it is back in your backups/)
      .first()
      .waitFor();
    await page.locator(`tr[data-backup-id="${backupId}"] [data-status="READY"]`).waitFor();
    await page.getByText('No backup is scheduled for deletion.').waitFor();
    const detail = await fetch(`${server.url}/api/backups/${backupId}`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(((await detail.json()) as { status: string }).status).toBe('READY');
  });

  it('creates a key with chosen scopes and expiry (shown once, and it works), then revokes it', async () => {
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    await page.getByLabel(/backups:restore/).check();
    await page.getByLabel('Expires after').selectOption({ label: '7 days' });
    await page.getByRole('button', { name: 'Create key' }).click();
    const field = page.getByLabel('API key', { exact: true });
    await field.waitFor();
    const created = await field.inputValue();
    expect(created).toMatch(/^cfk_[A-Za-z0-9_-]{43}$/);
    await shot('keys-created');

    const asNewKey = (method: string, p: string) => fetch(`${server.url}${p}`, { method, headers: { authorization: `Bearer ${created}` } });
    expect((await asNewKey('GET', '/api/backups')).status).toBe(200);
    expect((await asNewKey('GET', `/api/backups/${backupId}/content`)).status).toBe(200);
    expect((await asNewKey('POST', '/api/backups')).status).toBe(403); // no backups:write
    const listed = (await server.parts.stores.keys.listApiKeys(accountId)).find((k) => k.scopes.length === 2)!;
    expect(listed.scopes).toEqual(['backups:read', 'backups:restore']);
    expect(listed.expiresAt! - listed.createdAt).toBe(7 * 86_400_000);

    await page.getByRole('button', { name: 'I have stored it' }).click();
    expect(await page.locator('main').innerText()).not.toContain(created); // shown once
    const row = page.locator(`tr[data-key-id="${listed.id}"]`);
    await row.getByRole('button', { name: /Revoke key/ }).click();
    await row.getByRole('button', { name: 'Revoke now' }).click();
    await row.getByText('revoked').waitFor();
    expect((await asNewKey('GET', '/api/backups')).status).toBe(401);
    await shot('keys');
  });

  it('adds a backup host: a write-only append-only key and the settings to set, with the recipient derived in the page', async () => {
    const passphrase = `${PASSPHRASE} (new)`;
    const { recipient } = json<{ recipient: string }>(await cliFor(server.url, apiKey, passphrase)(['recipient', '--json']));
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    // A wrong passphrase makes no key.
    const keysBefore = (await server.parts.stores.keys.listApiKeys(accountId)).length;
    await page.getByLabel('Vault passphrase (optional)').fill('not the passphrase');
    await page.getByRole('button', { name: 'Add backup host' }).click();
    await page.getByText('That passphrase does not unlock the vault. No key was made.').waitFor();
    expect((await server.parts.stores.keys.listApiKeys(accountId)).length).toBe(keysBefore);

    await page.getByLabel('Vault passphrase (optional)').fill(passphrase);
    await page.getByRole('button', { name: 'Add backup host' }).click();
    const settings = page.getByLabel('Host settings');
    await settings.waitFor();
    const text = await settings.inputValue();
    const value = (name: string) => new RegExp(`^export ${name}='([^']*)'$`, 'm').exec(text)?.[1];
    expect(value('COFFER_URL')).toBe(server.url);
    expect(value('COFFER_RECIPIENT')).toBe(recipient);
    const hostKey = value('COFFER_API_KEY')!;
    expect(hostKey).toMatch(/^cfk_[A-Za-z0-9_-]{43}$/);
    await shot('keys-host');

    const made = (await server.parts.stores.keys.listApiKeys(accountId)).at(-1)!;
    // Write-only: a stolen host can neither read the vault's wrapped key nor list, download or delete backups.
    expect(made).toMatchObject({ scopes: ['backups:write'], appendOnly: true });
    for (const url of ['/api/backup-account', '/api/backups', `/api/backups/${backupId}/content`]) {
      const read = await fetch(`${server.url}${url}`, { headers: { authorization: `Bearer ${hostKey}` } });
      expect(read.status, url).toBe(403);
    }
    const refused = await fetch(`${server.url}/api/backups/${backupId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${hostKey}` },
    });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { details: { reason: string } }).details.reason).toBe('append_only');
    await page.getByRole('button', { name: 'I have stored it' }).click();
    expect(await page.locator('main').innerText()).not.toContain(hostKey);
    await page.locator(`tr[data-key-id="${made.id}"]`).getByText('append-only').waitFor();

    // The activity page shows the new key and the refused delete, with who and from where.
    await page.getByRole('link', { name: 'Activity' }).click();
    await page.getByRole('heading', { level: 1, name: 'Activity' }).waitFor();
    const refusedRow = page.locator('tr[data-action="backup.delete"][data-outcome="refused"]').first();
    await refusedRow.waitFor();
    expect(await refusedRow.innerText()).toMatch(/Tried to delete a backup\s+refused/);
    const createdRow = page.locator('tr[data-action="key.create"]').first();
    expect(await createdRow.innerText()).toMatch(/append-only[^]*this session[^]*127\.0\.0\.1/);
    await shot('activity');
  });

  it('refuses cross-origin form posts: same-site without the CSRF token (403), cross-site without the cookie (401)', async () => {
    const before = (await server.parts.stores.backups.listBackups(accountId, ['PENDING_UPLOAD', 'UPLOADED', 'READY'])).length;
    const form = `<!doctype html><form method="post" enctype="text/plain" action="${server.url}/api/backups/${backupId}/finalize">
      <input name='{"cryptoVersion":"v1","x":"' value='"}'></form><script>document.forms[0].submit()</script>`;
    const attacker = await htmlServer(form);
    const other = await context.newPage();
    try {
      for (const [host, status, code] of [
        ['127.0.0.1', 403, 'csrf_token_invalid'], // same site (ports do not count): the cookie goes along, the token cannot
        ['localhost', 401, 'authentication_required'], // another site: SameSite=Strict keeps the cookie home
      ] as const) {
        const [response] = await Promise.all([
          other.waitForResponse((r) => r.url().endsWith('/finalize')),
          other.goto(`http://${host}:${attacker.port}/`),
        ]);
        expect(response.status(), host).toBe(status);
        expect((await response.json()).code).toBe(code);
      }
      // A script on a same-site page POSTing with the session cookie gets nothing done either (checked below).
      await other.goto(`http://127.0.0.1:${attacker.port}/`);
      await other.evaluate(async (url) => {
        await fetch(`${url}/api/backups`, { method: 'POST', credentials: 'include' }).catch(() => undefined);
      }, server.url);
    } finally {
      await other.close();
      await attacker.close();
    }
    expect((await server.parts.stores.backups.listBackups(accountId, ['PENDING_UPLOAD', 'UPLOADED', 'READY'])).length).toBe(before);
  });

  it('serves the CLI page and passes the crypto test vectors in the browser', async () => {
    await page.getByRole('link', { name: 'CLI' }).click();
    await page.getByRole('heading', { level: 1, name: 'Coffer CLI' }).waitFor();
    await page.getByText(`npm install -g ${server.url}/downloads/coffer-cli.tgz`).waitFor();
    await shot('cli');

    await page.getByRole('link', { name: 'Check this browser' }).click();
    const summary = page.getByTestId('selftest-summary');
    await summary.waitFor({ timeout: 20_000 });
    expect(await summary.innerText()).toMatch(/^All 17 checks passed/);
    await shot('self-test');
  });

  it('is usable at phone width: nothing overflows sideways', async () => {
    const phone = await context.newPage();
    try {
      await phone.setViewportSize({ width: 390, height: 844 });
      for (const [route, heading] of [
        ['', 'Backups'],
        [`/backups/${backupId}`, /Backup/],
        ['/keys', 'API keys'],
        ['/activity', 'Activity'],
      ] as const) {
        await phone.goto(`${server.url}/console${route}`);
        await phone.getByRole('heading', { level: 1, name: heading }).waitFor();
        expect(await phone.evaluate(() => document.documentElement.scrollWidth), route).toBeLessThanOrEqual(390);
      }
      await phone.goto(`${server.url}/console`);
      await phone.locator('[data-status="READY"]').waitFor();
      await shot('backups-phone', phone);
    } finally {
      await phone.close();
    }
  });

  it('signs out: the session ends on the server, and the used link is refused', async () => {
    await page.goto(`${server.url}/console`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    expect(await page.getByRole('status').first().innerText()).toContain('signed out');
    expect((await context.cookies(server.url)).find((c) => c.name === 'coffer_session')).toBeUndefined();
    // The old cookie value is dead on the server, wherever it was copied to.
    const replay = await fetch(`${server.url}/api/backups`, { headers: { cookie: `coffer_session=${cookieValue}` } });
    expect(replay.status).toBe(401);
    await shot('signed-out');

    await page.goto(loginUrl);
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.innerText()).toContain('This sign-in link cannot be used: it was already used, has expired');
    await shot('login-link-used');
    expect(consoleErrors.filter((e) => !/status of 40[13]/.test(e))).toEqual([]);
    expect(foreignRequests).toEqual([]);
  });

  it('explains a refused API key in the words of the page, not of the API', async () => {
    const { apiKey: noRestore } = await server.newKey({ accountId, scopes: ['backups:read', 'backups:write'] });
    const unknown = `cfk_${'A'.repeat(43)}`;
    const cases: [string, RegExp][] = [
      [noRestore, /lacks backups:restore[\s\S]*Sign in with a key that holds read, write and restore/],
      [unknown, /unknown, revoked or expired[\s\S]*Check that the whole key was pasted/],
    ];
    await page.goto(`${server.url}/console/login`);
    for (const [key, expected] of cases) {
      await page.getByLabel('API key').fill(key);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await expect
        .poll(() =>
          page
            .getByRole('alert')
            .innerText()
            .catch(() => ''),
        )
        .toMatch(expected);
      expect(await page.getByRole('alert').innerText()).not.toMatch(/\/api\/|details\.|Bearer|Authorization/);
      // Said once: the page below the alert already tells how to sign in, the alert does not repeat it.
      if (key === unknown) expect(await page.getByRole('alert').innerText()).not.toMatch(/sign in again|login-link/);
    }
    await shot('login-key-refused');
  });
});
