/** Debian's Chromium driven by playwright-core, started the way this machine needs (no background network). */
import fs from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { lacking } from './required.js';

export const CHROMIUM = '/usr/bin/chromium';

/**
 * Whether the browser tests run: where Chromium is installed, or where the run requires `chromium` (.ci/run installs
 * it; test/helpers/required.ts), so that they fail there without it. `describe.skipIf(!hasChromium)`.
 */
export const hasChromium = !lacking(fs.existsSync(CHROMIUM), 'chromium');

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
