/**
 * What a failed or aborted request means, in words a user can act on: the caller's abort, a plain-HTTP server
 * reached over https://, the innermost cause of a socket failure. Platform-neutral (no Node built-in): the fetch
 * transport (./sdk-transport.ts) and the Node uploads (./sdk-node-upload.ts) both use it. (abortError, last, has
 * no comment of its own: a leading one would become its documentation in the SDK report.)
 */

/** Whether a connection failed because the other side answered a TLS hello in plain text (a plain-HTTP server). */
export function notTls(error: unknown): boolean {
  for (let current = error, depth = 0; depth < 5 && current instanceof Error; depth++, current = current.cause) {
    const code = (current as Error & { code?: string }).code;
    if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG') return true;
    if (/wrong version number|packet length too long/.test(current.message)) return true;
  }
  return false;
}

/**
 * Why a connection to `address` failed, in words: OpenSSL's text for a plain-HTTP server reached over https://
 * (`ssl3_get_record:wrong version number`) says nothing a user can act on, so it is named as what it is.
 */
export function connectionFailure(address: string, error: unknown): string {
  const url = new URL(address);
  if (url.protocol === 'https:' && notTls(error)) {
    const plain = new URL(url.origin);
    plain.protocol = 'http:';
    return `the server at ${url.origin} does not speak HTTPS (it answered in plain HTTP); if that is right, use ${plain.origin}`;
  }
  return `cannot reach ${url.origin}: ${causeText(error)}`;
}

/** The innermost useful message of a fetch/socket failure (undici wraps the real cause). */
export function causeText(error: unknown): string {
  let current: unknown = error;
  let text = error instanceof Error ? error.message : String(error);
  for (let depth = 0; depth < 4 && current instanceof Error && current.cause !== undefined; depth++) {
    current = current.cause;
    if (current instanceof Error) text = current.message || (current as Error & { code?: string }).code || text;
  }
  return text;
}

export function abortError(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('aborted');
}

/** Waits `ms`, or rejects with the caller's abort. */
export function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
