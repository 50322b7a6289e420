/**
 * /api-docs: the page and every asset it references are served by Coffer itself; in headless Chromium (Debian
 * `chromium`, driven by playwright-core) it renders every operation of /openapi.json, makes no request outside the
 * server's origin, and logs no console error. A screenshot goes to test-artifacts/ (not committed).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { get } from './helpers.js';
import { hasChromium, launchChromium } from '../helpers/browser.js';

const ARTIFACTS = path.resolve('test-artifacts');

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server?.stop());

function operationSummaries(openapi: { paths: Record<string, Record<string, { summary: string }>> }): string[] {
  return Object.values(openapi.paths).flatMap((item) => Object.values(item).map((operation) => operation.summary));
}

describe('/api-docs page and assets', () => {
  it('is HTML whose every script, style and icon is a same-origin URL that Coffer serves', async () => {
    const page = await get(`${server.url}/api-docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.text).not.toMatch(/https?:\/\//);
    const refs = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(refs).toEqual(expect.arrayContaining(['./api-docs/scalar.js', './openapi.json']));
    for (const ref of refs) {
      const url = new URL(ref, `${server.url}/api-docs`);
      expect(url.origin).toBe(server.url);
      const asset = await get(url.href);
      expect(asset.status, ref).toBe(200);
    }
    const script = await get(`${server.url}/api-docs/scalar.js`);
    expect(script.headers.get('content-type')).toMatch(/^application\/javascript/);
    expect(script.bytes.length).toBeGreaterThan(1_000_000);
    expect(script.text).toContain('createApiReference');
    const cached = await get(`${server.url}/api-docs/scalar.js`, { headers: { 'if-none-match': script.headers.get('etag')! } });
    expect(cached.status).toBe(304);
  });
});

// Runs wherever Chromium is installed; CI (.ci/run) installs it, so there it always runs.
describe.skipIf(!hasChromium)('/api-docs in headless Chromium', () => {
  it('renders every operation, requests nothing outside the origin, logs no console error', async () => {
    const openapi = JSON.parse((await get(`${server.url}/openapi.json`)).text);
    const summaries = operationSummaries(openapi);
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      const requests: string[] = [];
      const failed: string[] = [];
      const consoleErrors: string[] = [];
      page.on('request', (request) => requests.push(request.url()));
      page.on('requestfailed', (request) => failed.push(`${request.url()} ${request.failure()?.errorText}`));
      page.on('console', (message) => {
        if (message.type() === 'error') consoleErrors.push(message.text());
      });
      page.on('pageerror', (error) => consoleErrors.push(String(error)));

      const response = await page.goto(`${server.url}/api-docs`, { waitUntil: 'load' });
      expect(response?.status()).toBe(200);
      await page.waitForFunction(
        (expected: string[]) => expected.every((summary) => document.body.innerText.includes(summary)),
        summaries,
        { timeout: 20_000 },
      );
      await page.waitForLoadState('networkidle');
      fs.mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: path.join(ARTIFACTS, 'api-docs.png') });

      const text = await page.evaluate(() => document.body.innerText);
      for (const summary of summaries) expect(text).toContain(summary);
      expect(text).toContain(openapi.info.title);
      const foreign = requests.filter((url) => !url.startsWith(`${server.url}/`) && !url.startsWith('data:') && !url.startsWith('blob:'));
      expect(foreign).toEqual([]);
      expect(failed).toEqual([]);
      expect(consoleErrors).toEqual([]);
      expect(requests).toContain(`${server.url}/openapi.json`);
    } finally {
      await browser.close();
    }
  });
});
