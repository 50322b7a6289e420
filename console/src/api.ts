/**
 * The page's HTTP client: same-origin requests carrying the session cookie (httpOnly: this code never sees it),
 * and the session's CSRF token on every request that changes state.
 */
export interface ErrorBody {
  error: string;
  code: string;
  message: string;
  resolution: string;
  details?: Record<string, unknown>;
}

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

export async function api<T>(method: string, path: string, body?: unknown, options: { quiet401?: boolean } = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
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
    throw new ApiError(
      response.status,
      error.code ?? 'http_error',
      error.message ?? `The server answered ${response.status}.`,
      error.resolution ?? '',
      error.details,
    );
  }
  return parsed as T;
}

// ---- wire types (SPEC.md and the console endpoints) ----

export type BackupStatus = 'PENDING_UPLOAD' | 'UPLOADED' | 'READY' | 'FAILED' | 'DELETING' | 'DELETED';
export const TERMINAL: readonly BackupStatus[] = ['READY', 'FAILED', 'DELETED'];

export interface BackupRecord {
  id: string;
  status: BackupStatus;
  createdAt: string;
  expiresAt: string;
  ciphertextSizeBytes: number | null;
  plaintextSizeBytes: number | null;
  clientVersion: string | null;
  hostappVersion: string | null;
}

export interface BackupDetail extends BackupRecord {
  cryptoVersion: 'v1';
  wrappedDek: string | null;
  wrappedDekNonce: string | null;
  encryptedMetadata: string | null;
  encryptedMetadataNonce: string | null;
}

export interface StatusEvent extends Omit<BackupRecord, 'id'> {
  backupId: string;
  observedAt: string;
}

export interface SessionInfo {
  accountId: string;
  plan: string;
  signedInWith: 'login-link' | 'api-key';
  keyId: string | null;
  createdAt: string;
  expiresAt: string;
  csrfToken: string;
}

export interface Overview {
  accountId: string;
  plan: string;
  backupInterval: string;
  intervalWords: string;
  retentionDays: number;
  backups: { count: number; ready: number; newestCreatedAt: string | null; storedCiphertextBytes: number };
  cadence: { lastReadyBackupCreatedAt: string | null; nextAllowedAt: string | null; inFlightBackupId: string | null };
  vault: {
    initialized: boolean;
    cryptoVersion: string | null;
    kdf: { algorithm: string; opslimit: number; memlimit: number; saltBytes: number } | null;
    createdAt: string | null;
    updatedAt: string | null;
    lastRotatedAt: string | null;
  };
}

export type Scope = 'backups:read' | 'backups:write' | 'backups:restore';
export const SCOPES: readonly Scope[] = ['backups:read', 'backups:write', 'backups:restore'];

export interface KeyInfo {
  keyId: string;
  scopes: Scope[];
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  status: 'active' | 'revoked' | 'expired';
  usedByThisSession: boolean;
}

export interface About {
  name: string;
  version: string;
  publicUrl: string;
  cli: { url: string; install: string; bytes: number; sha256: string; integrity: string } | null;
}
