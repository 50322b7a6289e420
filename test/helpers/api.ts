/** A tiny HTTP client for tests: real fetch against the real server, with the API key attached. */
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
