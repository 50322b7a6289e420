/**
 * The fixture page of the SDK's browser tests: test/sdk/fixtures/browser-page.ts bundled for the browser and served,
 * with a page that loads it, by a small loopback server of its own: another origin than the API's, as an
 * application's page is (the API answers it by its CORS policy, src/http/hardening.ts).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { ROOT } from '../client/helpers.js';
import { bundleForBrowser } from './browser-bundle.js';

const PAGE_SCRIPT = path.join(ROOT, 'test/sdk/fixtures/browser-page.ts');

const HTML = '<!doctype html><meta charset="utf-8"><title>SDK fixture</title><script type="module" src="/page.js"></script>';

export interface FixturePage {
  url: string;
  close(): Promise<void>;
}

/** Bundles the fixture page's script and serves it at `/` (the page) and `/page.js` on 127.0.0.1. */
export async function serveFixturePage(): Promise<FixturePage> {
  const { code } = await bundleForBrowser(PAGE_SCRIPT);
  const server = http.createServer((request, response) => {
    if (request.url === '/page.js') response.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(code);
    else if (request.url === '/') response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(HTML);
    else response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
