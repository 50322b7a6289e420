/** A tiny HTTP client for tests: real fetch against the real server, with the API key attached. */
import http from 'node:http';

export interface ApiResponse<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
  raw: Buffer;
}

export function api(baseUrl: string, apiKey?: string) {
  return async function call<T = any>(
    method: string,
    path: string,
    options: { json?: unknown; body?: BodyInit; headers?: Record<string, string> } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}), ...options.headers };
    let body = options.body;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(`${baseUrl}${path}`, { method, headers, body, duplex: 'half' } as RequestInit);
    const raw = Buffer.from(await response.arrayBuffer());
    const text = raw.toString('utf8');
    let parsed: unknown = text;
    if ((response.headers.get('content-type') ?? '').includes('application/json')) parsed = JSON.parse(text);
    return { status: response.status, headers: response.headers, body: parsed as T, text, raw };
  };
}

const b64 = (bytes: number, fill = 1) => Buffer.alloc(bytes, fill).toString('base64');

/** A well-formed vault envelope (the server never interprets it). */
export function envelope(fill = 1) {
  return {
    cryptoVersion: 'v1',
    kdf: { salt: b64(16, fill), opslimit: 2, memlimit: 67_108_864 },
    wrappedMasterKey: b64(48, fill),
    wrappedMasterKeyNonce: b64(24, fill),
  };
}

/** A well-formed finalize body for `size` uploaded bytes. */
export function finalizeBody(size: number, extra: Record<string, unknown> = {}) {
  return {
    cryptoVersion: 'v1',
    wrappedDek: b64(48),
    wrappedDekNonce: b64(24),
    encryptedMetadata: b64(100),
    encryptedMetadataNonce: b64(24),
    ciphertextSizeBytes: size,
    plaintextSizeBytes: size,
    ...extra,
  };
}

/** A real upload whose body arrives in two halves `pauseMs` apart, so that several are in flight together. */
export function slowUpload(
  url: string,
  apiKey: string,
  backupId: string,
  body: Buffer,
  pauseMs: number,
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      `${url}/api/backups/upload?backupId=${backupId}`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/octet-stream', 'content-length': body.length },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (c: Buffer) => chunks.push(c));
        response.on('end', () => resolve({ status: response.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString()) }));
      },
    );
    request.on('error', reject);
    const half = Math.floor(body.length / 2);
    request.write(body.subarray(0, half));
    setTimeout(() => request.end(body.subarray(half)), pauseMs);
  });
}
