/**
 * The page's HTTP client: same-origin requests carrying the session cookie (httpOnly: this code never sees it),
 * and the session's CSRF token on every request that changes state.
 */
import type { Static } from '@sinclair/typebox';
import type {
  BackupAccountBody,
  BackupAccountEnvelopeBody,
  BackupDetailBody,
  BackupListBody,
  BackupRecordBody,
  BackupStatusEventBody,
  DeleteBackupResponseBody,
  ErrorResponseBody as ErrorBody,
  HostAccountListBody,
  RotateResponseBody,
} from '../../src/contract/schemas.js';
import type {
  About as AboutSchema,
  AuditList as AuditListSchema,
  BackupKeyList as BackupKeyListSchema,
  BackupOutcome,
  ConsoleKey,
  ConsoleKeyList,
  ConsoleSession,
  CreatedHostAccount as CreatedHostAccountSchema,
  CreatedKey as CreatedKeySchema,
  CreateHostAccountBody,
  CreateKeyBody,
  DeletionGrace,
  DeletionGraceBody,
  Deletions as DeletionsSchema,
  Overview as OverviewSchema,
  RestoredVault,
  SignInBody,
  VaultHistory as VaultHistorySchema,
} from '../../src/contract/console-schemas.js';
import type { AttestationListBody } from '../../src/contract/attestation.js';
import { consoleErrorText, consoleMessage } from './error-texts.js';
import { resolveRoute, type Call, type CallArguments } from './route-map.js';
import { TERMINAL_STATUSES, type BackupStatus } from '../../src/domain/backups.js';
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

/** Every route the page calls (route-map.ts), its bodies the server's own schemas. */
interface Routes {
  'GET /api/backup-account': { response: BackupAccountBody };
  'POST /api/backup-account/rotate': { request: BackupAccountEnvelopeBody; response: RotateResponseBody };
  'GET /api/backups': { response: BackupListBody };
  'GET /api/backups/:id': { response: BackupDetailBody };
  'DELETE /api/backups/:id': { response: DeleteBackupResponseBody };
  'GET /api/host-accounts': { response: HostAccountListBody };
  'GET /api/attestations?limit=:limit': { response: AttestationListBody };
  'GET /api/backups/:id/attestations': { response: AttestationListBody };
  'GET /api/host-accounts/:accountId/backups': { response: BackupListBody };
  'GET /console/api/session': { response: SessionInfo };
  'POST /console/api/session': { request: Static<typeof SignInBody>; response: SessionInfo };
  'POST /console/api/session/confirm': { request: Static<typeof SignInBody>; response: SessionInfo };
  'DELETE /console/api/session': { response: undefined };
  'GET /console/api/overview': { response: Overview };
  'GET /console/api/about': { response: About };
  'GET /console/api/audit': { response: AuditList };
  'GET /console/api/backup-keys': { response: BackupKeyList };
  'GET /console/api/keys': { response: Static<typeof ConsoleKeyList> };
  'POST /console/api/keys': { request: Static<typeof CreateKeyBody>; response: CreatedKey };
  'DELETE /console/api/keys/:id': { response: KeyInfo };
  'POST /console/api/host-accounts': { request: Static<typeof CreateHostAccountBody>; response: CreatedHostAccount };
  'GET /console/api/deletions': { response: Deletions };
  'PUT /console/api/deletions/grace': { request: Static<typeof DeletionGraceBody>; response: Static<typeof DeletionGrace> };
  'POST /console/api/deletions/:id/restore': { response: Static<typeof BackupOutcome> };
  'POST /console/api/deletions/:id/purge': { response: Static<typeof BackupOutcome> };
  'GET /console/api/vault/history': { response: VaultHistory };
  'POST /console/api/vault/history/:id/restore': { response: Static<typeof RestoredVault> };
}

interface RequestOptions {
  quiet401?: boolean;
  headers?: Record<string, string>;
  onHeaders?: (headers: Headers) => void;
}

export async function api<R extends keyof Routes>(
  route: R,
  ...[options]: CallArguments<R, Routes[R], RequestOptions>
): Promise<Routes[R]['response']> {
  const { params, body, ...rest } = (options ?? {}) as Call<RequestOptions>;
  const { method, path } = resolveRoute(route, params);
  return request<Routes[R]['response']>(method, path, body, rest);
}

async function request<T>(method: string, path: string, body: unknown, options: RequestOptions): Promise<T> {
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
    throw new ApiError(
      response.status,
      code,
      consoleMessage(error.message),
      consoleErrorText(code, error.details ?? {}, error.resolution ?? ''),
      error.details,
    );
  }
  return parsed as T;
}

// ---- wire types: the server's own schemas (src/contract/schemas.ts and console-schemas.ts) ----
// Type-only imports are erased by the build: the page gets the shapes, not the server code. The two constants are
// domain/'s plain arrays.

export type BackupRecord = BackupRecordBody;
export type BackupDetail = BackupDetailBody;
/** GET /api/host-accounts, one entry. */
export type HostAccountInfo = HostAccountListBody['hosts'][number];
export type StatusEvent = BackupStatusEventBody;
export type SessionInfo = Static<typeof ConsoleSession>;
export type Overview = Static<typeof OverviewSchema>;
export type KeyInfo = Static<typeof ConsoleKey>;
/** POST /console/api/keys: the key made, and its secret (shown once). */
export type CreatedKey = Static<typeof CreatedKeySchema>;
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
