/** Debian's Chromium driven by playwright-core, started the way this machine needs (no background network). */
import fs from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** CI installs Chromium (.ci/run), so there browser tests always run; elsewhere they run where it is installed. */
export const hasChromium = fs.existsSync(CHROMIUM) || !!process.env.CI;

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
