/**
 * Refusals as the SDK (src/client/sdk.ts) types them. An upload refused as over the archive limit is known at the
 * protocol boundary: a Coffer server's `payload_too_large` and the blob host's too-large answer both raise
 * UploadTooLargeError with the limit, so runBackup (src/client/backup.ts) reads a typed error, not a message. A
 * refusal's code is one of the vocabulary (src/domain/errors.ts) or an UnknownErrorCode that prints as itself.
 */
import http from 'node:http';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { CofferApiError, CofferClient, UnknownErrorCode, UploadTooLargeError } from '../../src/client/sdk.js';
import { putToBlobHost, uploadDirect } from '../../src/client/sdk-node-upload.js';
import { listenHttp } from './helpers.js';

describe('upload refusals', () => {
  let peer: Awaited<ReturnType<typeof listenHttp>> | undefined;
  afterEach(async () => {
    await peer?.close();
    peer = undefined;
  });

  /** A peer that answers every request with `status` and `body` (after reading the request). */
  async function answering(status: number, body: unknown): Promise<CofferClient> {
    peer = await listenHttp((request: http.IncomingMessage, response: http.ServerResponse) => {
      request.resume();
      request.on('end', () => response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body)));
    });
    return new CofferClient({ baseUrl: peer.url, apiKey: 'k' });
  }

  const refusal = (promise: Promise<unknown>) =>
    promise.then(
      () => undefined,
      (error: unknown) => error,
    );

  it("the blob host's too-large answer carries its limit", async () => {
    const client = await answering(413, {
      error: { code: 'bad_request', message: 'the file length cannot be greater than 1048576 bytes' },
    });
    const error = await refusal(putToBlobHost(client, 'token', 'backups/x', Readable.from([Buffer.alloc(16)])));
    expect(error).toBeInstanceOf(UploadTooLargeError);
    expect(error).toMatchObject({ status: 413, body: { code: 'blob_bad_request' }, maxBytes: 1048576 });
  });

  it("a Coffer server's payload_too_large carries details.maxBytes, when given", async () => {
    const body = {
      error: 'Payload Too Large',
      code: 'payload_too_large',
      message: 'too large',
      resolution: '',
      details: { maxBytes: 2048 },
    };
    let client = await answering(413, body);
    expect(await refusal(uploadDirect(client, '/api/backups/x/content', Readable.from([Buffer.alloc(16)])))).toMatchObject({
      maxBytes: 2048,
    });
    await peer!.close();
    client = await answering(413, { ...body, details: undefined });
    const error = await refusal(uploadDirect(client, '/api/backups/x/content', Readable.from([Buffer.alloc(16)])));
    expect(error).toBeInstanceOf(UploadTooLargeError);
    expect((error as UploadTooLargeError).maxBytes).toBeUndefined();
  });

  it("a refusal's code: the vocabulary's as a string, any other as an UnknownErrorCode that prints as itself", async () => {
    const body = (code: string) => ({ error: 'refused', code, message: 'refused', resolution: '' });
    const known = new CofferApiError(409, body('vault_changed'), {});
    expect(known.code).toBe('vault_changed');
    for (const code of ['rate_limited', 'blob_forbidden', 'http_502', 'toString', '__proto__']) {
      const unknown = new CofferApiError(400, body(code), {});
      expect(unknown.code).toBeInstanceOf(UnknownErrorCode);
      expect(`${unknown.code}`).toBe(code);
    }
  });

  it('any other refusal stays a plain CofferApiError', async () => {
    const client = await answering(400, { error: { code: 'bad_request', message: 'Invalid pathname' } });
    const error = await refusal(putToBlobHost(client, 'token', 'backups/x', Readable.from([Buffer.alloc(16)])));
    expect(error).toBeInstanceOf(CofferApiError);
    expect(error).not.toBeInstanceOf(UploadTooLargeError);
  });
});
