/**
 * Key management in the console, in headless Chromium against a real server and the real CLI (docs/console.md
 * "Keys" and "Recovery"): backups made with the passphrase and sealed by a host to a recipient, before and after a
 * `coffer rekey`. The list shows each sealed backup's recipient fingerprint without unlocking and, once unlocked in
 * the page, which key (current or retired) each backup uses; the page restores a sealed backup and one made before
 * the rekey byte-exact. The recovery page takes the kit's words: a damaged kit, another vault's kit and a kit older
 * than the rekey are refused and change nothing; the right kit sets a new passphrase that then unlocks and restores,
 * and no request the page makes carries a kit word, a key or the new passphrase.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { mnemonicToEntropy, validateMnemonic } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english.js';
import type { Browser, Page, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, makeTree, snapshot } from '../client/helpers.js';
import { ARTIFACTS, assertConsoleBuilt, hasChromium, launchChromium } from './helpers.js';

const PASSPHRASE = 'keys console passphrase, soon forgotten';
const NEW_PASSPHRASE = 'keys console passphrase after recovery ✓';

describe.skipIf(!hasChromium)('the console shows which key each backup uses, and recovers with the kit', () => {
  let server: TestServer;
  let clock: ManualClock;
  let browser: Browser;
  let page: Page;
  let apiKey: string;
  let work: string;
  let source: string;
  let owner: ReturnType<typeof cliFor>;
  let host: ReturnType<typeof cliFor>;
  const ids: Record<'wrappedBefore' | 'sealedBefore' | 'wrappedAfter' | 'sealedAfter' | 'sealedOld', string> = {} as never;
  let oldFingerprint: string;
  let newFingerprint: string;
  let kit: string;
  const consoleErrors: string[] = [];

  const shot = (name: string) => page.screenshot({ path: path.join(ARTIFACTS, `console-keys-${name}.png`), fullPage: true });

  async function backup(cli: ReturnType<typeof cliFor>, env: Record<string, string> = {}) {
    const detail = json(await cli(['backup', source, '--json'], env));
    clock.advance(31 * 60 * 1000); // pro plan: one backup per 30 minutes
    return detail.id as string;
  }

  const account = async () => (await fetch(`${server.url}/api/backup-account`, { headers: { authorization: `Bearer ${apiKey}` } })).json();

  beforeAll(async () => {
    assertBuilt();
    assertConsoleBuilt();
    await fsp.mkdir(ARTIFACTS, { recursive: true });
    clock = new ManualClock();
    server = await startTestServer({ clock });
    ({ apiKey } = await server.newKey({ plan: 'pro' }));
    work = tempDir('coffer-console-keys-');
    source = path.join(work, 'source');
    await makeTree(source, 200 * 1024);
    owner = cliFor(server.url, apiKey, PASSPHRASE);
    host = cliFor(server.url, apiKey, undefined); // a backup host: API key and recipient, no passphrase
    expect((await owner(['init'])).code).toBe(0);
    const before = json(await owner(['recipient', '--json']));
    oldFingerprint = before.fingerprint;
    ids.wrappedBefore = await backup(owner);
    ids.sealedBefore = await backup(host, { COFFER_RECIPIENT: before.recipient });
    const rekey = await owner(['rekey']);
    expect(rekey.code, rekey.stderr).toBe(0);
    const after = json(await owner(['recipient', '--json']));
    newFingerprint = after.fingerprint;
    expect(newFingerprint).not.toBe(oldFingerprint);
    ids.wrappedAfter = await backup(owner);
    ids.sealedAfter = await backup(host, { COFFER_RECIPIENT: after.recipient });
    ids.sealedOld = await backup(host, { COFFER_RECIPIENT: before.recipient }); // a host not yet re-linked
    const printed = await owner(['kit']);
    expect(printed.code, printed.stderr).toBe(0);
    kit = printed.stdout;

    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    page = await context.newPage();
    page.on('console', (message) => message.type() === 'error' && consoleErrors.push(message.text()));
    page.on('pageerror', (error) => consoleErrors.push(String(error)));
    await page.goto(`${server.url}/console/login`);
    await page.getByLabel('API key').fill(apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Backups' }).waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  const keyOf = (id: string) => page.locator(`tr[data-backup-id="${id}"] .key-use`);

  it('lists each sealed backup with its recipient fingerprint before any unlock; passphrase backups say "unlock to see"', async () => {
    await page.locator('tr[data-backup-id]').nth(4).waitFor();
    await keyOf(ids.sealedAfter).waitFor();
    for (const [id, fingerprint] of [
      [ids.sealedBefore, oldFingerprint],
      [ids.sealedAfter, newFingerprint],
      [ids.sealedOld, oldFingerprint],
    ]) {
      expect(await keyOf(id!).getAttribute('data-key-form')).toBe('sealed');
      expect(await keyOf(id!).getAttribute('data-key-fingerprint')).toBe(fingerprint);
      expect(await keyOf(id!).innerText()).toContain(`Sealed to ${fingerprint}`);
    }
    for (const id of [ids.wrappedBefore, ids.wrappedAfter]) {
      expect(await keyOf(id).getAttribute('data-key-form')).toBe('master');
      expect(await keyOf(id).innerText()).toMatch(/Master key\s*\(unlock to see which\)/);
    }
    await shot('list-locked');
  });

  it('after unlocking in the page: the current key and the retired one, with fingerprints and counts, per backup', async () => {
    const panel = page.getByRole('region', { name: 'Keys' });
    await panel.getByLabel('Vault passphrase').fill('not the passphrase');
    await panel.getByRole('button', { name: 'Show keys' }).click();
    await expect
      .poll(() =>
        panel
          .getByRole('alert')
          .innerText()
          .catch(() => ''),
      )
      .toMatch(/Wrong passphrase/);

    await panel.getByLabel('Vault passphrase').fill(PASSPHRASE);
    await panel.getByRole('button', { name: 'Show keys' }).click();
    const ring = page.getByTestId('key-ring');
    await ring.waitFor();
    const items = ring.locator('li');
    expect(await items.count()).toBe(2);
    expect(await items.nth(0).getAttribute('data-key-fingerprint')).toBe(newFingerprint);
    expect(await items.nth(0).innerText()).toMatch(new RegExp(`Current key\\s+${newFingerprint}: 2 backups`));
    expect(await items.nth(1).getAttribute('data-key-fingerprint')).toBe(oldFingerprint);
    expect(await items.nth(1).innerText()).toMatch(new RegExp(`Retired key 2\\s+${oldFingerprint}: 3 backups`));

    const expected: [string, 'current' | 'retired', string, 'master' | 'sealed'][] = [
      [ids.wrappedBefore, 'retired', oldFingerprint, 'master'],
      [ids.sealedBefore, 'retired', oldFingerprint, 'sealed'],
      [ids.wrappedAfter, 'current', newFingerprint, 'master'],
      [ids.sealedAfter, 'current', newFingerprint, 'sealed'],
      [ids.sealedOld, 'retired', oldFingerprint, 'sealed'],
    ];
    for (const [id, role, fingerprint, form] of expected) {
      const cell = keyOf(id);
      expect(await cell.getAttribute('data-key-role'), id).toBe(role);
      expect(await cell.getAttribute('data-key-fingerprint'), id).toBe(fingerprint);
      expect(await cell.getAttribute('data-key-form'), id).toBe(form);
      expect(await cell.innerText()).toContain(role === 'current' ? 'Current key' : 'Retired key 2');
    }
    await shot('list-unlocked');
  });

  /** Restores `id` in the page (fresh load: nothing known yet) and checks the saved tar against the CLI's sealed SHA-256 and the source. */
  async function restoreInPage(id: string, passphrase: string, name: string) {
    await page.goto(`${server.url}/console/backups/${id}`);
    await page.getByRole('heading', { level: 1, name: /Backup/ }).waitFor();
    const fact = page.getByTestId('backup-key');
    await page.getByLabel('Vault passphrase').fill(passphrase);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Decrypt and save' }).click()]);
    const saved = path.join(work, `${name}.tar`);
    await download.saveAs(saved);
    await page.getByText('Decrypted and verified.').waitFor();
    const show = await cliFor(server.url, apiKey, passphrase)(['show', id, '--metadata']);
    expect(show.code, show.stderr).toBe(0);
    const sealedSha = /sha-256:\s+([0-9a-f]{64})/.exec(show.stdout)?.[1];
    expect(
      createHash('sha256')
        .update(await fsp.readFile(saved))
        .digest('hex'),
    ).toBe(sealedSha);
    const restored = path.join(work, name);
    await fsp.mkdir(restored);
    const untar = spawnSync('tar', ['-xf', saved, '-C', restored], { encoding: 'utf8' });
    expect(untar.status, untar.stderr).toBe(0);
    const strip = (tree: Awaited<ReturnType<typeof snapshot>>) =>
      Object.fromEntries(
        Object.entries(tree).map(([file, e]) => [file, { type: e.type, size: e.size, sha256: e.sha256, target: e.target }]),
      );
    expect(strip(await snapshot(restored))).toEqual(strip(await snapshot(source)));
    return fact;
  }

  it('restores byte-exact a backup sealed by a host and one made with the passphrase before the rekey; the page names the key', async () => {
    const sealed = await restoreInPage(ids.sealedBefore, PASSPHRASE, 'sealed-before');
    await expect.poll(() => sealed.locator('.key-use').getAttribute('data-key-role')).toBe('retired');
    expect(await sealed.innerText()).toContain(`Retired key 2 ${oldFingerprint}`);
    expect(await sealed.innerText()).toContain('sealed by a backup host');
    await shot('backup-sealed-restored');

    const wrapped = await restoreInPage(ids.wrappedBefore, PASSPHRASE, 'wrapped-before');
    await expect.poll(() => wrapped.locator('.key-use').getAttribute('data-key-role')).toBe('retired');
    expect(await wrapped.innerText()).toContain(`Retired key 2 ${oldFingerprint}`);
    expect(await wrapped.innerText()).toContain('with the passphrase');
  });

  describe('recovery with the kit, the passphrase forgotten', () => {
    const requests: Promise<{ url: string; headers: Record<string, string>; body: string }>[] = [];
    const record = (request: Request) =>
      requests.push(
        request.allHeaders().then((headers) => ({ url: request.url(), headers, body: request.postDataBuffer()?.toString('latin1') ?? '' })),
      );
    let kitWords: string[][];
    let envelopeBefore: unknown;

    beforeAll(async () => {
      kitWords = kit
        .split('\n')
        .filter((line) => line.startsWith('key '))
        .map((line) => line.replace(/^key \d+:\s*/, '').split(' '));
      expect(kitWords.map((words) => words.length)).toEqual([24, 24]);
      envelopeBefore = await account();
      page.on('request', record);
      await page.goto(`${server.url}/console/vault`);
      await page.getByRole('link', { name: 'Recover with your recovery kit' }).click();
      await page.getByRole('heading', { level: 1, name: 'Recover with your kit' }).waitFor();
    });

    const attempt = async (words: string) => {
      await page.getByLabel('Recovery kit words').fill(words);
      await page.getByLabel('New passphrase', { exact: true }).fill(NEW_PASSPHRASE);
      await page.getByLabel('Repeat the new passphrase').fill(NEW_PASSPHRASE);
      await page.getByRole('button', { name: 'Check the kit and set the new passphrase' }).click();
    };
    const refusal = async (expected: RegExp) => {
      await expect
        .poll(
          () =>
            page
              .getByRole('alert')
              .innerText()
              .catch(() => ''),
          { timeout: 20_000 },
        )
        .toMatch(expected);
      expect(await page.getByLabel('Recovery kit words').getAttribute('aria-invalid')).toBe('true');
      expect(await account()).toEqual(envelopeBefore); // nothing changed
    };

    it("refuses a mistyped word, another vault's kit and a kit older than the rekey; nothing changes", async () => {
      // One word swapped for another BIP-39 word such that the checksum no longer holds (chosen, not left to chance).
      const typo = [...kitWords[0]!];
      typo[5] = wordlist.find((word) => !validateMnemonic([...typo.slice(0, 5), word, ...typo.slice(6)].join(' '), wordlist))!;
      await attempt(typo.join(' '));
      await refusal(/The kit could not be read: .*checksum does not match/);
      await attempt(kitWords[0]!.slice(0, 23).join(' '));
      await refusal(/23 words: a kit has 24 words per key/);
      await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('kit-words');

      // Another account's vault: its kit opens none of these backups.
      const { apiKey: strangerKey } = await server.newKey({ plan: 'pro' });
      const stranger = cliFor(server.url, strangerKey, 'stranger passphrase');
      expect((await stranger(['init'])).code).toBe(0);
      const foreign = (await stranger(['kit'])).stdout;
      await attempt(foreign); // the whole kit text, pasted
      await refusal(/This kit does not open your backups \(none of 5 ready backups\).*Nothing was changed/s);
      await shot('recover-foreign');

      // Only the retired key (a kit printed before the rekey): it opens the 3 older backups, not the 2 newer ones.
      await attempt(kitWords[1]!.join(' '));
      await refusal(/This kit opens only 3 of 5 ready backups\..*nothing was\s+changed/s);
    });

    it('replaces only the vault it checked the kit against: a rotate by another client meanwhile makes it refuse (If-Match)', async () => {
      // The page's rotate is held until another client has changed the passphrase (the vault's ETag moves with it).
      let rotateHeaders: Record<string, string> = {};
      await page.route('**/api/backup-account/rotate', async (route) => {
        rotateHeaders = await route.request().allHeaders();
        const changed = await owner(['passphrase'], { COFFER_NEW_PASSPHRASE: 'changed by another client meanwhile' });
        expect(changed.code, changed.stderr).toBe(0);
        await route.continue();
      });
      try {
        await attempt(`${kitWords[0]!.join(' ')}\n${kitWords[1]!.join('\n')}`);
        await expect
          .poll(
            () =>
              page
                .getByRole('alert')
                .innerText()
                .catch(() => ''),
            { timeout: 30_000 },
          )
          .toMatch(/changed by another client/);
        expect(rotateHeaders['if-match']).toMatch(/^"[^"]+"$/);
        // The other client's envelope stands: the page replaced nothing.
        const now = await account();
        expect(now.wrappedMasterKey).not.toBe((envelopeBefore as { wrappedMasterKey: string }).wrappedMasterKey);
        const other = await cliFor(server.url, apiKey, 'changed by another client meanwhile')(['show', ids.wrappedAfter, '--metadata']);
        expect(other.code, other.stderr).toBe(0);
      } finally {
        await page.unroute('**/api/backup-account/rotate');
      }
    });

    it('sets a new passphrase from the words; it unlocks and restores, the old one no longer does', async () => {
      await attempt(`${kitWords[0]!.join(' ')}\n${kitWords[1]!.join('\n')}`);
      const done = page.getByText('Vault recovered.');
      await done.waitFor({ timeout: 30_000 });
      expect(await page.locator('.success').innerText()).toMatch(
        new RegExp(
          `The kit \\(2 keys\\) opened 5 of 5 ready backups\\. .*recipient is the kit's current key \\(\\s*${newFingerprint}\\s*\\)`,
          's',
        ),
      );
      await shot('recover-done');
      const now = await account();
      expect(now.wrappedMasterKey).not.toBe((envelopeBefore as { wrappedMasterKey: string }).wrappedMasterKey);

      // The old passphrase opens nothing any more; the new one opens every key (CLI and page).
      const old = await owner(['show', ids.wrappedAfter, '--metadata']);
      expect(old.code).toBe(4);
      expect(old.stderr).toMatch(/wrong passphrase/);
      const cli = await cliFor(server.url, apiKey, NEW_PASSPHRASE)(['restore', ids.wrappedBefore, path.join(work, 'cli-after-recovery')]);
      expect(cli.code, cli.stderr).toBe(0);
      expect(await snapshot(path.join(work, 'cli-after-recovery'))).toEqual(await snapshot(source));
      const fact = await restoreInPage(ids.sealedAfter, NEW_PASSPHRASE, 'sealed-after-recovery');
      await expect.poll(() => fact.locator('.key-use').getAttribute('data-key-role')).toBe('current');
      expect(await fact.innerText()).toContain(`Current key ${newFingerprint}`);
    });

    it('no request the page made carried a kit word pair, a key (hex, base64, base64url) or the new passphrase', async () => {
      page.off('request', record);
      const seen = await Promise.all(requests);
      expect(seen.some((r) => r.url.endsWith('/api/backup-account/rotate') && r.body.includes('wrappedMasterKey'))).toBe(true);
      const keys = kitWords.map((words) => Buffer.from(mnemonicToEntropy(words.join(' '), wordlist)));
      const secrets = [
        NEW_PASSPHRASE,
        encodeURIComponent(NEW_PASSPHRASE),
        ...keys.flatMap((key) => [key.toString('hex'), key.toString('base64'), key.toString('base64url')]),
      ];
      for (const words of kitWords) {
        for (let i = 0; i + 1 < words.length; i += 1) {
          for (const gap of [' ', '+', '%20', '\n', '\\n', ',', '","']) secrets.push(`${words[i]}${gap}${words[i + 1]}`);
        }
      }
      expect(seen.length).toBeGreaterThan(5);
      for (const request of seen) {
        const text = [request.url, ...Object.entries(request.headers).map(([k, v]) => `${k}: ${v}`), request.body].join('\n').toLowerCase();
        for (const secret of secrets) expect(text.includes(secret.toLowerCase()), `${request.url} carries ${secret}`).toBe(false);
      }
      // 401/403: refusals the tests provoke; 409: the rotate refused by If-Match (the race above).
      expect(consoleErrors.filter((e) => !/status of 40[139]/.test(e))).toEqual([]);
    });
  });
});
