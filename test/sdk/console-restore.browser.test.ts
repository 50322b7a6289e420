/**
 * A backup the SDK's browser entry makes restores in the owner's console: in real Chromium, the fixture page (bundled
 * from src/client/browser.ts, on its own loopback origin) backs up a File, its data key sealed either to the vault's
 * recipient (a write-only session) or by the master key (a vault unlocked with the passphrase), and named entries (a
 * tar archive) both ways; then the console the server serves at /console, signed in to the same account, unlocks with
 * the passphrase, decrypts that backup and saves it whole and file by file, byte for byte as the page backed it up.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import * as tar from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dekForm } from '../../src/client/key-usage.js';
import { CofferClient } from '../../src/client/sdk.js';
import { ManualClock } from '../helpers/clock.js';
import { tempDir } from '../helpers/tmp.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assertBuilt, cliFor, json, runCli } from '../client/helpers.js';
import { assertConsoleBuilt, hasChromium, launchChromium } from '../console/helpers.js';
import { serveFixturePage, type FixturePage } from './browser-page.js';

const PASSPHRASE = 'sdk to console passphrase';

/** How the page seals the backup's data key: to the recipient only, or by the vault unlocked with the passphrase. */
type Sealing = { recipient: string } | { passphrase: string };
/** The form of the wrapped data key each sealing leaves on the server (src/client/key-usage.ts). */
const dekFormOf = (sealing: Sealing) => ('recipient' in sealing ? 'sealed' : 'master');
/** What the page backs up: one File (a raw backup), or named entries (a tar archive). */
type Shape = 'one File' | 'named entries';
type PlainFile = { name: string; bytes: Buffer };

describe.skipIf(!hasChromium)('a backup the SDK makes in Chromium restores in the owner console', () => {
  let server: TestServer;
  let clock: ManualClock;
  let fixture: FixturePage;
  let browser: Browser;
  let sdkPage: Page;
  let consolePage: Page;
  let apiKey: string;
  let recipient: string;
  let work: string;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    assertBuilt();
    assertConsoleBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    let accountId: string;
    ({ apiKey, accountId } = await server.newKey({ plan: 'pro' }));
    const cli = cliFor(server.url, apiKey, PASSPHRASE);
    expect((await cli(['init'])).code).toBe(0);
    ({ recipient } = json<{ recipient: string }>(await cli(['recipient', '--json'])));
    work = tempDir('coffer-sdk-console-');
    fixture = await serveFixturePage();
    browser = await launchChromium();
    sdkPage = await browser.newPage();
    sdkPage.on('pageerror', (error) => pageErrors.push(`sdk page: ${String(error)}`));
    await sdkPage.goto(fixture.url);
    await sdkPage.waitForFunction(() => window.coffer !== undefined);
    const consoleContext = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    consolePage = await consoleContext.newPage();
    consolePage.on('pageerror', (error) => pageErrors.push(`console: ${String(error)}`));
    const link = json<{ url: string }>(
      await runCli(['admin', 'login-link', accountId, '--json'], { COFFER_DATA_DIR: server.dataDir, COFFER_PUBLIC_URL: server.url }),
    );
    await consolePage.goto(link.url);
    await consolePage.getByRole('heading', { level: 1, name: 'Backups' }).waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await fixture?.close();
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  /**
   * Backs up `files` from the SDK page, sealed as `sealing` says: one File (a raw backup of that file), or named
   * entries (a tar archive of them). The backup's id, once READY.
   */
  async function backUpInPage(files: PlainFile[], shape: Shape, sealing: Sealing): Promise<string> {
    clock.advance(31 * 60 * 1000); // past the plan's cadence
    const made = await sdkPage.evaluate(
      async ({ url, apiKey, sealing, shape, files }) => {
        const coffer = window.coffer.connect({ url, apiKey });
        const session = 'recipient' in sealing ? coffer.writer(sealing.recipient) : await coffer.unlock(sealing);
        const decoded = files.map(({ name, base64 }) => ({ name, data: Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)) }));
        const source = shape === 'one File' ? new File([decoded[0]!.data], decoded[0]!.name) : decoded;
        const backup = await session.backup(source, { hostappVersion: 'fixture-page/1.0' });
        if ('close' in session) session.close();
        return { id: backup.id, status: backup.detail.status };
      },
      { url: server.url, apiKey, sealing, shape, files: files.map(({ name, bytes }) => ({ name, base64: bytes.toString('base64') })) },
    );
    expect(made.status).toBe('READY');
    const stored = await new CofferClient({ baseUrl: server.url, apiKey }).getBackup(made.id);
    expect(dekForm(stored.wrappedDek)?.form).toBe(dekFormOf(sealing));
    return made.id;
  }

  /** Waits for the download `click` starts and saves it in the work directory: its suggested name and its path. */
  async function saveDownload(click: () => Promise<void>): Promise<{ name: string; saved: string }> {
    const [download] = await Promise.all([consolePage.waitForEvent('download'), click()]);
    const saved = path.join(work, `download-${savedCount++}`);
    await download.saveAs(saved);
    return { name: download.suggestedFilename(), saved };
  }
  let savedCount = 0;

  /** Opens the backup in the console, unlocks with the passphrase and decrypts it: the download it offers. */
  async function decryptInConsole(id: string) {
    await consolePage.goto(`${server.url}/console/backups/${id}`);
    await consolePage.getByLabel('Vault passphrase').fill(PASSPHRASE);
    const whole = await saveDownload(() => consolePage.getByRole('button', { name: 'Decrypt and save' }).click());
    await consolePage.getByRole('table', { name: 'Files' }).waitFor();
    return whole;
  }

  /** Saves one file from the console's file list: its bytes. */
  async function saveOneInConsole(name: string): Promise<Buffer> {
    const { saved } = await saveDownload(() => consolePage.getByRole('button', { name: `Save ${name}` }).click());
    return fs.readFileSync(saved);
  }

  /** The files the console lists for the decrypted backup. */
  const listedInConsole = () =>
    consolePage.locator('table[aria-label="Files"] tbody tr').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-path')));

  const sealings: [string, () => Sealing][] = [
    ['sealed to the recipient by a write-only session', () => ({ recipient })],
    ['sealed by the vault unlocked with the passphrase', () => ({ passphrase: PASSPHRASE })],
  ];

  it.each(sealings)('restores one File the page backed up, %s, byte for byte', async (_how, sealing) => {
    const file = { name: 'statement.bin', bytes: randomBytes(300 * 1024 + 11) };
    const id = await backUpInPage([file], 'one File', sealing());
    const whole = await decryptInConsole(id);
    expect(whole.name).toBe(file.name);
    expect(fs.readFileSync(whole.saved).equals(file.bytes)).toBe(true);
    expect(await listedInConsole()).toEqual([file.name]);
    expect((await saveOneInConsole(file.name)).equals(file.bytes)).toBe(true);
    expect(pageErrors).toEqual([]);
  });

  it.each(sealings)('restores named entries the page backed up, %s, as a tar and file by file', async (_how, sealing) => {
    const files = [
      { name: 'ledger/2026.csv', bytes: randomBytes(150 * 1024 + 5) },
      { name: 'notes.txt', bytes: Buffer.from('kept by the page\n') },
    ];
    const id = await backUpInPage(files, 'named entries', sealing());
    const whole = await decryptInConsole(id);
    expect(whole.name).toMatch(/\.tar$/);
    const unpacked = path.join(work, `unpacked-${id}`);
    fs.mkdirSync(unpacked);
    await tar.x({ file: whole.saved, cwd: unpacked, strict: true });
    expect(await listedInConsole()).toEqual(expect.arrayContaining(files.map((file) => file.name)));
    for (const file of files) {
      expect(fs.readFileSync(path.join(unpacked, file.name)).equals(file.bytes), file.name).toBe(true);
      expect((await saveOneInConsole(file.name)).equals(file.bytes), file.name).toBe(true);
    }
    expect(pageErrors).toEqual([]);
  });
});
