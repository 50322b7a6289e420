/**
 * COFFER_TRUST_PROXY (docs/deploy.md#client-addresses-behind-a-proxy): the client address that per-address limits
 * count comes from X-Forwarded-For only when the connection comes from a trusted proxy. Here the test client plays
 * the proxy itself, connecting from chosen loopback addresses; test/deploy/nginx.test.ts does it with a real nginx.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSlot, useServer } from '../helpers/fixture.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** One malformed sign-in attempt (it still counts against the limit); resolves to the status code. */
function signIn(server: TestServer, headers: Record<string, string>, from = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      new URL('/console/api/session', server.url),
      { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, localAddress: from, agent: false },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode!));
      },
    );
    request.on('error', reject);
    request.end('{}');
  });
}

const LIMIT = { COFFER_SIGNIN_ATTEMPTS: '2', COFFER_SIGNIN_WINDOW: '10m' };

describe('without COFFER_TRUST_PROXY', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: LIMIT });
  });
  afterAll(() => server?.stop());

  it('a forged X-Forwarded-For does not escape the per-address limit', async () => {
    const statuses = [];
    for (const forged of ['203.0.113.1', '203.0.113.2', '203.0.113.3', '198.51.100.7, 203.0.113.4']) {
      statuses.push(await signIn(server, { 'x-forwarded-for': forged }));
    }
    expect(statuses).toEqual([400, 400, 429, 429]);
    // The limit is the connection's address: another one still has its attempts.
    expect(await signIn(server, { 'x-forwarded-for': '203.0.113.1' }, '127.0.0.2')).toBe(400);
  });
});

describe('with COFFER_TRUST_PROXY naming the proxy', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { ...LIMIT, COFFER_TRUST_PROXY: '127.0.0.1' } });
  });
  afterAll(() => server?.stop());

  it('counts each forwarded client address separately', async () => {
    const a = { 'x-forwarded-for': '203.0.113.1' };
    const b = { 'x-forwarded-for': '203.0.113.2' };
    expect([await signIn(server, a), await signIn(server, a), await signIn(server, a)]).toEqual([400, 400, 429]);
    expect([await signIn(server, b), await signIn(server, b), await signIn(server, b)]).toEqual([400, 400, 429]);
  });

  it('believes only the trusted hop: an address the client put in front of its own is ignored', async () => {
    // The proxy appends the address it saw (203.0.113.9); what the client sent before it is not trusted.
    const forged = (n: number) => ({ 'x-forwarded-for': `198.51.100.${n}, 203.0.113.9` });
    expect([await signIn(server, forged(1)), await signIn(server, forged(2)), await signIn(server, forged(3))]).toEqual([400, 400, 429]);
  });

  it('a connection from an untrusted address is counted as itself, whatever it forwards', async () => {
    const statuses = [];
    for (const n of [1, 2, 3]) statuses.push(await signIn(server, { 'x-forwarded-for': `192.0.2.${n}` }, '127.0.0.3'));
    expect(statuses).toEqual([400, 400, 429]);
  });
});

/** Opens an event stream and resolves with the name of its first event; the stream stays open until closed. */
function firstEvent(baseUrl: string, apiKey: string, backupId: string, forwardedFor: string) {
  let request!: http.ClientRequest;
  const event = new Promise<string>((resolve, reject) => {
    request = http.get(
      `${baseUrl}/api/backups/${backupId}/events`,
      { headers: { authorization: `Bearer ${apiKey}`, 'x-forwarded-for': forwardedFor }, agent: false },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          text += chunk;
          const match = /^event: (.+)$/m.exec(text);
          if (match) resolve(match[1]!);
        });
        response.on('end', () => reject(new Error(`the stream ended without an event: ${text}`)));
      },
    );
    request.on('error', reject);
  });
  return { event, close: () => request.destroy() };
}

describe.each([
  { trust: undefined, second: 'backup.stream.error' },
  { trust: '127.0.0.1', second: 'backup.status' },
])('open event streams per address (COFFER_TRUST_PROXY=$trust)', ({ trust, second }) => {
  const fx = useServer({ env: { COFFER_SSE_MAX_PER_ADDRESS: '1', ...(trust ? { COFFER_TRUST_PROXY: trust } : {}) } });

  it(`a second forwarded address gets ${second}`, async () => {
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    const first = firstEvent(fx.server.url, apiKey, id, '203.0.113.1');
    try {
      // The first stream is counted before the second opens.
      expect(await first.event).toBe('backup.status');
      const other = firstEvent(fx.server.url, apiKey, id, '203.0.113.2');
      try {
        expect(await other.event).toBe(second);
      } finally {
        other.close();
      }
    } finally {
      first.close();
    }
  });
});
