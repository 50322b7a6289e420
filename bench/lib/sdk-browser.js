/* global window, performance, fetch */
/**
 * bench/sdk.js in Chromium: a restore through the SDK's browser entry (bundled with esbuild into a page of its own
 * origin, as an application's page is) side by side with the console's restore ("Decrypt and save" on the backup's
 * page), of the same backup, both unlocking with the passphrase (Argon2id in WebAssembly). Timed in the page, from
 * the first call (the SDK) or the click (the console) to the last byte verified ("Decrypted and verified.").
 */
import http from 'node:http';
import path from 'node:path';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import { DIST } from './common.js';

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
];

/** A page on 127.0.0.1 whose script exposes the SDK's browser entry as `window.coffer`. */
async function sdkPage() {
  const result = await build({
    stdin: { contents: 'import * as coffer from "./browser.js"; window.coffer = coffer;', resolveDir: path.join(DIST, 'client') },
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    minify: true,
    write: false,
    logLevel: 'silent',
  });
  const script = result.outputFiles[0].text;
  const html = '<!doctype html><meta charset="utf-8"><script type="module" src="/page.js"></script>';
  const server = http.createServer((request, response) => {
    if (request.url === '/page.js') response.writeHead(200, { 'content-type': 'text/javascript' }).end(script);
    else response.writeHead(200, { 'content-type': 'text/html' }).end(html);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}/`, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** The console's session cookie for `apiKey` (the console's sign-in with an API key). */
async function consoleCookie(serverUrl, apiKey) {
  const answer = await fetch(`${serverUrl}/console/api/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: serverUrl },
    body: JSON.stringify({ apiKey }),
  });
  if (answer.status !== 200) throw new Error(`console sign-in answered ${answer.status}`);
  const [name, value] = answer.headers.get('set-cookie').split(';')[0].split('=');
  return { name, value, url: serverUrl };
}

/** Seconds to restore `backupId` in the SDK page: connect, unlock, every entry's bytes read. */
async function restoreWithSdk(page, { url, apiKey, passphrase, backupId }) {
  const { ms, bytes } = await page.evaluate(
    async ({ url, apiKey, passphrase, backupId }) => {
      const started = performance.now();
      const coffer = await window.coffer.connect({ url, apiKey });
      const vault = await coffer.unlock({ passphrase });
      let bytes = 0;
      for await (const entry of vault.restore(backupId)) {
        if (!entry.stream) continue;
        const reader = entry.stream.getReader();
        for (let next = await reader.read(); !next.done; next = await reader.read()) bytes += next.value.length;
      }
      (vault.lock ?? vault.close).call(vault);
      return { ms: performance.now() - started, bytes };
    },
    { url, apiKey, passphrase, backupId },
  );
  return { seconds: ms / 1000, bytes };
}

/** Seconds from "Decrypt and save" to "Decrypted and verified." on the console's page of `backupId`. */
async function restoreWithConsole(page, { url, passphrase, backupId }) {
  await page.goto(`${url}/console/backups/${backupId}`);
  await page.getByLabel('Vault passphrase').fill(passphrase);
  const started = Date.now();
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Decrypt and save' }).click()]);
  await page.getByText('Decrypted and verified.').waitFor({ timeout: 300_000 });
  const seconds = (Date.now() - started) / 1000;
  await download.delete();
  return { seconds };
}

/**
 * `rounds` restores of `backupId` by each, interleaved: { sdk: [s], console: [s] }. The SDK's must read back
 * `expectedBytes` of files; the console's is checked by the console itself ("Decrypted and verified.").
 */
export async function browserRestores({ url, apiKey, passphrase, backupId, expectedBytes, rounds, log }) {
  const site = await sdkPage();
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  const samples = { sdk: [], console: [] };
  try {
    const context = await browser.newContext({ acceptDownloads: true });
    await context.addCookies([await consoleCookie(url, apiKey)]);
    const sdk = await context.newPage();
    await sdk.goto(site.url);
    await sdk.waitForFunction(() => window.coffer !== undefined);
    const console_ = await context.newPage();
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? ['sdk', 'console'] : ['console', 'sdk'];
      for (const who of order) {
        if (who === 'sdk') {
          const { seconds, bytes } = await restoreWithSdk(sdk, { url, apiKey, passphrase, backupId });
          if (bytes !== expectedBytes) throw new Error(`the SDK restored ${bytes} bytes of files, not ${expectedBytes}`);
          samples.sdk.push(seconds);
        } else samples.console.push((await restoreWithConsole(console_, { url, passphrase, backupId })).seconds);
      }
      log(`SDK in Chromium, round ${r + 1}: sdk ${samples.sdk.at(-1).toFixed(2)} s, console ${samples.console.at(-1).toFixed(2)} s`);
    }
  } finally {
    await browser.close();
    await site.close();
  }
  return samples;
}
