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
    'Retry-After, X-RateLimit-Policy, Coffer-Max-Archive-Bytes, Content-Disposition, Content-Range, Content-Length, ETag, X-Request-Id',
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

export function hardening(app: FastifyInstance, options: { https: boolean }): void {
  app.addHook('onRequest', async (request, reply) => {
    // Set on the raw response so they also reach hijacked responses (event streams).
    const raw = reply.raw;
    raw.setHeader('x-request-id', request.id);
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) raw.setHeader(name, value);
    if (options.https) raw.setHeader('strict-transport-security', HSTS);
    if (request.url.startsWith('/api/')) {
      raw.setHeader('content-security-policy', API_CSP);
      for (const [name, value] of Object.entries(API_CORS)) raw.setHeader(name, value);
    }
  });

  app.options('/api/*', { schema: { hide: true } }, async (_request, reply) => {
    reply.headers(API_PREFLIGHT).code(204).send();
  });
}
