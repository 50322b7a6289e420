/**
 * An account without backups, in headless Chromium against a real server and the real CLI (issue 35 point 20): the
 * Backups page suggests the step that works for the account's actual state (a key first, then `coffer init`, then
 * `coffer backup`), never `coffer backup` before there is a key or a vault; and at 390 px no word inside a code
 * element breaks across lines on the console's pages (a long command scrolls in its block instead), with no
 * sideways scroll of the page.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assertBuilt, cliFor } from '../client/helpers.js';
import { ARTIFACTS, assertConsoleBuilt, hasChromium, launchChromium } from './helpers.js';

describe.skipIf(!hasChromium)(
  "the empty Backups page suggests the account's next step; code never breaks mid-word at 390 px",
  { timeout: 180_000 },
  () => {
    let server: TestServer;
    let browser: Browser;
    const pageErrors: string[] = [];

    beforeAll(async () => {
      assertBuilt();
      assertConsoleBuilt();
      fs.mkdirSync(ARTIFACTS, { recursive: true });
      server = await startTestServer();
      browser = await launchChromium();
    });

    afterAll(async () => {
      await browser?.close();
      await server?.stop();
    });

    async function signedIn(accountId: string, width: number): Promise<Page> {
      const context = await browser.newContext({ viewport: { width, height: 844 } });
      const page = await context.newPage();
      page.on('pageerror', (error) => pageErrors.push(String(error)));
      const { token } = (await server.parts.sessions.createLoginLink(accountId))!;
      await page.goto(`${server.url}/console/login#token=${token}`);
      await page.getByRole('heading', { level: 1, name: 'Backups' }).waitFor();
      return page;
    }

    const nextStep = async (accountId: string) => {
      const page = await signedIn(accountId, 1280);
      const text = await page.getByTestId('next-step').innerText();
      await page.context().close();
      return text;
    };

    it('no key: make one first; a key but no vault: coffer init; a vault: coffer backup', async () => {
      const bare = await server.parts.keys.createAccount('plus');
      const noKey = await nextStep(bare.id);
      expect(noKey).toMatch(/^First make an API key/);
      expect(noKey).not.toContain('coffer backup');

      const { accountId, apiKey } = await server.newKey({ plan: 'plus' });
      const noVault = await nextStep(accountId);
      expect(noVault).toMatch(/^Next, create your vault .*coffer init/);

      const init = await cliFor(server.url, apiKey, 'next step passphrase')(['init']);
      expect(init.code, init.stderr).toBe(0);
      expect(await nextStep(accountId)).toMatch(/^Make one with the CLI: coffer backup/);
      expect(pageErrors).toEqual([]);
    });

    it('at 390 px: no word inside code breaks across lines, and no page scrolls sideways', async () => {
      const { accountId } = await server.newKey({ plan: 'plus' });
      const page = await signedIn(accountId, 390);
      for (const route of ['', '/plan', '/vault', '/keys', '/cli']) {
        await page.goto(`${server.url}/console${route}`);
        await page.locator('main h1').waitFor();
        await page.locator('main code').first().waitFor();
        await page.waitForLoadState('networkidle');
        // Every run of non-space characters inside <code>: its characters' boxes on one line.
        const broken = await page.evaluate(() => {
          const found: string[] = [];
          for (const code of document.querySelectorAll('main code')) {
            const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
              for (const match of (node.textContent ?? '').matchAll(/\S+/g)) {
                const range = document.createRange();
                range.setStart(node, match.index);
                range.setEnd(node, match.index + match[0].length);
                const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
                if (tops.size > 1) found.push(match[0]);
              }
            }
          }
          return found;
        });
        expect(broken, `words broken across lines on /console${route}`).toEqual([]);
        expect(await page.evaluate(() => document.scrollingElement!.scrollWidth <= window.innerWidth), route).toBe(true);
        await page.screenshot({ path: path.join(ARTIFACTS, `next-step-390${route.replace('/', '-') || '-backups'}.png`), fullPage: true });
      }
      await page.context().close();
      expect(pageErrors).toEqual([]);
    });
  },
);
