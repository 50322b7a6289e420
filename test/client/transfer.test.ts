/**
 * Transfers and server rules, through the real CLI: a restore whose connection breaks resumes with Range;
 * the 50 MiB ciphertext limit is refused before upload (client) or as soon as crossed (server 413, slot
 * deleted); 409 upload_in_progress reuses a PENDING slot and replaces an UPLOADED one (while `coffer watch`
 * follows it); a 429 is explained with the next allowed time (exit 3); reset.
 */
import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CofferClient } from '../../src/client/sdk.js';
import { uploadDirect } from '../../src/client/sdk-node-upload.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, snapshot, startCli } from './helpers.js';

const PASSPHRASE = 'transfer tests';
const MiB = 1024 * 1024;

interface ProxyLog {
  range: string | undefined;
  ifRange: string | undefined;
  status: number;
}

/** A forwarding HTTP proxy that breaks the first content download after `cutAfter` body bytes. */
async function cuttingProxy(upstream: string, cutAfter: number) {
  const log: ProxyLog[] = [];
  let cut = false;
  const proxy = http.createServer((req, res) => {
    const forward = http.request(new URL(req.url!, upstream), { method: req.method, headers: req.headers }, (answer) => {
      const content = /\/content$/.test(req.url!);
      if (content)
        log.push({ range: req.headers.range, ifRange: req.headers['if-range'] as string | undefined, status: answer.statusCode! });
      res.writeHead(answer.statusCode!, answer.headers);
      if (!content || cut) return void answer.pipe(res);
      let sent = 0;
      answer.on('data', (chunk: Buffer) => {
        if (cut) return;
        if (sent + chunk.length < cutAfter) {
          sent += chunk.length;
          res.write(chunk);
          return;
        }
        cut = true;
        answer.destroy();
        res.write(chunk.subarray(0, cutAfter - sent), () => res.socket?.destroy());
      });
    });
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  return { url, log, close: () => new Promise<void>((resolve) => proxy.close(() => resolve())) };
}

/** A forwarding HTTP proxy that holds back the answers `holdMs` picks, logging when each request came and left. */
async function holdingProxy(upstream: string, holdMs: (method: string, url: string) => number) {
  const log: { event: 'request' | 'answer'; method: string; url: string }[] = [];
  const proxy = http.createServer((req, res) => {
    log.push({ event: 'request', method: req.method!, url: req.url! });
    const forward = http.request(new URL(req.url!, upstream), { method: req.method, headers: req.headers }, (answer) => {
      setTimeout(
        () => {
          log.push({ event: 'answer', method: req.method!, url: req.url! });
          res.writeHead(answer.statusCode!, answer.headers);
          answer.pipe(res);
        },
        holdMs(req.method!, req.url!),
      );
    });
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  return {
    url,
    log,
    close: () =>
      new Promise<void>((resolve) => {
        proxy.closeAllConnections();
        proxy.close(() => resolve());
      }),
  };
}

describe('transfers, limits and server rules', () => {
  let server: TestServer;
  let clock: ManualClock;
  let work: string;
  let apiKey: string;
  let cli: ReturnType<typeof cliFor>;
  let client: CofferClient;
  const nextSlotAllowed = () => clock.advance(31 * 60 * 1000);

  async function dirWith(name: string, bytes: number): Promise<string> {
    const dir = path.join(work, name);
    await fsp.mkdir(dir, { recursive: true });
    await fsp.writeFile(path.join(dir, 'data.bin'), randomBytes(bytes));
    await fsp.writeFile(path.join(dir, 'readme.txt'), `${name}\n`);
    return dir;
  }

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    ({ apiKey } = await server.newKey({ plan: 'pro' }));
    work = tempDir('coffer-transfer-');
    cli = cliFor(server.url, apiKey, PASSPHRASE);
    client = new CofferClient({ baseUrl: server.url, apiKey });
    expect((await cli(['init'])).code).toBe(0);
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('resumes a broken download with Range + If-Range and still verifies everything', async () => {
    const source = await dirWith('resume', 3 * MiB);
    const detail = json(await cli(['backup', source, '--json']));
    nextSlotAllowed();
    const proxy = await cuttingProxy(server.url, 1 * MiB + 123);
    try {
      const target = path.join(work, 'resumed');
      const result = await cli(['restore', detail.id, target], { COFFER_URL: proxy.url });
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toMatch(/connection lost; resuming at byte \d+/);
      expect(await snapshot(target)).toEqual(await snapshot(source));
      expect(proxy.log[0]).toEqual({ range: undefined, ifRange: undefined, status: 200 });
      const resumed = proxy.log[1]!;
      expect(resumed.status).toBe(206);
      expect(resumed.range).toMatch(/^bytes=\d+-$/);
      expect(Number(/\d+/.exec(resumed.range!)![0])).toBeLessThanOrEqual(1 * MiB + 123);
      expect(resumed.ifRange).toBe(`"${detail.id}-${detail.ciphertextSizeBytes}"`);
    } finally {
      await proxy.close();
    }
  });

  it('downloads while the key is derived, and still writes nothing before everything is verified', async () => {
    const source = await dirWith('overlap', 2 * MiB);
    const detail = json(await cli(['backup', source, '--json']));
    nextSlotAllowed();
    // The vault's answer held back: the key cannot be derived before it comes.
    const proxy = await holdingProxy(server.url, (method, url) => (method === 'GET' && url === '/api/backup-account' ? 1000 : 0));
    try {
      const target = path.join(work, 'overlap-restored');
      const result = await cli(['restore', detail.id, target], { COFFER_URL: proxy.url });
      expect(result.code, result.stderr).toBe(0);
      expect(await snapshot(target)).toEqual(await snapshot(source));
      const at = (event: string, url: string) => proxy.log.findIndex((entry) => entry.event === event && entry.url === url);
      expect(at('request', `/api/backups/${detail.id}/content`)).toBeGreaterThan(-1);
      expect(at('request', `/api/backups/${detail.id}/content`)).toBeLessThan(at('answer', '/api/backup-account'));
    } finally {
      await proxy.close();
    }
  });

  it('a wrong passphrase found while the backup record is still on its way: exit 4, nothing written, no other error', async () => {
    const source = await dirWith('overlap-wrong', 64 * 1024);
    const detail = json(await cli(['backup', source, '--json']));
    nextSlotAllowed();
    const proxy = await holdingProxy(server.url, (method, url) => (method === 'GET' && url.startsWith('/api/backups/') ? 1500 : 0));
    try {
      const target = path.join(work, 'overlap-wrong-restored');
      const result = await cli(['restore', detail.id, target], { COFFER_URL: proxy.url, COFFER_PASSPHRASE: 'not the passphrase' });
      expect(result.code, result.stderr).toBe(4);
      expect(result.stderr).toMatch(/wrong passphrase/);
      expect(result.stderr).not.toMatch(/unhandled|\n\s+at /i);
      await expect(fsp.stat(target)).rejects.toThrow(/ENOENT/);
    } finally {
      await proxy.close();
    }
  });

  it("refuses an archive over the server's 50 MiB of ciphertext before uploading anything", async () => {
    const source = await dirWith('too-big', 51 * MiB);
    const before = (await client.listBackups()).backups.length;
    const result = await cli(['backup', source]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/exceed the 50\.0 MiB \(52428800 bytes\) limit of the server:/);
    expect(result.stderr).toMatch(
      /nothing was uploaded and its slot deleted\. The server's operator raises it with COFFER_MAX_ARCHIVE_BYTES on the server/,
    );
    const after = (await client.listBackups()).backups;
    expect(after.length).toBe(before); // no slot was even opened
    await fsp.rm(source, { recursive: true });
  });

  it('honours a lower client limit (COFFER_MAX_ARCHIVE_BYTES) the same way', async () => {
    const source = await dirWith('client-limit', 2 * MiB);
    const result = await cli(['backup', source], { COFFER_MAX_ARCHIVE_BYTES: String(MiB) });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /exceed the 1\.0 MiB \(1048576 bytes\) limit this client sets \(COFFER_MAX_ARCHIVE_BYTES on this machine\).*nothing was uploaded\. Raise or unset COFFER_MAX_ARCHIVE_BYTES here/,
    );
  });

  it('reuses a PENDING_UPLOAD slot on 409 upload_in_progress, while `coffer watch` follows it to READY', async () => {
    const slot = await client.createBackup();
    const watch = startCli(['watch', slot.backupId, '--json'], { COFFER_URL: server.url, COFFER_API_KEY: apiKey });
    expect(JSON.parse(await watch.firstLine)).toMatchObject({ backupId: slot.backupId, status: 'PENDING_UPLOAD' });

    const source = await dirWith('reuse', 200_000);
    const result = await cli(['backup', source, '--json']);
    expect(json(result)).toMatchObject({ id: slot.backupId, status: 'READY' });
    expect(result.stderr).toContain(`resuming the open upload slot ${slot.backupId}`);
    nextSlotAllowed();

    const watched = await watch.done;
    expect(watched.code, watched.stderr).toBe(0);
    const frames = watched.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const statuses = frames.filter((f) => !('reason' in f)).map((f) => f.status);
    expect(statuses[0]).toBe('PENDING_UPLOAD');
    expect(statuses).toContain('UPLOADED');
    expect(statuses.at(-1)).toBe('READY');
    expect(frames.at(-1)).toMatchObject({ reason: 'terminal', status: 'READY' });
  });

  it('replaces an UPLOADED slot that can never be finalized (its data key is gone)', async () => {
    const slot = await client.createBackup();
    await uploadDirect(client, client.directUploadUrl(slot.backupId), Readable.from([randomBytes(1000)]));
    expect((await client.getBackup(slot.backupId)).status).toBe('UPLOADED');

    const source = await dirWith('replace', 10_000);
    const result = await cli(['backup', source, '--json']);
    const detail = json(result);
    nextSlotAllowed();
    expect(detail.id).not.toBe(slot.backupId);
    expect(result.stderr).toContain(`deleted the unfinished upload ${slot.backupId}`);
    await expect(client.getBackup(slot.backupId)).rejects.toMatchObject({ status: 404, code: 'backup_not_found' });
  });

  it('explains a 429 with the next allowed time (exit 3); --json prints the ErrorResponse', async () => {
    const free = await server.newKey({ plan: 'free' });
    const freeCli = cliFor(server.url, free.apiKey, PASSPHRASE);
    expect((await freeCli(['init'])).code).toBe(0);
    const source = await dirWith('cadence', 1000);
    expect((await freeCli(['backup', source])).code).toBe(0);

    const refused = await freeCli(['backup', source]);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/one backup per day/);
    expect(refused.stderr).toMatch(/next backup is allowed at \w{3}, \w{3} \d+, \d{4}, .*UTC, in 1 day\./);
    const asJson = await freeCli(['backup', source, '--json']);
    expect(asJson.code).toBe(3);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ code: 'backup_cadence_exceeded', details: { backupInterval: '1d' } });

    // reset: refused while a backup remains, then done with --delete-backups; the cadence survives it
    const kept = await freeCli(['reset']);
    expect(kept.code).toBe(1);
    expect(kept.stderr).toMatch(/reset refused: 1 backup\(s\) remain.*--delete-backups/);
    expect(json(await freeCli(['reset', '--delete-backups', '--json']))).toEqual({ reset: true, accountDeleted: true, deletedBackups: 1 });
    expect(json(await freeCli(['list', '--json']))).toEqual({ backups: [] });
    expect((await freeCli(['init'])).code).toBe(0);
    expect((await freeCli(['backup', source])).code).toBe(3);
  });
});

/**
 * A forwarding proxy that leaves out the server's announced archive limit (`Coffer-Max-Archive-Bytes`: what a server
 * that announces none looks like, so the upload meets the server's own 413) and, with `swallow413`, swallows the
 * first 413 answer to an upload (drops the connection instead of relaying it).
 */
async function swallowing413Proxy(upstream: string, swallow413 = true) {
  let swallowed = 0;
  const proxy = http.createServer((req, res) => {
    let answered = false;
    const forward = http.request(new URL(req.url!, upstream), { method: req.method, headers: req.headers }, (answer) => {
      answered = true;
      delete answer.headers['coffer-max-archive-bytes'];
      if (answer.statusCode === 413 && swallow413 && swallowed === 0) {
        swallowed += 1;
        answer.resume();
        req.socket.destroy(); // what a TCP reset does to an answer the client has not read yet
        return;
      }
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    // The upstream answers 413 and closes while the body is still coming: the answer may beat the broken pipe.
    forward.on('error', () => setTimeout(() => answered || req.socket.destroy(), 500));
    forward.flushHeaders(); // a request without body bytes (the client's Content-Length probe) must still be sent
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  return { url, swallowed: () => swallowed, close: () => new Promise<void>((resolve) => proxy.close(() => resolve())) };
}

describe('a server with a lower archive limit (413 while streaming)', () => {
  let server: TestServer;
  let work: string;
  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer({ env: { COFFER_MAX_ARCHIVE_BYTES: String(MiB) } });
    work = tempDir('coffer-413-');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('holds the archive to the limit the server announces on create: refused before any byte, naming whose limit', async () => {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const cli = cliFor(server.url, apiKey, PASSPHRASE);
    expect((await cli(['init'])).code).toBe(0);
    await fsp.mkdir(path.join(work, 'src'));
    await fsp.writeFile(path.join(work, 'src/data.bin'), randomBytes(3 * MiB));
    // A client setting above the server's limit does not raise it: the client's own only lowers it.
    for (const env of [{}, { COFFER_MAX_ARCHIVE_BYTES: String(100 * MiB) }]) {
      const result = await cli(['backup', path.join(work, 'src')], env);
      expect(result.code, result.stderr).toBe(1);
      expect(result.stderr).toMatch(
        /exceed the 1\.0 MiB \(1048576 bytes\) limit of the server: it is at least .*; nothing was uploaded and its slot deleted\. The server's operator raises it with COFFER_MAX_ARCHIVE_BYTES on the server/,
      );
    }
    // A lower client limit is the one met, and the message says so (with the server's).
    const lower = await cli(['backup', path.join(work, 'src')], { COFFER_MAX_ARCHIVE_BYTES: String(MiB / 2) });
    expect(lower.code).toBe(1);
    expect(lower.stderr).toMatch(/exceed the 0\.5 MiB \(524288 bytes\) limit this client sets/);
    expect(json(await cli(['list', '--json']))).toEqual({ backups: [] });
    const client = new CofferClient({ baseUrl: server.url, apiKey });
    const slot = await client.createBackup();
    expect(slot.status).toBe('PENDING_UPLOAD');
    await client.deleteBackup(slot.backupId);
  });

  it('stops as soon as the server cuts the upload off (a server that announces no limit), deletes the slot, and says why', async () => {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const proxy = await swallowing413Proxy(server.url, false);
    const cli = cliFor(proxy.url, apiKey, PASSPHRASE);
    expect((await cli(['init'])).code).toBe(0);
    const result = await cli(['backup', path.join(work, 'src')]);
    await proxy.close();
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/exceed the 1\.0 MiB \(1048576 bytes\) limit of the server/);
    expect(result.stderr).toMatch(/upload was stopped and its slot deleted/);
    expect(json(await cli(['list', '--json'], { COFFER_URL: server.url }))).toEqual({ backups: [] });
    // the slot is gone, so the next attempt is not blocked by 409 upload_in_progress
    const client = new CofferClient({ baseUrl: server.url, apiKey });
    const slot = await client.createBackup();
    expect(slot.status).toBe('PENDING_UPLOAD');
    await client.deleteBackup(slot.backupId);
  });

  it('still names the limit when the 413 answer is lost to a dropped connection (probe by Content-Length)', async () => {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const proxy = await swallowing413Proxy(server.url);
    try {
      // The proxy only sits in front of the upload: the announced uploadUrl is re-rooted onto COFFER_URL.
      const cli = cliFor(proxy.url, apiKey, PASSPHRASE);
      expect((await cli(['init'])).code).toBe(0);
      const result = await cli(['backup', path.join(work, 'src')]);
      expect(proxy.swallowed(), result.stderr).toBe(1);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/exceed the 1\.0 MiB \(1048576 bytes\) limit.*slot deleted/);
      expect(json(await cli(['list', '--json']))).toEqual({ backups: [] });
    } finally {
      await proxy.close();
    }
  });
});

describe('a server announcing the blobhost-client upload protocol', () => {
  let server: TestServer;
  let work: string;
  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer({ env: { COFFER_UPLOAD_PROTOCOL: 'blobhost-client', COFFER_MAX_ARCHIVE_BYTES: String(2 * MiB) } });
    work = tempDir('coffer-blobhost-');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('uploads through the client-token handshake and the blob host, then restores', async () => {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const cli = cliFor(server.url, apiKey, PASSPHRASE);
    expect((await cli(['init'])).code).toBe(0);
    const source = path.join(work, 'src');
    await fsp.mkdir(source);
    await fsp.writeFile(path.join(source, 'data.bin'), randomBytes(MiB));
    const detail = json(await cli(['backup', source, '--json']));
    expect(detail.status).toBe('READY');
    const restored = await cli(['restore', detail.id, path.join(work, 'out')]);
    expect(restored.code, restored.stderr).toBe(0);
    expect(await snapshot(path.join(work, 'out'))).toEqual(await snapshot(source));
  });

  it('stops when the blob host refuses the size (a server that announces no limit), and deletes the slot', async () => {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const proxy = await swallowing413Proxy(server.url, false);
    const cli = cliFor(proxy.url, apiKey, PASSPHRASE);
    expect((await cli(['init'])).code).toBe(0);
    const source = path.join(work, 'big');
    await fsp.mkdir(source);
    await fsp.writeFile(path.join(source, 'data.bin'), randomBytes(3 * MiB));
    const result = await cli(['backup', source]);
    await proxy.close();
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/exceed the 2\.0 MiB \(2097152 bytes\) limit of the server.*upload was stopped and its slot deleted/);
    expect(json(await cli(['list', '--json'], { COFFER_URL: server.url }))).toEqual({ backups: [] });
  });
});

describe('a server with a higher archive limit', () => {
  let server: TestServer;
  let work: string;
  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer({ env: { COFFER_MAX_ARCHIVE_BYTES: String(60 * MiB) } });
    work = tempDir('coffer-bigger-');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('is set once, on the server: the client takes the announced limit and uploads an archive over 50 MiB', async () => {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const cli = cliFor(server.url, apiKey, PASSPHRASE);
    expect((await cli(['init'])).code).toBe(0);
    const source = path.join(work, 'src');
    await fsp.mkdir(source);
    await fsp.writeFile(path.join(source, 'data.bin'), randomBytes(51 * MiB));
    const detail = json(await cli(['backup', source, '--json']));
    expect(detail.status).toBe('READY');
    expect(detail.ciphertextSizeBytes).toBeGreaterThan(51 * MiB);
    await fsp.rm(source, { recursive: true });
  });
});
