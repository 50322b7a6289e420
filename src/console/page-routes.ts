/**
 * The page itself (/console, /console/*), what this server is (/console/api/about), its CLI and SDK packages
 * (/downloads/coffer-cli.tgz, /downloads/coffer-sdk.tgz) and the SDK's reference (/docs/sdk/).
 */
import fs from 'node:fs';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppPlugin } from '../http/fastify.js';
import type { Config } from '../config.js';
import { AppError } from '../domain/errors.js';
import { NODE_ENGINE, VERSION } from '../lib/version.js';
import {
  type PackageTarball,
  type StaticFile,
  cliTarball,
  consoleFiles,
  DOWNLOADS,
  packageRoot,
  packageTarball,
  sdkDocsFiles,
} from './assets.js';
import { type ConsoleContext, hidden } from './context.js';
import { About } from '../contract/console-schemas.js';

/**
 * The page's policy: only its own scripts, styles and connections; WebAssembly (libsodium) may compile, nothing
 * may be evaluated from strings, framed, or posted elsewhere.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "worker-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

function aboutBody(config: Config, version: string, tarball: PackageTarball | undefined) {
  return {
    name: 'Coffer',
    version,
    nodeEngine: NODE_ENGINE,
    publicUrl: config.publicUrl,
    cli: tarball
      ? {
          url: `${config.publicUrl}/downloads/coffer-cli.tgz`,
          install: `npm install -g ${config.publicUrl}/downloads/coffer-cli.tgz`,
          bytes: tarball.bytes,
          sha256: tarball.sha256,
          integrity: tarball.integrity,
        }
      : null,
  };
}

export function sendStatic(request: FastifyRequest, reply: FastifyReply, file: StaticFile) {
  reply
    .header('content-type', file.type)
    .header('etag', file.etag)
    .header('cache-control', file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
    .header('content-security-policy', CONSOLE_CSP)
    .header('cross-origin-opener-policy', 'same-origin');
  if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
  return reply.code(200).send(file.body);
}

export const pageRoutes: AppPlugin<ConsoleContext> = async (app, { config }) => {
  const root = packageRoot();

  // ---- public: what this server is, and its CLI ----

  app.get('/console/api/about', { schema: { ...hidden, response: { 200: About } } }, async () =>
    aboutBody(config, VERSION, cliTarball(root)),
  );

  app.get('/downloads/:file', { schema: hidden }, async (request, reply) => {
    const { file } = request.params as { file: string };
    if (!Object.hasOwn(DOWNLOADS, file)) {
      throw new AppError('not_found', `No download ${file}: this server serves ${Object.keys(DOWNLOADS).join(', ')}.`);
    }
    const tarball = packageTarball(DOWNLOADS[file]!, root);
    if (!tarball) throw new AppError('not_found', `The package ${file} has not been built on this server (npm run build).`);
    return reply
      .header('content-type', 'application/gzip')
      .header('content-length', tarball.bytes)
      .header('content-disposition', `attachment; filename="${file.replace(/\.tgz$/, '')}-${VERSION}.tgz"`)
      .header('etag', `"${tarball.sha256}"`)
      .header('cache-control', 'no-cache')
      .header('access-control-allow-origin', '*')
      .send(fs.createReadStream(tarball.file));
  });

  // ---- the SDK's reference (TypeDoc's static pages; a request names one of the built files, nothing else) ----

  const sdkDocs = async (request: FastifyRequest, reply: FastifyReply) => {
    const rest = (request.params as { '*'?: string })['*'] ?? '';
    const files = sdkDocsFiles(root);
    if (files.size === 0) throw new AppError('not_found', "The SDK's reference has not been built on this server (npm run build).");
    const file = files.get(rest === '' || rest.endsWith('/') ? `/${rest}index.html` : `/${rest}`);
    if (!file) throw new AppError('not_found', `No page ${request.url.split('?')[0]} in the SDK's reference.`);
    return sendStatic(request, reply, file);
  };
  app.get('/docs/sdk', { schema: hidden }, async (_request, reply) => reply.redirect('/docs/sdk/'));
  app.get('/docs/sdk/*', { schema: hidden }, sdkDocs);

  // ---- the page ----

  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    const rest = (request.params as { '*'?: string })['*'] ?? '';
    const file = rest === '' ? undefined : consoleFiles(root).get(`/${rest}`);
    if (file) return sendStatic(request, reply, file);
    if (rest.startsWith('api/') || rest.startsWith('assets/')) {
      throw new AppError('not_found', `No route ${request.method} ${request.url.split('?')[0]}.`);
    }
    const index = consoleFiles(root).get('/index.html');
    if (!index) throw new AppError('not_found', 'The console has not been built on this server (npm run build).');
    return sendStatic(request, reply, index);
  };
  app.get('/console', { schema: hidden }, page);
  app.get('/console/*', { schema: hidden }, page);
};
