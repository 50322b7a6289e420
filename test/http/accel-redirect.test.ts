/**
 * COFFER_ACCEL_REDIRECT answers with X-Accel-Redirect only to a request that came through a trusted proxy
 * (docs/deploy.md#downloads-served-by-nginx): its connection's peer address is in COFFER_TRUST_PROXY. Any other
 * request (no proxy configured, another address, a forged X-Forwarded-For) gets the bytes from Coffer itself, so a
 * client reaching Coffer directly restores as usual. The real CLI and real servers on loopback; nginx itself is
 * test/deploy/nginx.test.ts.
 */
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, cliFor, json, makeTree, snapshot } from '../client/helpers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';

const PASSPHRASE = 'accel-redirect passphrase';
const PREFIX = '/_coffer_blobs';

interface Download {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** GET of a backup's content from a chosen local address, with extra headers. */
function download(server: TestServer, apiKey: string, id: string, from: string, headers: Record<string, string> = {}): Promise<Download> {
  return new Promise((resolve, reject) => {
    const request = http.get(
      new URL(`/api/backups/${id}/content`, server.url),
      { headers: { authorization: `Bearer ${apiKey}`, ...headers }, localAddress: from, agent: false },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks) }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
  });
}

/** A server with `env`, one vault and one backup of a small tree made by the real CLI. */
async function withBackup(env: Record<string, string>) {
  const server = await startTestServer({ env: { COFFER_ACCEL_REDIRECT: PREFIX, ...env } });
  const work = tempDir('coffer-accel-direct-');
  const source = path.join(work, 'source');
  await makeTree(source);
  const { apiKey } = await server.newKey({ plan: 'pro' });
  // The CLI's own HOME and XDG directories: nothing of the real user's is read or written.
  const home = path.join(work, 'home');
  const cli = cliFor(server.url, apiKey, PASSPHRASE, {
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_STATE_HOME: path.join(home, '.local/state'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
  });
  const init = await cli(['init']);
  expect(init.code, init.stderr).toBe(0);
  const { id } = json<{ id: string }>(await cli(['backup', source, '--json']));
  const stored = await server.parts.stores.backups.getBackup(id);
  return { server, work, source, apiKey, cli, id, size: stored!.ciphertextSizeBytes! };
}

describe('COFFER_ACCEL_REDIRECT without a trusted proxy', () => {
  let setup: Awaited<ReturnType<typeof withBackup>>;
  beforeAll(async () => {
    assertBuilt();
    setup = await withBackup({});
  });
  afterAll(() => setup?.server.stop());

  it('a direct download streams the real bytes, never an X-Accel-Redirect (also with a forged X-Forwarded-For)', async () => {
    const { server, apiKey, id, size } = setup;
    for (const headers of [{}, { 'x-forwarded-for': '127.0.0.1' }] as Record<string, string>[]) {
      const reply = await download(server, apiKey, id, '127.0.0.1', headers);
      expect(reply.status).toBe(200);
      expect(reply.headers['x-accel-redirect']).toBeUndefined();
      expect(reply.headers['content-length']).toBe(String(size));
      expect(reply.body.length).toBe(size);
    }
    const part = await download(server, apiKey, id, '127.0.0.1', { range: 'bytes=0-9' });
    expect(part.status).toBe(206);
    expect(part.headers['x-accel-redirect']).toBeUndefined();
    expect(part.body.length).toBe(10);
  });

  it('the real CLI restores byte-identical', async () => {
    const { cli, id, work, source } = setup;
    const target = path.join(work, 'restored');
    const restored = await cli(['restore', id, target]);
    expect(restored.code, restored.stderr).toBe(0);
    expect(await snapshot(target)).toEqual(await snapshot(source));
  });
});

describe('COFFER_ACCEL_REDIRECT with COFFER_TRUST_PROXY=127.0.0.1', () => {
  let setup: Awaited<ReturnType<typeof withBackup>>;
  beforeAll(async () => {
    assertBuilt();
    setup = await withBackup({ COFFER_TRUST_PROXY: '127.0.0.1' });
  });
  afterAll(() => setup?.server.stop());

  it('a request from the trusted address gets the X-Accel-Redirect and no body', async () => {
    const { server, apiKey, id } = setup;
    const reply = await download(server, apiKey, id, '127.0.0.1');
    expect(reply.status).toBe(200);
    expect(reply.headers['x-accel-redirect']).toMatch(new RegExp(`^${PREFIX}/backups/[0-9a-f-]+/${id}/[A-Za-z0-9._-]+$`));
    expect(reply.body.length).toBe(0);
  });

  it('a request from another address gets the bytes, whatever X-Forwarded-For it sends', async () => {
    const { server, apiKey, id, size } = setup;
    for (const headers of [{}, { 'x-forwarded-for': '127.0.0.1' }, { 'x-forwarded-for': '203.0.113.5, 127.0.0.1' }] as Record<
      string,
      string
    >[]) {
      const reply = await download(server, apiKey, id, '127.0.0.2', headers);
      expect(reply.status).toBe(200);
      expect(reply.headers['x-accel-redirect'], JSON.stringify(headers)).toBeUndefined();
      expect(reply.body.length).toBe(size);
    }
  });
});
