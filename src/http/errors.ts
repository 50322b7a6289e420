/** Every failure leaves as an ErrorResponse with a code of docs/api-rules.md#errors; nothing internal leaks. */
import type { FastifyBaseLogger, FastifyError, FastifyReply } from 'fastify';
import { errorBody } from '../contract/views.js';
import { AppError, type ValidationIssue } from '../domain/errors.js';
import { jsonTooLarge } from './bodies.js';

interface AjvIssue {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

function issuePath(context: string | undefined, issue: AjvIssue): string {
  const segments = issue.instancePath.split('/').filter(Boolean);
  const property = issue.params.missingProperty ?? issue.params.additionalProperty;
  if (typeof property === 'string') segments.push(property);
  const path = segments.join('.');
  if (path) return path;
  return context === 'body' ? '(body)' : (context ?? '(request)');
}

function issueMessage(issue: AjvIssue): string {
  if (issue.keyword === 'additionalProperties') return 'is not a known property';
  if (issue.keyword === 'required') return 'is required';
  return issue.message ?? 'is invalid';
}

/** Maps anything thrown while handling a request onto the error vocabulary of docs/api-rules.md#errors. */
export function toAppError(error: unknown, log: FastifyBaseLogger, clientGone = false): AppError {
  if (error instanceof AppError) return error;
  const fastifyError = error as Partial<FastifyError> & { validation?: AjvIssue[]; validationContext?: string };
  if (Array.isArray(fastifyError.validation)) {
    const issues: ValidationIssue[] = fastifyError.validation.map((issue) => ({
      path: issuePath(fastifyError.validationContext, issue),
      message: issueMessage(issue),
    }));
    return AppError.validation(issues);
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('unsupported_media_type', 'This Content-Type is not accepted here.');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return jsonTooLarge();
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return AppError.validation([{ path: '(body)', message: 'Content-Length does not match the body' }]);
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('invalid_json', 'The request body is not valid JSON.');
  }
  logUnhandled(log, error, clientGone);
  return new AppError('internal_error', 'Something went wrong on our side.');
}

/** Logs a failure no error code covers: at error with its stack, or at info when the client is gone. */
export function logUnhandled(log: FastifyBaseLogger, error: unknown, clientGone: boolean): void {
  // A client that hung up (or was cut off as too slow) breaks its own request: not the server's fault.
  if (clientGone) log.info({ err: { message: (error as Error)?.message } }, 'client went away before the answer');
  else log.error({ err: error }, 'unhandled error');
}

export function sendError(reply: FastifyReply, error: AppError): FastifyReply {
  if (error.headers) reply.headers(error.headers);
  return reply.code(error.status).type('application/json; charset=utf-8').send(errorBody(error));
}
