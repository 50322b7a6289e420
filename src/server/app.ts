/** Builds the HTTP application from ready-made parts. Wiring of the parts themselves is in compose.ts. */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import fastifySwagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { OpenAPIV3_1 } from 'openapi-types';
import FindMyWay from 'find-my-way';
import { accountReadRoutes, accountWriteRoutes } from '../api/account.js';
import { ATTESTATION_SCHEMAS, attestationReadRoutes, attestationWriteRoutes } from '../api/attestations.js';
import { backupReadRoutes, backupWriteRoutes } from '../api/backups.js';
import { hostAccountRoutes } from '../api/hosts.js';
import type { RouteContext } from '../api/context.js';
import { appendOnlyGuard, auditRequests } from '../api/guard.js';
import type { App } from '../http/fastify.js';
import { API_KEY_RESTRICTIONS, API_TAGS, documentAttestationPayload, documentRoute } from '../api/openapi.js';
import { COMPONENT_SCHEMAS } from '../contract/schemas.js';
import { UPLOAD_REQUEST_BODY, uploadRoutes } from '../api/upload.js';
import { AppError } from '../domain/errors.js';
import { EventStreamHub } from '../api/streams.js';
import { blobHostRoutes } from '../api/blobhost.js';
import type { Services } from '../services/services.js';
import { consoleRoutes } from '../console/routes.js';
import { adminRoutes } from '../console/admin-routes.js';
import { sessionCredential, sessionSecurityScheme } from '../console/session-http.js';
import { loadContent } from '../discovery/content.js';
import { discoveryRoutes } from '../discovery/routes.js';
import { authenticator } from '../http/auth.js';
import { JSON_BODY_LIMIT, ignoreBodies, jsonBodies, streamedBodies } from '../http/bodies.js';
import { hardening } from '../http/hardening.js';
import { discardUnreadBody } from '../http/slow-client.js';
import { Metrics, requestMetrics } from '../http/metrics.js';
import { RequestLog } from '../http/request-log.js';
import { fromTrustedProxy, proxyTrust } from '../http/trusted-proxy.js';
import { operationsRoutes } from '../ops/routes.js';
import { sendError, toAppError } from '../http/errors.js';
import { VERSION } from '../lib/version.js';

const MAX_PARAM_LENGTH = 16 * 1024;

export interface AppOptions {
  logger?: FastifyServerOptions['logger'];
}

export interface CofferApp {
  app: App;
  streams: EventStreamHub;
  metrics: Metrics;
}

/** Credentials never reach the logs, whatever a serializer or a debug level would include. */
function withRedaction(logger: FastifyServerOptions['logger']): FastifyServerOptions['logger'] {
  if (!logger) return false;
  const base = logger === true ? {} : logger;
  return {
    ...(base as object),
    redact: {
      paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers.cookie', 'res.headers["set-cookie"]'],
      censor: '[redacted]',
    },
  };
}

export async function buildApp(parts: Services, options: AppOptions = {}): Promise<CofferApp> {
  const trust = proxyTrust(parts.config.trustProxy);
  const app = createFastify(parts, options, trust);
  const { streams, metrics, ctx } = apiContext(app, parts, trust);
  hardening(app, { https: parts.config.publicUrl.startsWith('https:') });
  requestMetrics(app, metrics);
  await app.register(operationsRoutes, {
    database: parts.stores.database,
    blobs: parts.blobs,
    metrics,
    metricsToken: parts.config.metricsToken,
  });
  await registerOpenApi(app, parts);
  answerUnknownRoutes(app);
  await registerRoutes(app, parts, ctx);

  // Open event streams are told about the shutdown before the server stops accepting work.
  app.addHook('preClose', async () => streams.closeAll('shutdown'));

  return { app, streams, metrics };
}

/** The Fastify instance with the server's limits, logging, proxy trust and framework errors. */
function createFastify(parts: Services, options: AppOptions, trust: ReturnType<typeof proxyTrust>): App {
  const { limits } = parts.config;
  const app: App = Fastify({
    logger: withRedaction(options.logger ?? false),
    genReqId: () => randomUUID(),
    logController: new RequestLog(),
    // Node checks header and request deadlines every connectionsCheckingInterval (30 s by default).
    serverFactory: (handler) =>
      http.createServer(
        {
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          connectionsCheckingInterval: Math.min(1000, limits.headersTimeoutMs),
        },
        handler,
      ),
    bodyLimit: JSON_BODY_LIMIT,
    // request.ip (sign-in, event-stream and discovery limits) reads X-Forwarded-For only from these proxies; the
    // same function tells the download route whether a request came through one (src/http/trusted-proxy.ts).
    trustProxy: parts.config.trustProxy.length > 0 ? trust : false,
    // An over-long id is still an id (401/403 first, then 404 like any malformed one), not Fastify's 414;
    // Node's 16 KiB head limit bounds it anyway.
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // A path that does not percent-decode (`/api/backups/%ff`) names no route: 404, not Fastify's own 400.
    frameworkErrors: (error, request, reply) => {
      const noRoute = error.code === 'FST_ERR_BAD_URL' || error.code === 'FST_ERR_MAX_PARAM_LENGTH';
      sendError(reply, noRoute ? new AppError('not_found', 'The path is not a valid URL.') : toAppError(error, request.log));
    },
    exposeHeadRoutes: false,
    return503OnClosing: false,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: true } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.server.maxConnections = limits.maxConnections;

  return app;
}

/** The event streams, the metrics and what the /api routes use (RouteContext). */
function apiContext(
  app: App,
  parts: Services,
  trust: ReturnType<typeof proxyTrust>,
): { streams: EventStreamHub; metrics: Metrics; ctx: RouteContext } {
  const streams = new EventStreamHub(parts.bus, parts.clock, {
    intervalMs: parts.config.sseIntervalMs,
    timeoutMs: parts.config.sseTimeoutMs,
    maxPerAccount: parts.config.sseMaxStreams.perAccount,
    maxPerAddress: parts.config.sseMaxStreams.perAddress,
  });
  const cache = parts.cache;
  const metrics = new Metrics(
    () => streams.stats(),
    () => parts.stores.database.queryCounts(),
    cache && (() => ({ ...cache.stats, ...cache.size })),
    {
      usage: async () => (await parts.quotas.usage()).totals.plans,
      quotaRefusals: () => parts.quotas.quotaRefusals,
      probes: { database: () => parts.stores.database.ping(), blob_store: () => parts.blobs.ping() },
      ...(parts.changeFeed ? { changeFeedLive: () => parts.changeFeed!.live } : {}),
    },
  );
  // What the /api hooks set on a request, declared up front so every request has the same shape (Fastify's
  // decorateRequest): the caller (requireScope, src/http/auth.ts) and a /api/backups/{id} route's backup (src/api/context.ts).
  app.decorateRequest('principal');
  app.decorateRequest('backup');
  const audit = auditRequests(parts.audit);
  const ctx: RouteContext = {
    config: parts.config,
    vault: parts.vault,
    backups: parts.backups,
    readPolicy: parts.readPolicy,
    streams,
    requireScope: authenticator(parts.keys, sessionCredential(parts.sessions, parts.config)),
    refuseAppendOnly: appendOnlyGuard(parts.vault, audit),
    audit,
    uploadHandshake: parts.uploadHandshake,
    presignedUploads: parts.presignedUploads,
    metrics,
    fromTrustedProxy: (request) => fromTrustedProxy(request, trust),
  };
  return { streams, metrics, ctx };
}

/** The OpenAPI document (/openapi.json) and the component schemas the routes refer to. */
async function registerOpenApi(app: App, parts: Services): Promise<void> {
  const { product } = loadContent();
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Coffer: Encrypted Backup Service API',
        version: VERSION,
        description:
          'Zero-knowledge backups: clients encrypt archives locally; the service stores only ciphertext, ' +
          'wrapped key material and operational metadata.',
        contact: { name: product.organization, email: product.contactEmail },
        license: { name: product.license, identifier: product.license },
      },
      servers: [{ url: parts.config.publicUrl }],
      tags: API_TAGS,
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: `Authorization: Bearer <API key>. ${API_KEY_RESTRICTIONS}` },
          apiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key', description: `x-api-key: <API key>. ${API_KEY_RESTRICTIONS}` },
          sessionCookie: sessionSecurityScheme(parts.config),
        },
      },
      security: [{ bearerAuth: [] }, { apiKeyHeader: [] }, { sessionCookie: [] }],
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
    transform: documentRoute,
    transformObject: (documentObject) => {
      const document = (documentObject as { openapiObject: OpenAPIV3_1.Document }).openapiObject;
      const upload = document.paths?.['/api/backups/upload']?.post;
      if (upload) upload.requestBody = UPLOAD_REQUEST_BODY as never;
      documentAttestationPayload(document as never);
      return document;
    },
  });
  for (const schema of [...COMPONENT_SCHEMAS, ...ATTESTATION_SCHEMAS]) app.addSchema(schema);
}

/** A path no route has: 405 with Allow when another method has it, else 404; every other error in the API's form. */
function answerUnknownRoutes(app: App): void {
  const knownRoutes = FindMyWay({ maxParamLength: MAX_PARAM_LENGTH });
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      if (method !== 'HEAD') knownRoutes.on(method as 'GET', route.url, () => undefined);
    }
  });

  app.setErrorHandler((error, request, reply) => {
    discardUnreadBody(request.raw);
    // A body sent to no route is parsed (and may fail) before the not-found handler runs: still a 404/405.
    if (request.is404) return notFound(request, reply);
    return sendError(reply, toAppError(error, request.log, request.raw.destroyed));
  });
  const notFound = (request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?')[0]!;
    const allowed = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].filter((m) => knownRoutes.find(m as 'GET', path));
    if (allowed.length > 0) {
      return sendError(
        reply,
        new AppError('method_not_allowed', `${request.method} is not allowed on ${path}.`, undefined, {
          allow: allowed.join(', '),
        }),
      );
    }
    return sendError(reply, new AppError('not_found', `No route ${request.method} ${path}.`));
  };
  app.setNotFoundHandler(notFound);
}

/** Every route, in registration order: /openapi.json, discovery, the consoles, the API by body kind, the blob host. */
async function registerRoutes(app: App, parts: Services, ctx: RouteContext): Promise<void> {
  const { limits } = parts.config;
  app.get('/openapi.json', { schema: { hide: true } }, async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=300').header('access-control-allow-origin', '*');
    return app.swagger();
  });

  // Public, read-only discovery surface (docs, /.well-known, /api-docs, /mcp, A2A, /healthz): src/discovery.
  await app.register(discoveryRoutes, { config: parts.config });

  // The console (/console, /console/api, /downloads/coffer-cli.tgz): src/console/routes.ts.
  await app.register(consoleRoutes, parts);
  // The operator console (/admin, /admin/api): src/console/admin-routes.ts.
  await app.register(adminRoutes, parts);

  // Each scope reads bodies one way (src/http/bodies.ts).
  await app.register(async (scope) => {
    ignoreBodies(scope);
    await scope.register(accountReadRoutes, ctx);
    await scope.register(backupReadRoutes, ctx);
    await scope.register(hostAccountRoutes, ctx);
    await scope.register(attestationReadRoutes, { ...ctx, attestations: parts.attestations });
  });
  await app.register(async (scope) => {
    jsonBodies(scope);
    await scope.register(accountWriteRoutes, ctx);
    await scope.register(backupWriteRoutes, ctx);
    await scope.register(attestationWriteRoutes, { ...ctx, attestations: parts.attestations });
  });
  await app.register(async (scope) => {
    streamedBodies(scope);
    await scope.register(uploadRoutes, ctx);
  });

  // blobhost-client: Coffer is the blob host the stock @vercel/blob client uploads to (src/api/blobhost.ts).
  const blobHost = parts.blobHost;
  if (blobHost) await app.register(blobHostRoutes, { host: blobHost, limits });
}
