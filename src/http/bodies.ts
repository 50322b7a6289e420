/**
 * How a route scope reads request bodies. Each scope of the app picks one policy; none of them ever
 * answers with a status its operations do not declare (Fastify's own would be an undeclared 415).
 */
import type { FastifyInstance } from 'fastify';
import { AppError } from '../domain/errors.js';

/** docs/api-rules.md#statuses: JSON bodies over 256 KiB are a 400 validation_failed (the JSON routes and the blob host). */
export const JSON_BODY_LIMIT = 256 * 1024;

/** The answer to a JSON body over JSON_BODY_LIMIT, however it was read. */
export const jsonTooLarge = (): AppError =>
  AppError.validation([{ path: '(body)', message: `JSON bodies are limited to ${JSON_BODY_LIMIT / 1024} KiB` }]);

/** Media type of a Content-Type header, lower-cased, without parameters. */
export function mediaType(header: string | undefined): string {
  return (header ?? '').split(';')[0]!.trim().toLowerCase();
}

const notJson = () => AppError.validation([{ path: '(body)', message: 'must be sent as application/json' }]);

/** Operations without a request body: whatever is sent is drained and ignored, and so is its Content-Type. */
export function ignoreBodies(scope: FastifyInstance): void {
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', (_request, payload, done) => {
    payload.resume();
    payload.on('end', () => done(null, undefined));
    payload.on('error', done);
  });
  // Synchronous, and only when there is one: most requests here (GETs) carry none, and a `delete` per request would
  // also turn every headers object into a slower dictionary (bench P3).
  scope.addHook('preParsing', (request, _reply, _payload, done) => {
    if (request.headers['content-type'] !== undefined) delete request.headers['content-type'];
    done();
  });
}

/**
 * Operations that take JSON: an empty body reads as absent (the route decides whether that is allowed);
 * unparsable JSON is 400 `invalid_json`; any other media type is 400 `validation_failed`.
 */
export function jsonBodies(scope: FastifyInstance): void {
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', (_request, payload, done) => {
    payload.resume();
    done(notJson(), undefined);
  });
  scope.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(new AppError('invalid_json', 'The request body is not valid JSON.'), undefined);
    }
  });
  // The media type alone decides, so a Content-Type Fastify cannot parse (`;;;`, `application/json;;`)
  // is judged like any other.
  scope.addHook('preParsing', async (request) => {
    const type = request.headers['content-type'];
    if (type === undefined) return;
    if (mediaType(type) !== 'application/json') throw notJson();
    request.headers['content-type'] = 'application/json';
  });
}

/** Streamed bodies (archive uploads, the blob host): left unread for the handler. */
export function streamedBodies(scope: FastifyInstance): void {
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
}
