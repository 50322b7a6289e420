/**
 * The public discovery surface: documentation, /.well-known files, the API reference page, the read-only MCP server
 * and the A2A endpoint. Registered once by the app (before the API scopes). Everything here is public, read-only
 * and generated from ./content plus the OpenAPI document, lazily and once per public URL. The MCP SDK (and the zod it
 * builds on) is loaded on the first request that needs it, not at the server's start.
 */
import Fastify, { type FastifyError, type FastifyInstance, type FastifyPluginAsync, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Services } from '../services/services.js';
import { handleA2aRequest, JSON_RPC, type JsonRpcReply, rpcError } from './a2a.js';
import { loadContent, type Content } from './content.js';
import { etagOf } from './document-text.js';
import { A2A_PATH, buildSite, MCP_PATH, type OpenApiLike, type Resource, type Site } from './documents.js';
import { SCALAR_ASSET_PATH } from './html-pages.js';
import { Knowledge } from './knowledge.js';
import { FixedWindowLimiter, type RateLimitOptions } from '../http/rate-limit.js';

/** Per-address limit on /mcp and the A2A endpoint together: JSON-RPC messages a minute. */
export const RPC_RATE_LIMIT: RateLimitOptions = { max: 120, windowMs: 60_000 };
/** Largest JSON-RPC body accepted on /mcp and the A2A endpoint. */
export const RPC_BODY_LIMIT = 64 * 1024;
/** Most messages in one JSON-RPC batch; each message counts against the rate limit. */
export const MAX_BATCH = 20;

const DOC_CACHE = 'public, max-age=300';
const ASSET_CACHE = 'public, max-age=86400';
const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, HEAD',
  'access-control-allow-headers': 'Content-Type',
};
const RPC_CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'POST, OPTIONS',
  'access-control-allow-headers': 'Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID',
  'access-control-expose-headers': 'Mcp-Session-Id, Mcp-Protocol-Version, Retry-After',
  'access-control-max-age': '600',
};

class JsonParseError extends Error {}

/**
 * The Scalar browser bundle, taken once from the package's own Fastify plugin (it inlines the bundle and serves it at
 * js/scalar.js) in a scratch instance that never listens: only the bundle is served here, never the plugin's page.
 */
async function scalarBundle(): Promise<Resource> {
  const { default: apiReference } = await import('@scalar/fastify-api-reference');
  const scratch = Fastify({ logger: false });
  try {
    await scratch.register(apiReference, { routePrefix: '/', configuration: { url: './openapi.json' } });
    const response = await scratch.inject({ method: 'GET', url: '/js/scalar.js' });
    if (response.statusCode !== 200) throw new Error(`@scalar/fastify-api-reference served its bundle with ${response.statusCode}`);
    const body = response.rawPayload;
    return { type: 'application/javascript; charset=utf-8', body, etag: etagOf(body), headers: {} };
  } finally {
    await scratch.close();
  }
}

function notModified(request: FastifyRequest, etag: string): boolean {
  const header = request.headers['if-none-match'];
  if (!header) return false;
  return header.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t === etag || t === `W/${etag}`;
  });
}

function sendResource(request: FastifyRequest, reply: FastifyReply, resource: Resource, cacheControl: string) {
  reply.headers({ ...CORS, ...resource.headers, etag: resource.etag, 'cache-control': cacheControl, vary: 'Accept-Encoding' });
  if (notModified(request, resource.etag)) return reply.code(304).send();
  return reply.type(resource.type).send(resource.body);
}

function sendRpc(reply: FastifyReply, result: JsonRpcReply) {
  return reply.code(result.status).headers(RPC_CORS).type('application/json; charset=utf-8').send(result.payload);
}

/** The discovery documents, built once on first use (the OpenAPI document exists only once the app is ready). */
type CurrentSite = () => Promise<{ site: Site; knowledge: Knowledge }>;

export const discoveryRoutes: FastifyPluginAsync<Pick<Services, 'config'>> = async (app, { config }) => {
  const content = loadContent();
  const openapi = () => (app as unknown as { swagger(): OpenApiLike }).swagger();

  // Built on first use: the OpenAPI document exists only once the app is ready.
  let state: Promise<{ site: Site; knowledge: Knowledge }> | null = null;
  const current: CurrentSite = () =>
    (state ??= import('@modelcontextprotocol/sdk/types.js').then(({ SUPPORTED_PROTOCOL_VERSIONS }) => {
      const site = buildSite(content, {
        base: config.publicUrl,
        openapi: openapi(),
        maxArchiveBytes: config.maxArchiveBytes,
        mcpProtocolVersions: SUPPORTED_PROTOCOL_VERSIONS,
      });
      return { site, knowledge: new Knowledge(content, site) };
    }));

  documentRoutes(app, config, content, current);
  // JSON-RPC endpoints: their own body parser, size limit, per-address rate limit and JSON-RPC error bodies.
  await app.register(async (scope) => {
    guardRpc(scope);
    rpcRoutes(scope, current, openapi);
  });
};

/** The documents of the site (each resource, the API reference's script) and /healthz. */
function documentRoutes(app: FastifyInstance, config: Services['config'], content: Content, current: CurrentSite): void {
  // The paths depend on the content only, not on the URL or the OpenAPI document.
  const paths = [
    ...buildSite(content, {
      base: config.publicUrl,
      openapi: { info: { title: '', version: '' } },
      maxArchiveBytes: config.maxArchiveBytes,
      mcpProtocolVersions: [],
    }).resources.keys(),
  ];
  for (const url of paths) {
    app.get(url, { exposeHeadRoute: true, schema: { hide: true } }, async (request, reply) =>
      sendResource(request, reply, (await current()).site.resources.get(url)!, DOC_CACHE),
    );
  }

  let scalar: Promise<Resource> | null = null;
  app.get(SCALAR_ASSET_PATH, { exposeHeadRoute: true, schema: { hide: true } }, async (request, reply) => {
    scalar ??= scalarBundle().catch((error: unknown) => {
      scalar = null;
      throw error;
    });
    return sendResource(request, reply, await scalar, ASSET_CACHE);
  });

  app.get('/healthz', { exposeHeadRoute: true, schema: { hide: true } }, async (_request, reply) =>
    reply
      .headers({ ...CORS, 'cache-control': 'no-store' })
      .type('application/json; charset=utf-8')
      .send({ status: 'ok', version: content.version, uptimeSeconds: Math.floor(process.uptime()) }),
  );
}

/** The JSON-RPC scope's body parser, error bodies and per-address rate limit (a batch counts each message). */
function guardRpc(scope: FastifyInstance): void {
  const limiter = new FixedWindowLimiter(RPC_RATE_LIMIT);
  const tooManyRequests = (reply: FastifyReply, resetSeconds: number) =>
    sendRpc(
      reply.header('retry-after', String(resetSeconds)),
      rpcError(null, -32000, 'Too many requests: slow down and retry after Retry-After seconds', 429),
    );
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: RPC_BODY_LIMIT }, (_request, body, done) => {
    try {
      done(null, JSON.parse(body as string));
    } catch {
      done(new JsonParseError('Parse error'), undefined);
    }
  });
  scope.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof JsonParseError) return sendRpc(reply, rpcError(null, JSON_RPC.parseError, 'Parse error', 400));
    switch (error.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return sendRpc(reply, rpcError(null, JSON_RPC.invalidRequest, `Request body over ${RPC_BODY_LIMIT} bytes`, 413));
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return sendRpc(reply, rpcError(null, JSON_RPC.invalidRequest, 'Content-Type must be application/json', 415));
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
        return sendRpc(reply, rpcError(null, JSON_RPC.invalidRequest, 'Content-Length does not match the body', 400));
    }
    request.log.error({ err: error }, 'discovery JSON-RPC endpoint failed');
    return sendRpc(reply, rpcError(null, JSON_RPC.internalError, 'Internal error', 500));
  });
  // A request counts once before its body is read; a batch then counts its other messages too.
  scope.addHook('onRequest', async (request, reply) => {
    if (request.method === 'OPTIONS') return;
    const verdict = limiter.hit(request.ip);
    if (!verdict.allowed) return tooManyRequests(reply, verdict.resetSeconds);
  });
  scope.addHook('preHandler', async (request, reply) => {
    if (!Array.isArray(request.body) || request.body.length < 2) return;
    const verdict = limiter.hit(request.ip, request.body.length - 1);
    if (request.body.length > MAX_BATCH) {
      return sendRpc(
        reply,
        rpcError(null, JSON_RPC.invalidRequest, `Invalid Request: a batch may hold at most ${MAX_BATCH} messages`, 400),
      );
    }
    if (!verdict.allowed) return tooManyRequests(reply, verdict.resetSeconds);
  });
}

/** The MCP and A2A endpoints. */
function rpcRoutes(scope: FastifyInstance, current: CurrentSite, openapi: () => OpenApiLike): void {
  for (const url of [MCP_PATH, A2A_PATH]) {
    scope.options(url, { schema: { hide: true } }, async (_request, reply) => reply.code(204).headers(RPC_CORS).send());
  }

  scope.post(MCP_PATH, { schema: { hide: true } }, async (request, reply) => {
    const [{ knowledge }, { buildMcpServer }, { StreamableHTTPServerTransport }] = await Promise.all([
      current(),
      import('./mcp.js'),
      import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    ]);
    const server = buildMcpServer(knowledge, openapi);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    reply.hijack();
    for (const [name, value] of Object.entries(RPC_CORS)) reply.raw.setHeader(name, value);
    reply.raw.on('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    } catch (error) {
      request.log.error({ err: error }, 'MCP request failed');
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'content-type': 'application/json' });
        reply.raw.end(JSON.stringify(rpcError(null, JSON_RPC.internalError, 'Internal error').payload));
      }
    }
  });
  // Stateless: no SSE stream to open (GET) and no session to end (DELETE).
  for (const method of ['GET', 'DELETE'] as const) {
    scope.route({
      method,
      url: MCP_PATH,
      schema: { hide: true },
      handler: async (_request, reply) =>
        sendRpc(reply.header('allow', 'POST'), rpcError(null, JSON_RPC.invalidRequest, 'Method not allowed: POST JSON-RPC to /mcp', 405)),
    });
  }

  scope.post(A2A_PATH, { schema: { hide: true } }, async (request, reply) =>
    sendRpc(reply, handleA2aRequest(request.body, (await current()).knowledge)),
  );
}
