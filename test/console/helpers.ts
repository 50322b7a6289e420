/** Console test helpers: the built page, Chromium, a proxy that can hold a request, small HTTP pages elsewhere. */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { ROOT } from '../client/helpers.js';
import { expect } from 'vitest';

export const ARTIFACTS = path.resolve(ROOT, 'test-artifacts');

/** Fails clearly when the console page or the CLI package is not built (`npm run build`). */
export function assertConsoleBuilt(): void {
  for (const file of ['dist/console-ui/index.html', 'dist/downloads/coffer-cli.tgz', 'dist/cli/main.js']) {
    if (!fs.existsSync(path.join(ROOT, file))) throw new Error(`${file} is missing: run \`npm run build\` first`);
  }
}

/** A forwarding proxy that holds every request matching `hold` until released (the rest flows through). */
export async function holdingProxy(upstream: string, hold: RegExp) {
  const held: (() => void)[] = [];
  let arrived: () => void = () => undefined;
  const firstHeld = new Promise<void>((resolve) => (arrived = resolve));
  const proxy = http.createServer((req, res) => {
    const forward = () => {
      const upstreamRequest = http.request(new URL(req.url!, upstream), { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(res);
      });
      upstreamRequest.on('error', () => res.destroy());
      req.pipe(upstreamRequest);
    };
    if (hold.test(req.url!)) {
      held.push(forward);
      arrived();
    } else forward();
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    firstHeld,
    release: () => held.splice(0).forEach((go) => go()),
    close: () => new Promise<void>((resolve) => proxy.close(() => resolve())),
  };
}

/** Serves one HTML page on 127.0.0.1 (another port), reachable as http://127.0.0.1:<port> and http://localhost:<port>. */
export async function htmlServer(html: string) {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

export { hasChromium, launchChromium } from '../helpers/browser.js';

/** Signs in to the console with an API key; the session cookie and its CSRF token. */
export async function signInWithKey(serverUrl: string, apiKey: string): Promise<{ cookie: string; csrf: string }> {
  const response = await fetch(`${serverUrl}/console/api/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: serverUrl },
    body: JSON.stringify({ apiKey }),
  });
  expect(response.status).toBe(200);
  const { csrfToken } = (await response.json()) as { csrfToken: string };
  return { cookie: response.headers.get('set-cookie')!.split(';')[0]!, csrf: csrfToken };
}
