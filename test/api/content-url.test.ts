/**
 * Extension s3-presigned-download (docs/api-rules.md#s3-presigned-download), on a real server with the S3 store on
 * s3rver and on Ceph's RADOS Gateway: `GET /api/backups/{id}/content-url` answers a presigned GET of a READY
 * backup's ciphertext, with the checks and answers of `/content` (scope, the owner reading its host accounts'
 * backups, 404 for everything else); `GET /api/backups/{id}` announces it; the URL fetches the bytes (also a Range)
 * and is refused by the store once COFFER_S3_URL_LIFETIME is over; no URL reaches the server's log. Off (the
 * default, or the fs store): the route answers as an unknown route.
 */
import net from 'node:net';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope, finalizeBody } from '../helpers/api.js';
import { Conformance, conformantApi } from '../helpers/conformance.js';
import { bytes, readyBackup } from '../helpers/fixture.js';
import { S3_ENGINES, skipEngine, startS3, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** A server (and its log lines) on a fresh bucket of `s3` with `env`. */
async function serve(s3: TestS3 | undefined, env: Record<string, string>) {
  const log: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      log.push(chunk.toString('utf8'));
      done();
    },
  });
  const server = await startTestServer({ env: { ...s3?.env, ...env }, logger: { level: 'trace', stream: sink } });
  const conformance = await Conformance.load(server.url);
  const client = (apiKey?: string) => conformantApi(server.url, conformance, apiKey);
  const account = async (scopes?: Parameters<TestServer['newKey']>[0]) => {
    const { apiKey, accountId } = await server.newKey({ plan: 'pro', ...scopes });
    const admin = client((await server.newKey({ accountId })).apiKey);
    const bootstrapped = await admin('POST', '/api/backup-account/bootstrap', { json: envelope() });
    if (bootstrapped.status !== 200) throw new Error(`bootstrap failed: ${bootstrapped.text}`);
    return { apiKey, accountId, call: client(apiKey) };
  };
  return { server, log, client, account };
}

const fetchBytes = async (url: string, headers: Record<string, string> = {}) => {
  const response = await fetch(url, { headers });
  return { status: response.status, headers: response.headers, body: Buffer.from(await response.arrayBuffer()) };
};

for (const engine of S3_ENGINES) {
  describe.skipIf(skipEngine(engine))(`GET /api/backups/{id}/content-url on ${engine}`, () => {
    let s3: TestS3;
    let setup: Awaited<ReturnType<typeof serve>>;
    let owner: Awaited<ReturnType<Awaited<ReturnType<typeof serve>>['account']>>;
    let backup: { id: string; data: Buffer };
    beforeAll(async () => {
      s3 = await startS3(engine);
      setup = await serve(s3, { COFFER_S3_PRESIGNED: 'on' });
      owner = await setup.account();
      backup = await readyBackup(owner.call, 300_000, 11);
    });
    afterAll(async () => {
      await setup?.server.stop();
      await s3?.close();
    });

    it('GET /api/backups/{id} announces the extension; content-url answers a URL that GETs the ciphertext', async () => {
      const detail = await owner.call('GET', `/api/backups/${backup.id}`);
      expect(detail.status).toBe(200);
      expect(detail.headers.get('coffer-extensions')).toBe('s3-presigned-download');

      const before = Date.now();
      const answer = await owner.call('GET', `/api/backups/${backup.id}/content-url`);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('cache-control')).toBe('no-store');
      expect(Object.keys(answer.body).sort()).toEqual(['expiresAt', 'size', 'url']);
      expect(answer.body.size).toBe(backup.data.length);
      const expiresAt = Date.parse(answer.body.expiresAt);
      // The default lifetime, 15 minutes.
      expect(expiresAt).toBeGreaterThan(before + 14 * 60_000);
      expect(expiresAt).toBeLessThanOrEqual(Date.now() + 15 * 60_000);
      expect(new URL(answer.body.url).origin).toBe(new URL(s3.endpoint).origin);

      const whole = await fetchBytes(answer.body.url);
      expect(whole.status).toBe(200);
      expect(whole.body.equals(backup.data)).toBe(true);
      const part = await fetchBytes(answer.body.url, { range: 'bytes=1000-1999' });
      expect(part.status).toBe(206);
      expect(part.headers.get('content-range')).toBe(`bytes 1000-1999/${backup.data.length}`);
      expect(part.body.equals(backup.data.subarray(1000, 2000))).toBe(true);
    });

    it('needs backups:restore; the same 404 answers as /content for what the caller may not read or is not READY', async () => {
      const { id } = backup;
      const readOnly = setup.client((await setup.server.newKey({ accountId: owner.accountId, scopes: ['backups:read'] })).apiKey);
      expect((await readOnly('GET', `/api/backups/${id}/content-url`)).status).toBe(403);
      expect((await setup.client()('GET', `/api/backups/${id}/content-url`)).status).toBe(401);

      const stranger = await setup.account();
      for (const path of [`/api/backups/${id}/content`, `/api/backups/${id}/content-url`]) {
        const refused = await stranger.call('GET', path);
        expect(refused.status, path).toBe(404);
        expect(refused.body.code).toBe('backup_not_found');
        expect(refused.text).not.toContain('X-Amz');
      }
      for (const unknown of ['0190aaaa-0000-7000-8000-000000000000', 'not-a-uuid']) {
        expect((await owner.call('GET', `/api/backups/${unknown}/content-url`)).body.code).toBe('backup_not_found');
      }
      // A slot still pending, then uploaded but not finalized: no content yet.
      const other = await setup.account();
      const slot = (await other.call('POST', '/api/backups')).body.backupId as string;
      expect((await other.call('GET', `/api/backups/${slot}/content-url`)).body.code).toBe('backup_content_unavailable');
      const uploaded = await other.call('POST', `/api/backups/upload?backupId=${slot}`, {
        body: new Uint8Array(bytes(100)),
        headers: { 'content-type': 'application/octet-stream' },
      });
      expect(uploaded.status).toBe(201);
      const pending = await other.call('GET', `/api/backups/${slot}/content-url`);
      expect(pending.status).toBe(404);
      expect(pending.body.code).toBe('backup_content_unavailable');
      // Deleted: gone for content-url as for everything else.
      expect((await other.call('POST', `/api/backups/${slot}/finalize`, { json: finalizeBody(100) })).status).toBe(200);
      expect((await other.call('GET', `/api/backups/${slot}/content-url`)).status).toBe(200);
      expect((await other.call('DELETE', `/api/backups/${slot}`)).status).toBe(200);
      expect((await other.call('GET', `/api/backups/${slot}/content-url`)).body.code).toBe('backup_not_found');
    });

    it('an owner reads its host account’s backup by URL; the host’s sibling and the host itself read nothing of the owner', async () => {
      const host = await setup.server.parts.keys.addHost(owner.accountId, { label: `web-${engine}` });
      const hostCall = setup.client(host.apiKey);
      const slot = (await hostCall('POST', '/api/backups')).body.backupId as string;
      const data = bytes(5000, 3);
      expect(
        (
          await hostCall('POST', `/api/backups/upload?backupId=${slot}`, {
            body: new Uint8Array(data),
            headers: { 'content-type': 'application/octet-stream' },
          })
        ).status,
      ).toBe(201);
      expect((await hostCall('POST', `/api/backups/${slot}/finalize`, { json: finalizeBody(data.length) })).status).toBe(200);

      const answer = await owner.call('GET', `/api/backups/${slot}/content-url`);
      expect(answer.status).toBe(200);
      expect((await fetchBytes(answer.body.url)).body.equals(data)).toBe(true);
      // The host's key is write-only: no restore scope.
      expect((await hostCall('GET', `/api/backups/${slot}/content-url`)).status).toBe(403);
      // Another account with its own restore key reads neither.
      const stranger = await setup.account();
      expect((await stranger.call('GET', `/api/backups/${slot}/content-url`)).status).toBe(404);
    });

    it('no presigned URL (nor its signature) is written to the server’s log', async () => {
      const answer = await owner.call('GET', `/api/backups/${backup.id}/content-url`);
      const signature = new URL(answer.body.url).searchParams.get('X-Amz-Signature')!;
      expect(signature).toMatch(/^[0-9a-f]{64}$/);
      await sleep(50);
      const log = setup.log.join('');
      expect(log).toContain('/content-url');
      expect(log).not.toContain(signature);
      expect(log).not.toContain('X-Amz-');
    });
  });

  describe.skipIf(skipEngine(engine))(`content-url with COFFER_S3_URL_LIFETIME=1s on ${engine}`, () => {
    let s3: TestS3;
    let setup: Awaited<ReturnType<typeof serve>>;
    beforeAll(async () => {
      s3 = await startS3(engine);
      setup = await serve(s3, { COFFER_S3_PRESIGNED: 'on', COFFER_S3_URL_LIFETIME: '1s' });
    });
    afterAll(async () => {
      await setup?.server.stop();
      await s3?.close();
    });

    it('the URL works until it expires; then the store refuses it (403) and a new one works', async () => {
      const { call } = await setup.account();
      const { id, data } = await readyBackup(call, 2000);
      const answer = await call('GET', `/api/backups/${id}/content-url`);
      expect(Date.parse(answer.body.expiresAt) - Date.now()).toBeLessThanOrEqual(1000);
      const first = await fetchBytes(answer.body.url);
      // A slow machine may be past the second already; the point is the refusal below.
      if (first.status === 200) expect(first.body.equals(data)).toBe(true);
      // S3 compares whole seconds: wait until well past the expiry.
      await sleep(2500);
      const late = await fetchBytes(answer.body.url);
      expect(late.status).toBe(403);
      expect(late.body.includes(data.subarray(0, 64))).toBe(false);
      const fresh = await call('GET', `/api/backups/${id}/content-url`);
      expect((await fetchBytes(fresh.body.url)).body.equals(data)).toBe(true);
    });
  });
}

/** A TCP relay on its own loopback port to `target`: the store as clients reach it, at another address. */
async function relay(target: URL): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => socket.destroy());
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

for (const engine of S3_ENGINES) {
  describe.skipIf(skipEngine(engine))(`content-url with a COFFER_S3_PUBLIC_ENDPOINT other than the server's own on ${engine}`, () => {
    let s3: TestS3;
    let publicEndpoint: Awaited<ReturnType<typeof relay>>;
    let setup: Awaited<ReturnType<typeof serve>>;
    beforeAll(async () => {
      s3 = await startS3(engine);
      publicEndpoint = await relay(new URL(s3.endpoint));
      setup = await serve(s3, { COFFER_S3_PRESIGNED: 'on', COFFER_S3_PUBLIC_ENDPOINT: publicEndpoint.url });
    });
    afterAll(async () => {
      await setup?.server.stop();
      await publicEndpoint?.close();
      await s3?.close();
    });

    it('the URL names the public endpoint, is signed for it, and works there', async () => {
      const { call } = await setup.account();
      const { id, data } = await readyBackup(call, 4000);
      const answer = await call('GET', `/api/backups/${id}/content-url`);
      expect(new URL(answer.body.url).origin).toBe(publicEndpoint.url);
      const fetched = await fetchBytes(answer.body.url);
      expect(fetched.status).toBe(200);
      expect(fetched.body.equals(data)).toBe(true);
    });
  });
}

describe('content-url not offered', () => {
  const cases: { name: string; engine?: 's3rver'; env: Record<string, string> }[] = [
    { name: 'fs store', env: {} },
    { name: 'S3 store, COFFER_S3_PRESIGNED unset', engine: 's3rver', env: {} },
  ];
  for (const { name, engine, env } of cases) {
    it(`${name}: 404 not_found as for an unknown route (before auth), and no announcement`, async () => {
      const s3 = engine ? await startS3(engine) : undefined;
      const setup = await serve(s3, env);
      try {
        const { call } = await setup.account();
        const { id } = await readyBackup(call, 100);
        const detail = await call('GET', `/api/backups/${id}`);
        expect(detail.status).toBe(200);
        expect(detail.headers.get('coffer-extensions')).toBeNull();
        const unknownRoute = await call('GET', `/api/backups/${id}/no-such-thing`);
        for (const client of [call, setup.client()]) {
          const answer = await client('GET', `/api/backups/${id}/content-url`);
          expect(answer.status).toBe(404);
          expect(answer.body.code).toBe('not_found');
          expect(answer.body.code).toBe(unknownRoute.body.code);
          expect(answer.body.message).toBe(unknownRoute.body.message.replace('no-such-thing', 'content-url'));
        }
      } finally {
        await setup.server.stop();
        await s3?.close();
      }
    });
  }
});
