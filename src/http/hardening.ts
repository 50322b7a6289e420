/**
 * Response hygiene for every route: request ids, security headers, and the API's CORS policy
 * (any origin, no credentials, explicit headers; the discovery routes set their own `*` policy).
 */
import type { FastifyInstance } from 'fastify';

const SECURITY_HEADERS: Record<string, string> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-resource-policy': 'same-site',
};

/** For JSON and binary API responses: nothing in them may run or be framed. */
const API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'";

const API_CORS: Record<string, string> = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers':
    'Retry-After, X-RateLimit-Policy, Coffer-Max-Archive-Bytes, Content-Disposition, Content-Range, Content-Length, ETag, X-Request-Id, X-Coffer-Vault-History-Days, X-Coffer-Account-Id',
};

const API_PREFLIGHT: Record<string, string> = {
  ...API_CORS,
  'access-control-allow-methods': 'GET, POST, PATCH, DELETE',
  'access-control-allow-headers': 'Authorization, X-Api-Key, Content-Type, Range, If-Range, Last-Event-ID',
  'access-control-max-age': '600',
};

/**
 * Sent on every response when the public URL is https (docs/operations.md#https): browsers then use https for this
 * host for a year. Without includeSubDomains or preload: Coffer does not speak for the rest of the domain.
 */
export const HSTS = 'max-age=31536000';

/** The same headers as [name, value] pairs, listed once (not an Object.entries per request). */
const SECURITY_PAIRS = Object.entries(SECURITY_HEADERS);
const API_PAIRS: [string, string][] = [['content-security-policy', API_CSP], ...Object.entries(API_CORS)];

export function hardening(app: FastifyInstance, options: { https: boolean }): void {
  const base = options.https ? [...SECURITY_PAIRS, ['strict-transport-security', HSTS] as [string, string]] : SECURITY_PAIRS;
  // A synchronous hook: no promise and no microtask per request (bench P3).
  app.addHook('onRequest', (request, reply, done) => {
    // Set on the raw response so they also reach hijacked responses (event streams).
    const raw = reply.raw;
    raw.setHeader('x-request-id', request.id);
    for (let i = 0; i < base.length; i++) raw.setHeader(base[i]![0], base[i]![1]);
    if (request.url.startsWith('/api/')) {
      for (let i = 0; i < API_PAIRS.length; i++) raw.setHeader(API_PAIRS[i]![0], API_PAIRS[i]![1]);
    }
    done();
  });

  app.options('/api/*', { schema: { hide: true } }, async (_request, reply) => {
    reply.headers(API_PREFLIGHT).code(204).send();
  });
}
