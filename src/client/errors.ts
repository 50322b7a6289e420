/**
 * The errors of the Coffer API client, platform-neutral (no Node built-in): every refusal is a CofferApiError with
 * the answer's `status` and the server's `code` (docs/api-rules.md#errors), of the subclass that apiError chooses
 * from the two (the one place where that choice is made); a failure to reach the server is a CofferNetworkError;
 * a server that does not speak this client's API is an IncompatibleServerError.
 */
import type { ErrorResponseBody } from '../contract/schemas.js';
import { type ErrorCode, STATUS_OF } from '../domain/errors.js';

/** Answer headers: a fetch Response's, or node:http's plain object. */
export type AnswerHeaders = Headers | Record<string, string | string[] | undefined>;

/**
 * A refusal's code that this version's vocabulary (src/domain/errors.ts) does not hold: a newer or a hostile
 * server's, the blob host's (`blob_…`), or an answer that is no Coffer server's (`http_<status>`). It is no string,
 * so the compiler tells it from a known code: compare a code with the vocabulary's names (a misspelt one does not
 * compile), and handle this one with instanceof. It prints as the code it carries.
 */
export class UnknownErrorCode {
  constructor(readonly value: string) {}

  toString(): string {
    return this.value;
  }
}

/** A refusal's code: one of the vocabulary, or one this version does not know. */
export type ApiErrorCode = ErrorCode | UnknownErrorCode;

const isErrorCode = (code: string): code is ErrorCode => Object.hasOwn(STATUS_OF, code);

/** An ErrorResponse from the API (docs/api-rules.md#errors): the base of every refusal's error. */
export class CofferApiError extends Error {
  override readonly name: string = 'CofferApiError';
  /** The refusal's code; the answer's own text of it is `body.code`. */
  readonly code: ApiErrorCode;
  /** What to do about it, in the server's words. */
  readonly resolution: string;
  /** The refusal's details (e.g. `nextAllowedAt`, `maxBytes`, `quota`), when it has any. */
  readonly details: Record<string, unknown> | undefined;
  /** Seconds from the Retry-After header, when present. */
  readonly retryAfter: number | undefined;

  constructor(
    /** The answer's HTTP status. */
    readonly status: number,
    /** The ErrorResponse as read (or made from a non-Coffer answer: code `http_<status>`). */
    readonly body: ErrorResponseBody,
    headers: AnswerHeaders,
    /** The URL of the refused request, when known (which server refused: this machine's or another's). */
    readonly url?: string,
  ) {
    super(body.error || body.message || `HTTP ${status}`);
    this.code = isErrorCode(body.code) ? body.code : new UnknownErrorCode(body.code);
    this.resolution = body.resolution;
    this.details = body.details;
    this.retryAfter = retryAfterSeconds(headers);
  }
}

/** The Retry-After header in seconds (delay-seconds or an HTTP date), or undefined. */
function retryAfterSeconds(headers: AnswerHeaders): number | undefined {
  const raw = headers instanceof Headers ? headers.get('retry-after') : headers['retry-after'];
  const text = Array.isArray(raw) ? raw[0] : raw;
  if (text === null || text === undefined || text.trim() === '') return undefined;
  const seconds = Number(text);
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds : undefined;
  const date = Date.parse(text);
  return Number.isFinite(date) ? Math.max(0, Math.ceil((date - Date.now()) / 1000)) : undefined;
}

/** 401: the API key is missing, wrong, revoked or expired (`authentication_required`). */
export class AuthenticationError extends CofferApiError {
  override readonly name: string = 'AuthenticationError';
}

/** 403: the key is valid but lacks the permission (`insufficient_scope`, details.requiredPermission). */
export class PermissionError extends CofferApiError {
  override readonly name: string = 'PermissionError';
}

/** 404: no such backup (`backup_not_found`), no content yet (`backup_content_unavailable`) or no such path. */
export class NotFoundError extends CofferApiError {
  override readonly name: string = 'NotFoundError';
}

/** 409: the request conflicts with the state (`upload_in_progress`, `vault_changed`, `invalid_backup_state`, …). */
export class ConflictError extends CofferApiError {
  override readonly name: string = 'ConflictError';
}

/** The account's quota would be exceeded: `quota_exceeded` (409, no slot) or `upload_exceeds_quota` (413). */
export class QuotaExceededError extends CofferApiError {
  override readonly name: string = 'QuotaExceededError';
}

/** 429: too many requests; `retryAfter` says when to try again, when the server says. */
export class RateLimitError extends CofferApiError {
  override readonly name: string = 'RateLimitError';
}

/**
 * 429 `backup_cadence_exceeded`: the plan allows no new backup yet. Never retried by the client: the wait is the
 * plan's, often hours.
 */
export class CadenceError extends RateLimitError {
  override readonly name: string = 'CadenceError';
  /** When the plan next allows a backup (details.nextAllowedAt), when the server says. */
  readonly nextAllowedAt: Date | undefined;

  constructor(status: number, body: ErrorResponseBody, headers: AnswerHeaders, url?: string) {
    super(status, body, headers, url);
    const next = this.details?.nextAllowedAt;
    const at = typeof next === 'string' ? new Date(next) : undefined;
    this.nextAllowedAt = at && Number.isFinite(at.getTime()) ? at : undefined;
  }
}

/**
 * An upload refused as over the archive limit: a Coffer server's `payload_too_large` (its limit in
 * details.maxBytes, when given), or the blob host's too-large answer (its limit in the message).
 */
export class UploadTooLargeError extends CofferApiError {
  override readonly name: string = 'UploadTooLargeError';
  constructor(
    status: number,
    body: ErrorResponseBody,
    headers: AnswerHeaders,
    /** The limit the refusal names, when it names one. */
    readonly maxBytes: number | undefined,
  ) {
    super(status, body, headers);
  }
}

/** UploadTooLargeError under the name the application API uses for it. */
export { UploadTooLargeError as TooLargeError };

/**
 * The limit in the blob host's too-large answer. The Vercel Blob protocol has no code or field for it: its
 * `bad_request` says "the file length cannot be greater than N bytes", and @vercel/blob's own client knows it by
 * that text too. Undefined for any other answer.
 */
function blobHostLimit(body: ErrorResponseBody): number | undefined {
  if (!body.code.startsWith('blob_')) return undefined;
  const limit = /cannot be greater than (\d+)/.exec(body.message);
  return limit ? Number(limit[1]) : undefined;
}

/** The limit a refusal names: a Coffer server's details.maxBytes, or the blob host's. */
function refusedLimit(body: ErrorResponseBody): number | undefined {
  const max = (body.details as Record<string, unknown> | undefined)?.maxBytes;
  return typeof max === 'number' ? max : blobHostLimit(body);
}

const ERROR_OF_STATUS: Record<number, typeof CofferApiError | undefined> = {
  401: AuthenticationError,
  403: PermissionError,
  404: NotFoundError,
  409: ConflictError,
  429: RateLimitError,
};

/** The error of a refusal, its class chosen from the status and the server's code: the one place that chooses. */
export function apiError(status: number, body: ErrorResponseBody, headers: AnswerHeaders, url?: string): CofferApiError {
  const code = body.code;
  if (code === 'payload_too_large' || blobHostLimit(body) !== undefined) {
    return new UploadTooLargeError(status, body, headers, refusedLimit(body));
  }
  if (code === 'quota_exceeded' || code === 'upload_exceeds_quota') return new QuotaExceededError(status, body, headers, url);
  if (code === 'backup_cadence_exceeded') return new CadenceError(status, body, headers, url);
  return new (ERROR_OF_STATUS[status] ?? CofferApiError)(status, body, headers, url);
}

/** The error of a refusal given as its status and text (JSON ErrorResponse, the blob host's, or anything else). */
export const refusalOf = (status: number, text: string, headers: AnswerHeaders, url?: string): CofferApiError =>
  apiError(status, errorBodyFrom(status, text), headers, url);

/** The server could not be reached, or the connection broke. */
export class CofferNetworkError extends Error {
  override readonly name = 'CofferNetworkError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * The server does not speak an API version this client speaks, or is no Coffer server: its /openapi.json
 * `info.version` is not one of SUPPORTED_API_VERSIONS (./app/version.ts).
 */
export class IncompatibleServerError extends Error {
  override readonly name = 'IncompatibleServerError';
  constructor(
    /** The API versions this client speaks. */
    readonly supported: readonly string[],
    /** The server's API version, or undefined when it names none (no Coffer server). */
    readonly serverVersion: string | undefined,
    /** The server's address. */
    readonly url: string,
  ) {
    super(
      serverVersion === undefined
        ? `the server at ${url} is not a Coffer server (it serves no API description with a version); ` +
            `this client speaks Coffer API ${supported.join(', ')}`
        : `the server at ${url} speaks Coffer API ${serverVersion}; this client speaks ${supported.join(', ')}: ` +
            "use a client made for the server's version",
    );
  }
}

/** The ErrorResponse of an answer's text: the server's own, the blob host's, or one made for any other answer. */
export function errorBodyFrom(status: number, text: string): ErrorResponseBody {
  try {
    const parsed = JSON.parse(text) as Partial<ErrorResponseBody>;
    if (parsed && typeof parsed.code === 'string') {
      return {
        error: String(parsed.error ?? parsed.message ?? `HTTP ${status}`),
        code: parsed.code,
        message: String(parsed.message ?? parsed.error ?? ''),
        resolution: String(parsed.resolution ?? ''),
        ...(parsed.details ? { details: parsed.details } : {}),
      };
    }
    // The blob host's own error shape (blobhost-client protocol): {"error": {"code", "message"}}
    const blob = (parsed as { error?: { code?: unknown; message?: unknown } }).error;
    if (blob && typeof blob === 'object' && typeof blob.code === 'string') {
      const message = typeof blob.message === 'string' ? blob.message : `HTTP ${status}`;
      return { error: message, code: `blob_${blob.code}`, message, resolution: 'See the blob host message above.' };
    }
  } catch {
    // not JSON: fall through
  }
  const snippet = text.slice(0, 200).replace(/\s+/g, ' ').trim();
  const error = `HTTP ${status}${snippet ? `: ${snippet}` : ''}`;
  return { error, code: `http_${status}`, message: error, resolution: 'Check COFFER_URL: it should point at a Coffer server.' };
}

/** The vault is not in the state a call needs (already set up, changed by another client meanwhile, …). */
export class VaultStateError extends Error {
  override readonly name = 'VaultStateError';
}
