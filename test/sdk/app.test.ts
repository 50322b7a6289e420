/**
 * The SDK's application API (src/client/node.ts over src/client/app/) against a real server on a port, with the
 * real CLI on the other side: backups of bytes, a stream and named entries restored as entries, byte-equal; a
 * directory backed up by the SDK restores with `coffer restore` and the CLI's backup restores through the SDK; a
 * recipient-only session backs up and cannot restore; an AbortSignal cancels a backup and frees its slot; refusals
 * are typed errors with the server's code; a 503 with Retry-After is retried after that wait; an incompatible or
 * non-Coffer server gives one IncompatibleServerError.
 */
import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuthenticationError,
  CadenceError,
  connect,
  IncompatibleServerError,
  NotFoundError,
  QuotaExceededError,
  WriteOnlySessionError,
  type ArchiveEntry,
  type NodeCoffer,
  type NodeVault,
} from '../../src/client/index.js';
import { startTestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { cliFor, json, listenHttp, snapshot, startVault, type VaultFixture } from '../client/helpers.js';

const PASSPHRASE = 'sdk app passphrase';
let fixture: VaultFixture;
let coffer: NodeCoffer;
let vault: NodeVault;

beforeAll(async () => {
  fixture = await startVault('coffer-sdk-app-', PASSPHRASE);
  coffer = connect({ url: fixture.server.url, apiKey: fixture.apiKey });
  vault = await coffer.unlock({ passphrase: PASSPHRASE });
});

afterAll(async () => {
  vault?.close();
  await fixture?.stop();
});

async function bytesOf(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream as unknown as AsyncIterable<Uint8Array>) parts.push(Buffer.from(part));
  return Buffer.concat(parts);
}

async function entriesOf(restored: AsyncIterable<ArchiveEntry>) {
  const out: Record<string, Buffer> = {};
  for await (const entry of restored) if (entry.type === 'file') out[entry.name] = await bytesOf(entry.stream);
  return out;
}

const random = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7919 + (i >> 8)) & 0xff));

describe('the SDK application API', () => {
  it('backs up bytes, a stream and named entries, and restores each as entries, byte-equal', async () => {
    const bytes = random(200_000);
    const progress: { plaintextBytes: number; ciphertextBytes: number }[] = [];
    const fromBytes = await vault.backup(bytes, {
      name: 'data.bin',
      hostappVersion: 'myapp/1.2.3',
      metadata: { tenant: 'acme', n: 3 },
      onProgress: (step) => progress.push(step),
    });
    expect(progress.at(-1)).toEqual({ plaintextBytes: bytes.length, ciphertextBytes: fromBytes.metadata.ciphertextSizeBytes });
    fixture.nextSlotAllowed();
    expect(fromBytes.detail.status).toBe('READY');
    expect(fromBytes.detail.hostappVersion).toBe('myapp/1.2.3');
    expect(await entriesOf(vault.restore(fromBytes.id))).toEqual({ 'data.bin': bytes });
    const verified = await vault.verify(fromBytes.id);
    expect(verified.metadata.application).toEqual({ hostappVersion: 'myapp/1.2.3', metadata: { tenant: 'acme', n: 3 } });

    const streamed = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 5; i++) controller.enqueue(bytes.subarray(i * 40_000, (i + 1) * 40_000));
        controller.close();
      },
    });
    const fromStream = await vault.backup(streamed, { name: 'dump.sql' });
    fixture.nextSlotAllowed();
    expect(await entriesOf(vault.restore(fromStream.id))).toEqual({ 'dump.sql': bytes });

    const named = { 'db/dump.sql': random(70_000), 'config/app.json': Buffer.from('{"a":1}'), 'empty.txt': Buffer.alloc(0) };
    const fromEntries = await vault.backup(
      Object.entries(named).map(([name, data]) => ({ name, data })),
      { name: 'app-data' },
    );
    fixture.nextSlotAllowed();
    expect(fromEntries.metadata.fileCount).toBe(3);
    expect(await entriesOf(vault.restore(fromEntries.id))).toEqual(named);

    // The CLI restores the entries backup as those files.
    const target = path.join(tempDir('coffer-sdk-app-cli-'), 'restored');
    const restored = await fixture.owner(['restore', fromEntries.id, target]);
    expect(restored.code, restored.stderr).toBe(0);
    for (const [name, data] of Object.entries(named)) expect(await fsp.readFile(path.join(target, name))).toEqual(data);
  });

  it('a directory backed up by the SDK restores with the CLI, and the CLI backup restores through the SDK', async () => {
    const bySdk = await vault.backup(fixture.source, { hostappVersion: 'myapp/2.0.0' });
    fixture.nextSlotAllowed();
    const cliTarget = path.join(tempDir('coffer-sdk-app-dir-'), 'by-cli');
    const cliRestore = await fixture.owner(['restore', bySdk.id, cliTarget]);
    expect(cliRestore.code, cliRestore.stderr).toBe(0);
    expect(await snapshot(cliTarget)).toEqual(await snapshot(fixture.source));

    const byCli = await fixture.backup(fixture.owner);
    const sdkTarget = path.join(tempDir('coffer-sdk-app-dir-'), 'by-sdk');
    await vault.restoreTo(byCli, sdkTarget);
    expect(await snapshot(sdkTarget)).toEqual(await snapshot(fixture.source));
  });

  it('unlocks with a recovery kit, follows a backup to READY, and restores one file', async () => {
    const kit = await fixture.owner(['kit']);
    expect(kit.code, kit.stderr).toBe(0);
    const byKit = await coffer.unlock({ kit: kit.stdout });
    try {
      const made = await byKit.backup([{ name: 'notes/today.txt', data: Buffer.from('kit-made') }], { name: 'kit-made' });
      fixture.nextSlotAllowed();
      const statuses: string[] = [];
      for await (const event of coffer.watch(made.id)) statuses.push(event.status);
      expect(statuses.at(-1)).toBe('READY');
      const file = path.join(tempDir('coffer-sdk-app-file-'), 'today.txt');
      expect(await vault.restoreFile(made.id, file, { entry: 'notes/today.txt' })).toEqual({ bytes: 8 });
      expect(await fsp.readFile(file, 'utf8')).toBe('kit-made');
      await expect(vault.restoreFile(made.id, `${file}.2`, { entry: 'absent' })).rejects.toThrow(/has no file absent/);
      expect(await fsp.readdir(path.dirname(file))).toEqual(['today.txt']);
    } finally {
      byKit.close();
    }
  });

  it('a recipient-only session backs up what the vault restores, and cannot restore', async () => {
    const recipient = json<{ recipient: string }>(await fixture.owner(['recipient', '--json'])).recipient;
    const writer = coffer.writer(recipient);
    const written = await writer.backup(Buffer.from('written without the passphrase'), { name: 'note.txt' });
    fixture.nextSlotAllowed();
    expect(await entriesOf(vault.restore(written.id))).toEqual({ 'note.txt': Buffer.from('written without the passphrase') });
    expect('restore' in Object.keys(writer)).toBe(false);
    const cast = writer as unknown as { restore(id: string): unknown; verify(id: string): unknown };
    expect(() => cast.restore(written.id)).toThrow(WriteOnlySessionError);
    expect(() => cast.verify(written.id)).toThrow(/write-only/);
  });

  it('an AbortSignal cancels a backup: the call rejects and its slot is freed', async () => {
    const controller = new AbortController();
    let sent = 0;
    const slow = new ReadableStream<Uint8Array>({
      async pull(stream) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        sent += 65536;
        stream.enqueue(random(65536));
        if (sent >= 4 * 65536) controller.abort(new Error('cancelled by the application'));
      },
    });
    await expect(vault.backup(slow, { name: 'never.bin', signal: controller.signal })).rejects.toThrow(/cancelled|abort/i);
    const pending = (await coffer.list()).filter((backup) => backup.status !== 'READY');
    expect(pending).toEqual([]);
    // The slot is free: the next backup opens one (no upload_in_progress).
    const after = await vault.backup(Buffer.from('after'), { name: 'after.txt' });
    fixture.nextSlotAllowed();
    expect(after.detail.status).toBe('READY');
  });

  it('a source that fails mid-upload is reported as itself (not as a network error), and its slot is freed', async () => {
    let pieces = 0;
    const failing = new ReadableStream<Uint8Array>({
      pull(stream) {
        if (++pieces > 3) stream.error(new Error('the dump command exited with 3'));
        else stream.enqueue(random(65536));
      },
    });
    const error = await vault.backup(failing, { name: 'dump.sql' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe('the dump command exited with 3');
    expect((await coffer.list()).filter((backup) => backup.status !== 'READY')).toEqual([]);
  });

  it("init sets up a new account's vault (the CLI then unlocks it), and refuses an account that has one", async () => {
    const { apiKey } = await fixture.server.newKey({ plan: 'pro' });
    const fresh = connect({ url: fixture.server.url, apiKey });
    const created = await fresh.init({ passphrase: 'a new vault passphrase' });
    const backup = await created.backup(Buffer.from('made by an application'), { name: 'note.txt' });
    created.close();
    const target = path.join(tempDir('coffer-sdk-init-'), 'out');
    const restored = await cliFor(fixture.server.url, apiKey, 'a new vault passphrase')(['restore', backup.id, target]);
    expect(restored.code, restored.stderr).toBe(0);
    expect(await fsp.readFile(path.join(target, 'note.txt'), 'utf8')).toBe('made by an application');
    await expect(fresh.init({ passphrase: 'another' })).rejects.toThrow(/already initialized/);
  });

  it("refusals are typed errors carrying the server's code (404, 401, cadence with its next time)", async () => {
    const missing = coffer.get('00000000-0000-4000-8000-000000000000');
    await expect(missing).rejects.toBeInstanceOf(NotFoundError);
    await expect(missing).rejects.toMatchObject({ status: 404, code: 'backup_not_found' });

    const stranger = connect({ url: fixture.server.url, apiKey: 'ck_wrong_key' });
    await expect(stranger.list()).rejects.toBeInstanceOf(AuthenticationError);
    await expect(stranger.list()).rejects.toMatchObject({ status: 401, code: 'authentication_required' });

    await vault.backup(Buffer.from('one'), { name: 'one.txt' });
    const second = vault.backup(Buffer.from('two'), { name: 'two.txt' });
    await expect(second).rejects.toBeInstanceOf(CadenceError);
    const cadence = (await second.catch((error: unknown) => error)) as CadenceError;
    expect(cadence.code).toBe('backup_cadence_exceeded');
    expect(cadence.nextAllowedAt).toBeInstanceOf(Date);
    expect(cadence.nextAllowedAt!.getTime()).toBeGreaterThan(fixture.clock.now());
    fixture.nextSlotAllowed();
  });

  it('an upload over the quota is a QuotaExceededError (upload_exceeds_quota), and its slot is freed', async () => {
    const server = await startTestServer({ env: { COFFER_QUOTA_PRO: String(64 * 1024) } });
    try {
      const { apiKey } = await server.newKey({ plan: 'pro' });
      const init = await cliFor(server.url, apiKey, PASSPHRASE)(['init']);
      expect(init.code, init.stderr).toBe(0);
      const small = connect({ url: server.url, apiKey });
      const smallVault = await small.unlock({ passphrase: PASSPHRASE });
      const refused = smallVault.backup(randomBytes(300_000), { name: 'big.bin' }); // incompressible
      await expect(refused).rejects.toBeInstanceOf(QuotaExceededError);
      await expect(refused).rejects.toMatchObject({ code: 'upload_exceeds_quota' });
      expect((await small.list()).filter((backup) => backup.status !== 'READY')).toEqual([]);
      smallVault.close();
    } finally {
      await server.stop();
    }
  });

  it('retries a 503 after the Retry-After it names, then passes', async () => {
    const arrivals: number[] = [];
    const upstream = new URL(fixture.server.url);
    const proxy = await listenHttp((request, response) => {
      arrivals.push(Date.now());
      if (arrivals.length === 1) {
        response.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
        return response.end(JSON.stringify({ error: 'busy', code: 'internal_error', message: 'busy', resolution: 'wait' }));
      }
      const forward = http.request(
        { host: upstream.hostname, port: upstream.port, path: request.url, method: request.method, headers: request.headers },
        (answer) => {
          response.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(response);
        },
      );
      request.pipe(forward);
    });
    try {
      const throughProxy = connect({ url: proxy.url, apiKey: fixture.apiKey });
      await throughProxy.checkServer();
      arrivals.length = 0;
      const backups = await throughProxy.list();
      expect(backups.length).toBeGreaterThan(0);
      expect(arrivals).toHaveLength(2);
      expect(arrivals[1]! - arrivals[0]!).toBeGreaterThanOrEqual(950);
      const noRetries = connect({ url: proxy.url, apiKey: fixture.apiKey, maxRetries: 0 });
      await noRetries.checkServer();
      arrivals.length = 0;
      await expect(noRetries.list()).rejects.toMatchObject({ status: 503 });
    } finally {
      await proxy.close();
    }
  });

  it('an incompatible or non-Coffer server gives one IncompatibleServerError naming both versions', async () => {
    const newer = await listenHttp((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ openapi: '3.1.0', info: { version: '7.0.0' } }));
    });
    const stranger = await listenHttp((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html' }).end('<html>a web site</html>');
    });
    try {
      const refused = connect({ url: newer.url, apiKey: 'ck_x' }).list();
      await expect(refused).rejects.toBeInstanceOf(IncompatibleServerError);
      await expect(refused).rejects.toThrow(/speaks Coffer API 7\.0\.0; this client speaks 0\.1\.x/);
      await expect(connect({ url: stranger.url, apiKey: 'ck_x' }).unlock({ passphrase: 'x' })).rejects.toThrow(
        /is not a Coffer server .*speaks Coffer API 0\.1\.x/,
      );
      expect(await coffer.checkServer()).toMatch(/^0\.1\./);
    } finally {
      await newer.close();
      await stranger.close();
    }
  });
});
