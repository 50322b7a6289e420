/**
 * The SDK's browser entry in real Chromium, on a page of another origin than the API (the fixture page, bundled from
 * src/client/browser.ts by esbuild), against a real server and the real `coffer` CLI.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.js';
import { tempDir } from '../helpers/tmp.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assertBuilt, cliFor, json, type Cli } from '../client/helpers.js';
import { hasChromium, launchChromium } from '../helpers/browser.js';
import { serveFixturePage, type FixturePage } from './browser-page.js';

const PASSPHRASE = 'sdk browser passphrase';

describe.skipIf(!hasChromium)('the SDK in Chromium', () => {
  let server: TestServer;
  let clock: ManualClock;
  let fixture: FixturePage;
  let browser: Browser;
  let page: Page;
  let apiKey: string;
  let cli: Cli;
  let recipient: string;
  let work: string;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    ({ apiKey } = await server.newKey({ plan: 'pro' }));
    cli = cliFor(server.url, apiKey, PASSPHRASE);
    expect((await cli(['init'])).code).toBe(0);
    ({ recipient } = json<{ recipient: string }>(await cli(['recipient', '--json'])));
    work = tempDir('coffer-sdk-browser-');
    fixture = await serveFixturePage();
    browser = await launchChromium();
    page = await browser.newPage();
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    await page.goto(fixture.url);
    await page.waitForFunction(() => window.coffer !== undefined);
  });

  afterAll(async () => {
    await browser?.close();
    await fixture?.close();
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  /** The next backup is past the plan's cadence. */
  const nextBackupAllowed = () => clock.advance(31 * 60 * 1000);

  it('reaches the API from another origin', async () => {
    const listed = await page.evaluate(
      async ({ url, apiKey }) => (await new window.coffer.CofferClient({ baseUrl: url, apiKey }).listBackups()).backups.length,
      { url: server.url, apiKey },
    );
    expect(listed).toBe(0);
    expect(pageErrors).toEqual([]);
  });

  it('backs up a file with only the recipient, cannot restore it, and the CLI restores it byte for byte', async () => {
    const bytes = randomBytes(300 * 1024 + 7);
    nextBackupAllowed();
    const made = await page.evaluate(
      async ({ url, apiKey, recipient, base64 }) => {
        const coffer = window.coffer.connect({ url, apiKey });
        const writer = coffer.writer(recipient);
        const file = new File([Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))], 'notes.bin');
        const backup = await writer.backup(file, { hostappVersion: 'fixture-page/1.0' });
        // A write-only session has no restore: called through a cast, it says why.
        let refusal = '';
        try {
          (writer as unknown as { restore(id: string): unknown }).restore(backup.id);
        } catch (error) {
          refusal = error instanceof window.coffer.WriteOnlySessionError ? error.message : `not WriteOnlySessionError: ${String(error)}`;
        }
        return { id: backup.id, status: backup.detail.status, refusal };
      },
      { url: server.url, apiKey, recipient, base64: bytes.toString('base64') },
    );
    expect(made).toMatchObject({ status: 'READY', refusal: expect.stringMatching(/holds only the recipient/) });
    const target = path.join(work, 'from-the-page');
    const restored = await cli(['restore', made.id, target]);
    expect(restored.code, restored.stderr).toBe(0);
    expect(fs.readFileSync(path.join(target, 'notes.bin')).equals(bytes)).toBe(true);
    expect(pageErrors).toEqual([]);
  });

  /** Restores a backup in the page, unlocked with `unlock` (passphrase or kit): each entry's name and bytes. */
  async function restoreInPage(id: string, unlock: { passphrase: string } | { kit: string }) {
    const entries = await page.evaluate(
      async ({ url, apiKey, unlock, id }) => {
        const coffer = window.coffer.connect({ url, apiKey });
        const vault = await coffer.unlock(unlock);
        const files: { name: string; base64: string }[] = [];
        for await (const entry of vault.restore(id)) {
          const data = new Uint8Array(await new Response(entry.stream).arrayBuffer());
          let text = '';
          for (let at = 0; at < data.length; at += 0x8000) text += String.fromCharCode(...data.subarray(at, at + 0x8000));
          files.push({ name: entry.name, base64: btoa(text) });
        }
        vault.close();
        return files;
      },
      { url: server.url, apiKey, unlock, id },
    );
    return entries.map(({ name, base64 }) => ({ name, bytes: Buffer.from(base64, 'base64') }));
  }

  it('restores in the page, with the passphrase or the recovery kit, a backup the CLI made, byte for byte', async () => {
    const bytes = randomBytes(200 * 1024 + 3);
    const source = path.join(work, 'report.pdf');
    fs.writeFileSync(source, bytes);
    nextBackupAllowed();
    const { id } = json<{ id: string }>(await cli(['backup', source, '--json']));
    const kit = await cli(['kit']);
    expect(kit.code, kit.stderr).toBe(0);
    for (const unlock of [{ passphrase: PASSPHRASE }, { kit: kit.stdout }]) {
      const entries = await restoreInPage(id, unlock);
      expect(entries.map((entry) => entry.name)).toEqual(['report.pdf']);
      expect(entries[0]!.bytes.equals(bytes)).toBe(true);
    }
    expect(pageErrors).toEqual([]);
  });

  it('lists, watches, verifies and deletes a backup from the page', async () => {
    const source = path.join(work, 'ledger.csv');
    fs.writeFileSync(source, 'date,amount\n2026-11-28,42\n');
    nextBackupAllowed();
    const { id } = json<{ id: string }>(await cli(['backup', source, '--json']));
    const seen = await page.evaluate(
      async ({ url, apiKey, passphrase, id }) => {
        const coffer = window.coffer.connect({ url, apiKey });
        const listed = (await coffer.list()).map((backup) => backup.id);
        const statuses: string[] = [];
        for await (const event of coffer.watch(id)) statuses.push(event.status);
        const vault = await coffer.unlock({ passphrase });
        const verified = await vault.verify(id);
        vault.close();
        await coffer.delete(id);
        const after = await coffer.get(id).then(
          (backup) => backup.status,
          (error: unknown) => (error instanceof window.coffer.NotFoundError ? 'NotFoundError' : String(error)),
        );
        return { listed, statuses, verifiedBytes: verified.plaintextBytes, after };
      },
      { url: server.url, apiKey, passphrase: PASSPHRASE, id },
    );
    expect(seen.listed).toContain(id);
    expect(seen.statuses.at(-1)).toBe('READY');
    expect(seen.verifiedBytes).toBeGreaterThan(0);
    expect(seen.after).toBe('NotFoundError');
    expect(pageErrors).toEqual([]);
  });
});
