/**
 * The presigned-transfer negotiation answers as hostile input (src/client/presigned.ts), without a server: whatever a
 * broken or hostile server answers (any JSON; a valid answer with one field changed, removed or replaced), a parser
 * either returns what the client can use — an http(s) URL without credentials, the exact signed length asked for,
 * no header the client owns, a finite expiry, an upload key under backups/ — or throws PresignedAnswerError (for
 * an ETag, a CofferNetworkError naming the part): never another error, never a value outside those bounds.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CofferNetworkError } from '../../src/client/errors.js';
import {
  extensionsOf,
  parseComplete,
  parseContentUrl,
  parsePart,
  parseStart,
  partEtag,
  PresignedAnswerError,
  type SignedRequest,
} from '../../src/client/presigned.js';

const FORBIDDEN = ['host', 'connection', 'transfer-encoding', 'authorization', 'content-type', 'expect', 'upgrade'];

/** The answer, or the error it threw (which must be the parser's own). */
function outcome<T>(parse: () => T): T | undefined {
  try {
    return parse();
  } catch (error) {
    expect(error).toBeInstanceOf(PresignedAnswerError);
    expect((error as Error).message).not.toMatch(/X-Amz-|Signature=/);
    return undefined;
  }
}

function checkRequest(request: SignedRequest, method: string, size?: number) {
  expect(request.method).toBe(method);
  const url = new URL(request.url);
  expect(['http:', 'https:']).toContain(url.protocol);
  expect(url.username + url.password).toBe('');
  expect(Number.isFinite(request.expiresAt)).toBe(true);
  for (const [name, value] of Object.entries(request.headers)) {
    expect(name).toMatch(/^[a-z0-9-]+$/);
    expect(FORBIDDEN).not.toContain(name);
    expect(value).not.toMatch(/[\r\n\0]/);
  }
  if (size !== undefined) expect(request.headers['content-length']).toBe(String(size));
}

const validRequest = (size: number) => ({
  method: 'PUT',
  url: 'https://s3.example.com/bucket/backups/a/b/c.bin?X-Amz-Signature=abc',
  headers: { 'content-length': String(size) },
  expiresAt: '2026-11-28T20:15:00.000Z',
});
const validKey = 'backups/0193a/0193b/0193c.bin';

/** A value a hostile server might put anywhere. */
const hostile = fc.oneof(
  fc.jsonValue(),
  fc.constantFrom(
    'javascript:alert(1)',
    'file:///etc/passwd',
    'https://user:pass@s3.example.com/x',
    'ftp://s3.example.com/x',
    'backups/../../etc',
    '../backups/x',
    '',
    ' ',
    '\r\nX-Evil: 1',
    'not a date',
    -1,
    1.5,
    2 ** 60,
    Number.MAX_SAFE_INTEGER + 2,
    { host: 'evil' },
    { 'content-length': '1', authorization: 'Bearer x' },
    { 'content-length': '1\r\nX: y' },
    { 'Transfer-Encoding': 'chunked' },
    null,
    [],
    'x'.repeat(20_000),
  ),
);

/** A valid answer with one field at `path` replaced by a hostile value or removed. */
function mutated(base: Record<string, unknown>, paths: string[][]) {
  return fc.tuple(fc.constantFrom(...paths), hostile, fc.boolean()).map(([path, value, remove]) => {
    const copy = structuredClone(base);
    let at: Record<string, unknown> = copy;
    for (const key of path.slice(0, -1)) at = at[key] as Record<string, unknown>;
    if (remove) delete at[path.at(-1)!];
    else at[path.at(-1)!] = value;
    return copy;
  });
}

describe('presigned negotiation answers from a hostile server', () => {
  it('valid answers parse as they are', () => {
    const single = parseStart({ type: 's3-presigned.start', mode: 'single', uploadKey: validKey, request: validRequest(10) }, 10);
    expect(single).toMatchObject({ mode: 'single', uploadKey: validKey, request: { method: 'PUT', headers: { 'content-length': '10' } } });
    expect(
      parseStart(
        { type: 's3-presigned.start', mode: 'multipart', uploadKey: validKey, uploadId: 'u-1', minPartBytes: 5242880, maxParts: 10000 },
        undefined,
      ),
    ).toEqual({ mode: 'multipart', uploadKey: validKey, uploadId: 'u-1', minPartBytes: 5242880, maxParts: 10000 });
    expect(parsePart({ type: 's3-presigned.part', partNumber: 3, request: validRequest(7) }, 3, 7).headers).toEqual({
      'content-length': '7',
    });
    expect(parseComplete({ type: 's3-presigned.complete', pathname: 'backups/a/b', size: 9 }, 9)).toEqual({
      pathname: 'backups/a/b',
      size: 9,
    });
    expect(parseContentUrl({ url: 'http://127.0.0.1:9000/b/k?X-Amz-Signature=1', expiresAt: '2026-11-28T20:15:00Z', size: 5 }).size).toBe(
      5,
    );
    expect(partEtag('"0123456789abcdef0123456789abcdef"', 1, 'http://s3')).toBe('"0123456789abcdef0123456789abcdef"');
    expect([...extensionsOf(new Headers({ 'coffer-extensions': 'S3-Presigned-Upload, other ,, s3-presigned-download' }))]).toEqual([
      's3-presigned-upload',
      'other',
      's3-presigned-download',
    ]);
  });

  it('a start answer: usable (the asked size signed exactly) or PresignedAnswerError', () => {
    const single = { type: 's3-presigned.start', mode: 'single', uploadKey: validKey, request: validRequest(1000) };
    const multipart = {
      type: 's3-presigned.start',
      mode: 'multipart',
      uploadKey: validKey,
      uploadId: 'u',
      minPartBytes: 5242880,
      maxParts: 10000,
    };
    const paths = [
      ['type'],
      ['mode'],
      ['uploadKey'],
      ['request'],
      ['request', 'method'],
      ['request', 'url'],
      ['request', 'headers'],
      ['request', 'expiresAt'],
    ];
    fc.assert(
      fc.property(fc.oneof(mutated(single, paths), hostile), (answer) => {
        const parsed = outcome(() => parseStart(answer, 1000));
        if (!parsed) return;
        expect(parsed.mode).toBe('single');
        if (parsed.mode === 'single') checkRequest(parsed.request, 'PUT', 1000);
        expect(parsed.uploadKey.startsWith('backups/')).toBe(true);
        expect(parsed.uploadKey.split('/')).not.toContain('..');
      }),
      { numRuns: 500 },
    );
    const multiPaths = [['type'], ['mode'], ['uploadKey'], ['uploadId'], ['minPartBytes'], ['maxParts']];
    fc.assert(
      fc.property(fc.oneof(mutated(multipart, multiPaths), hostile), (answer) => {
        const parsed = outcome(() => parseStart(answer, undefined));
        if (!parsed) return;
        expect(parsed.mode).toBe('multipart');
        if (parsed.mode !== 'multipart') return;
        expect(Number.isSafeInteger(parsed.minPartBytes) && parsed.minPartBytes >= 0 && parsed.minPartBytes <= 5 * 1024 ** 3).toBe(true);
        expect(Number.isSafeInteger(parsed.maxParts) && parsed.maxParts >= 1 && parsed.maxParts <= 10000).toBe(true);
        expect(parsed.uploadId).toMatch(/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/);
      }),
      { numRuns: 500 },
    );
  });

  it('a part answer: the part asked for, its size signed exactly, or PresignedAnswerError', () => {
    const part = { type: 's3-presigned.part', partNumber: 2, request: validRequest(8388608) };
    const paths = [
      ['type'],
      ['partNumber'],
      ['request'],
      ['request', 'method'],
      ['request', 'url'],
      ['request', 'headers'],
      ['request', 'expiresAt'],
    ];
    // The right length with a header the client owns beside it.
    const owned = fc
      .tuple(fc.constantFrom(...FORBIDDEN, 'Host', 'Proxy-Authorization', 'x y'), fc.string({ maxLength: 20 }))
      .map(([name, value]) => ({ ...part, request: { ...part.request, headers: { 'content-length': '8388608', [name]: value } } }));
    fc.assert(
      fc.property(fc.oneof(mutated(part, paths), owned, hostile), (answer) => {
        const parsed = outcome(() => parsePart(answer, 2, 8388608));
        if (parsed) checkRequest(parsed, 'PUT', 8388608);
      }),
      { numRuns: 500 },
    );
  });

  it('a complete answer names the size sent, and a content-url answer a usable URL and size, or PresignedAnswerError', () => {
    const complete = { type: 's3-presigned.complete', pathname: 'backups/a/b', size: 4096 };
    fc.assert(
      fc.property(fc.oneof(mutated(complete, [['type'], ['pathname'], ['size']]), hostile), (answer) => {
        const parsed = outcome(() => parseComplete(answer, 4096));
        if (parsed) expect(parsed.size).toBe(4096);
      }),
      { numRuns: 300 },
    );
    const link = { url: 'https://s3.example.com/b/k?X-Amz-Signature=1', expiresAt: '2026-11-28T20:15:00Z', size: 77 };
    fc.assert(
      fc.property(fc.oneof(mutated(link, [['url'], ['expiresAt'], ['size']]), hostile), (answer) => {
        const parsed = outcome(() => parseContentUrl(answer));
        if (!parsed) return;
        checkRequest({ method: 'GET', url: parsed.url, headers: {}, expiresAt: parsed.expiresAt }, 'GET');
        expect(Number.isSafeInteger(parsed.size) && parsed.size >= 0).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("a store's ETag: printable and short, or a CofferNetworkError naming the part (never more of the URL than its origin)", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ maxLength: 300 }), fc.constantFrom(undefined, null, '', '"a b"', '"\u0000"', 'x'.repeat(300))),
        (etag) => {
          try {
            const value = partEtag(etag as string | null | undefined, 4, 'http://store:9000');
            expect(value.length).toBeLessThanOrEqual(256);
            expect(value).toMatch(/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/);
          } catch (error) {
            expect(error).toBeInstanceOf(CofferNetworkError);
            expect((error as Error).message).toContain('part 4');
            expect((error as Error).message).toContain('http://store:9000');
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('Coffer-Extensions: only tokens, whatever the header holds', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 2000 }), (value) => {
        let headers: Headers;
        try {
          headers = new Headers({ 'coffer-extensions': value });
        } catch {
          return; // not a header value fetch would give
        }
        for (const token of extensionsOf(headers)) expect(token).toMatch(/^[a-z0-9.-]{1,64}$/);
      }),
    );
  });
});
