/**
 * One log line per answered request (docs/operations.md#logs), through Fastify's LogController: its two lines per
 * request ("incoming request", then "request completed") and its "route not found" line become this one, written
 * when the response is finished, with the request's `reqId` (from the request logger's bindings), method, path,
 * status and response time. The query string is left out: whatever a client puts there stays out of the logs.
 * Fastify's other lines (stream and serializer errors, requests while closing) are kept.
 */
import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

export class RequestLog extends LogController {
  override incomingRequest(): void {}

  override routeNotFound(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const query = request.url.indexOf('?');
    const line = {
      method: request.method,
      url: query === -1 ? request.url : request.url.slice(0, query),
      statusCode: reply.statusCode,
      responseTimeMs: Math.round(reply.elapsedTime * 10) / 10,
    };
    if (error) reply.log.error({ ...line, err: error }, 'request failed');
    else reply.log.info(line, 'request');
  }
}
