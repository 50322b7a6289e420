/**
 * The page's HTTP client: same-origin requests carrying the session cookie (httpOnly: this code never sees it),
 * and the session's CSRF token on every request that changes state.
 */
import type { Static } from '@sinclair/typebox';
import type { BackupDetailBody, BackupRecordBody, BackupStatusEventBody, ErrorResponseBody as ErrorBody } from '../../src/contract/schemas.js';
import type {
  About as AboutSchema,
  AuditList as AuditListSchema,
  BackupKeyList as BackupKeyListSchema,
  ConsoleKey,
  CreatedHostAccount as CreatedHostAccountSchema,
  ConsoleSession,
  Deletions as DeletionsSchema,
  Overview as OverviewSchema,
  VaultHistory as VaultHistorySchema,
} from '../../src/contract/console-schemas.js';
import { TERMINAL_STATUSES, type BackupStatus } from '../../src/domain/backups.js';
import { API_INTERNALS, consoleErrorText } from '../../src/domain/error-texts.js';
import { SCOPES, type Scope } from '../../src/domain/scopes.js';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly resolution: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

let csrfToken: string | null = null;
let onSignedOut: () => void = () => undefined;

export function setCsrfToken(token: string | null): void {
  csrfToken = token;
}

/** Called when the server no longer accepts the session (expired, signed out elsewhere, key revoked). */
export function whenSignedOut(handler: () => void): void {
  onSignedOut = handler;
}

export async function api<T>(
  method: string,
  path: string,
  body?: unknown,
  options: { quiet401?: boolean; headers?: Record<string, string>; onHeaders?: (headers: Headers) => void } = {},
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD' && csrfToken) headers['x-csrf-token'] = csrfToken;
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'network_error', 'The server could not be reached.', 'Check your connection and try again.');
  }
  options.onHeaders?.(response.headers);
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON
  }
  if (!response.ok) {
    const error = (parsed ?? {}) as Partial<ErrorBody>;
    if (response.status === 401 && !options.quiet401) onSignedOut();
    const code = error.code ?? 'http_error';
    const message = error.message && !API_INTERNALS.test(error.message) ? error.message : 'The server refused this request.';
    throw new ApiError(response.status, code, message, consoleErrorText(code, error.details ?? {}, error.resolution ?? ''), error.details);
  }
  return parsed as T;
}

// ---- wire types: the server's own schemas (the API's in src/api/schemas.ts, the console's in src/console/schemas.ts) ----
// Type-only imports are erased by the build: the page gets the shapes, not the server code. The two constants are
// domain/'s plain arrays.

export type BackupRecord = BackupRecordBody;
export type BackupDetail = BackupDetailBody;
export type StatusEvent = BackupStatusEventBody;
export type SessionInfo = Static<typeof ConsoleSession>;
export type Overview = Static<typeof OverviewSchema>;
export type KeyInfo = Static<typeof ConsoleKey>;
export type About = Static<typeof AboutSchema>;
/** POST /console/api/host-accounts: the host account made, and its append-only key (shown once). */
export type CreatedHostAccount = Static<typeof CreatedHostAccountSchema>;
export type BackupKeyList = Static<typeof BackupKeyListSchema>;
export type BackupKeyEntry = BackupKeyList['backups'][number];
export type Deletions = Static<typeof DeletionsSchema>;
export type VaultHistory = Static<typeof VaultHistorySchema>;
export type AuditList = Static<typeof AuditListSchema>;
export type AuditEvent = AuditList['events'][number];
export type { BackupStatus, Scope };
export { SCOPES, TERMINAL_STATUSES };
