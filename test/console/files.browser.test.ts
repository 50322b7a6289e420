/**
 * The file browser of the console in headless Chromium against a real server: a backup made by the CLI (and a
 * zstd one, which the page decodes in JavaScript) is decrypted in the page, its files are listed and filtered,
 * and one file is saved on its own, byte for byte as it was backed up; the whole archive is still saved.
 */
import { spawnSync } from 'node:child_process';
import fsp from 'node:fs/promises';
import path from 'node:path';
import zlib from 'node:zlib';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wipe } from '../../src/client/envelope.js';
import { CofferClient } from '../../src/client/sdk.js';
import { unlockVault } from '../../src/client/vault.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { lacking } from '../helpers/required.js';
import { assertBuilt, canZstd, cliFor, json, makeTree, runCli, tarArchive, uploadArchive, zstdCompress } from '../client/helpers.js';
import { assertConsoleBuilt, hasChromium, launchChromium } from './helpers.js';

const noZstd = lacking(canZstd(), 'zstd');

const PASSPHRASE = 'file browser passphrase';

describe.skipIf(!hasChromium)('the console file browser in headless Chromium', () => {
  let server: TestServer;
  let clock: ManualClock;
  let browser: Browser;
  let page: Page;
  let work: string;
  let source: string;
  let apiKey: string;
  let accountId: string;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    assertBuilt();
    assertConsoleBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    ({ apiKey, accountId } = await server.newKey({ plan: 'pro' }));
    work = tempDir('coffer-files-');
    source = path.join(work, 'photos');
    await makeTree(source);
    expect((await cliFor(server.url, apiKey, PASSPHRASE)(['init'])).code).toBe(0);
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    const link = json(
      await runCli(['admin', 'login-link', accountId, '--json'], { COFFER_DATA_DIR: server.dataDir, COFFER_PUBLIC_URL: server.url }),
    );
    await page.goto(link.url);
    await page.getByRole('heading', { level: 1, name: 'Backups' }).waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  /** Opens a backup's page and decrypts it; resolves with the download of the whole archive. */
  async function decrypt(id: string) {
    await page.goto(`${server.url}/console/backups/${id}`);
    await page.getByLabel('Vault passphrase').fill(PASSPHRASE);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Decrypt and save' }).click()]);
    await page.getByRole('table', { name: 'Files' }).waitFor();
    return download;
  }

  async function saveOne(entryPath: string): Promise<Buffer> {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: `Save ${entryPath}` }).click()]);
    const saved = path.join(work, `saved-${Date.now()}`);
    await download.saveAs(saved);
    return fsp.readFile(saved);
  }

  it('lists the files of a CLI backup, filters them, and saves one file and the whole archive', async () => {
    const { id } = json(await cliFor(server.url, apiKey, PASSPHRASE)(['backup', source, '--json']));
    clock.advance(31 * 60 * 1000);
    const archive = await decrypt(id);
    expect(archive.suggestedFilename()).toMatch(/\.tar$/);

    const rows = page.locator('table[aria-label="Files"] tbody tr');
    const paths = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-path')));
    expect(paths).toEqual(expect.arrayContaining(['top.txt', 'nested/a/b/c/deep.txt', 'ünïcødé/文件 📁.txt', 'empty-dir', 'link-to-deep']));
    const deepRow = page.locator('tr[data-path="nested/a/b/c/deep.txt"]');
    expect(await deepRow.innerText()).toMatch(/-rw-r-----/);

    await page.getByLabel('Filter by path').fill('文件');
    await expect.poll(() => rows.count()).toBe(1);
    expect(await saveOne('ünïcødé/文件 📁.txt')).toEqual(await fsp.readFile(path.join(source, 'ünïcødé/文件 📁.txt')));
    await page.getByLabel('Filter by path').fill('');
    expect(await saveOne('nested/a/b/c/deep.txt')).toEqual(await fsp.readFile(path.join(source, 'nested/a/b/c/deep.txt')));
    expect(pageErrors).toEqual([]);
  });

  it.skipIf(noZstd)('decodes a zstd backup in the page and saves a file from it', async () => {
    const client = new CofferClient({ baseUrl: server.url, apiKey });
    const { masterKey } = await unlockVault(client, PASSPHRASE);
    const body = 'zstd in the browser\n'.repeat(5000);
    let id: string;
    try {
      id = await uploadArchive(
        client,
        masterKey,
        tarArchive([
          { path: 'z', type: 'Directory' },
          { path: 'z/note.txt', body },
        ]),
        {
          compression: 'zstd',
          name: 'zstd-made',
        },
      );
    } finally {
      wipe(masterKey);
    }
    clock.advance(31 * 60 * 1000);
    await decrypt(id);
    expect(await page.locator('tr[data-path="z/note.txt"]').innerText()).toMatch(/\b98 KiB\b/);
    expect((await saveOne('z/note.txt')).toString()).toBe(body);
    expect(pageErrors).toEqual([]);
  });

  it.skipIf(noZstd)('refuses what the CLI refuses: a second frame or member, bytes after it, output past the sealed size', async () => {
    const client = new CofferClient({ baseUrl: server.url, apiKey });
    const { masterKey } = await unlockVault(client, PASSPHRASE);
    const plain = tarArchive([{ path: 'a.txt', body: 'one verdict\n'.repeat(500) }]);
    const more = tarArchive([{ path: 'b.txt', body: 'a second part\n' }]);
    // A zstd frame of 8,192 RLE blocks of 128 KiB: 1 GiB from 32 KiB, sealed as the small tar's size.
    const bomb = Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, (17 - 10) << 3]), Buffer.alloc(8192 * 4)]);
    for (let i = 0; i < 8192; i++) bomb.writeUIntLE(((128 * 1024) << 3) | 2 | (i === 8191 ? 1 : 0), 6 + i * 4, 3);
    // A frame with a content checksum (Coffer's compressor writes none), its last byte flipped.
    const z = zlib as unknown as { zstdCompressSync?: (b: Buffer, o: object) => Buffer; constants: Record<string, number> };
    const checked = z.zstdCompressSync
      ? z.zstdCompressSync(plain, { params: { [z.constants.ZSTD_c_checksumFlag!]: 1 } })
      : spawnSync('zstd', ['-q', '-c', '--check'], { input: plain }).stdout;
    expect(checked[4]! & 4).toBe(4);
    checked[checked.length - 1]! ^= 1;
    const cases: [string, 'gzip' | 'zstd', Buffer, RegExp][] = [
      ['a zstd frame with a wrong checksum', 'zstd', checked, /fails its checksum/],
      ['two gzip members', 'gzip', Buffer.concat([zlib.gzipSync(plain), zlib.gzipSync(more)]), /not valid gzip|after its one member/],
      [
        'a gzip member and trailing zeros',
        'gzip',
        Buffer.concat([zlib.gzipSync(plain), Buffer.alloc(8)]),
        /not valid gzip|after its one member/,
      ],
      ['two zstd frames', 'zstd', Buffer.concat([zstdCompress(plain), zstdCompress(more)]), /bytes after its one frame/],
      ['a zstd frame and trailing junk', 'zstd', Buffer.concat([zstdCompress(plain), Buffer.from('junk')]), /bytes after its one frame/],
      ['a zstd bomb', 'zstd', bomb, /decompresses to more than its sealed/],
      ['a gzip member past the sealed size', 'gzip', zlib.gzipSync(Buffer.concat([plain, more])), /decompresses to more than its sealed/],
    ];
    try {
      for (const [name, compression, compressed, message] of cases) {
        const id = await uploadArchive(client, masterKey, plain, { compression, compressed, name });
        clock.advance(31 * 60 * 1000);
        await page.goto(`${server.url}/console/backups/${id}`);
        await page.getByLabel('Vault passphrase').fill(PASSPHRASE);
        await page.getByRole('button', { name: 'Decrypt and save' }).click();
        const alert = page.locator('#restore-error');
        await alert.waitFor();
        expect(await alert.innerText(), name).toMatch(/failed verification/);
        expect(await alert.innerText(), name).toMatch(message);
        expect(await page.getByRole('table', { name: 'Files' }).count(), name).toBe(0);
      }
    } finally {
      wipe(masterKey);
    }
    expect(pageErrors).toEqual([]);
  });
});
