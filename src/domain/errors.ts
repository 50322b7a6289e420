/** The error vocabulary (docs/api-rules.md#errors). Thrown by services, rendered by the HTTP layer. */
export type ErrorCode =
  | 'validation_failed'
  | 'invalid_json'
  | 'authentication_required'
  | 'insufficient_scope'
  | 'csrf_token_invalid'
  | 'login_link_invalid'
  | 'backup_not_found'
  | 'backup_content_unavailable'
  | 'not_found'
  | 'method_not_allowed'
  | 'vault_not_initialized'
  | 'vault_not_empty'
  | 'vault_changed'
  | 'upload_in_progress'
  | 'invalid_backup_state'
  | 'ciphertext_size_mismatch'
  | 'payload_too_large'
  | 'quota_exceeded'
  | 'upload_exceeds_quota'
  | 'unsupported_media_type'
  | 'backup_cadence_exceeded'
  | 'too_many_sign_in_attempts'
  | 'reauthentication_required'
  | 'too_many_streams'
  | 'internal_error';

export const STATUS_OF: Record<ErrorCode, number> = {
  validation_failed: 400,
  invalid_json: 400,
  authentication_required: 401,
  insufficient_scope: 403,
  csrf_token_invalid: 403,
  login_link_invalid: 401,
  backup_not_found: 404,
  backup_content_unavailable: 404,
  not_found: 404,
  method_not_allowed: 405,
  vault_not_initialized: 409,
  vault_not_empty: 409,
  vault_changed: 409,
  upload_in_progress: 409,
  invalid_backup_state: 409,
  ciphertext_size_mismatch: 409,
  payload_too_large: 413,
  quota_exceeded: 409,
  upload_exceeds_quota: 413,
  unsupported_media_type: 415,
  backup_cadence_exceeded: 429,
  too_many_sign_in_attempts: 429,
  reauthentication_required: 403,
  // Only ever sent inside an event stream (a backup.stream.error frame on a 200), never as an HTTP status.
  too_many_streams: 429,
  internal_error: 500,
};

export const RESOLUTION_OF: Record<ErrorCode, string> = {
  validation_failed: 'Fix the fields listed in details.issues and send the request again.',
  invalid_json: 'Send a well-formed JSON body with Content-Type: application/json.',
  authentication_required:
    'Send a valid API key as "Authorization: Bearer <key>" or "x-api-key: <key>", or sign in with a browser session.',
  insufficient_scope: 'Use an API key that holds the permission named in details.requiredPermission.',
  csrf_token_invalid: 'Send requests made with the console session from the console page itself, with its X-CSRF-Token header.',
  login_link_invalid: 'Ask the operator for a new sign-in link (coffer admin login-link <accountId>); each works once.',
  backup_not_found: 'Check the backup id; list your backups with GET /api/backups.',
  backup_content_unavailable: 'Only READY backups have content; wait until the backup is READY.',
  not_found: 'Check the path against the API description at /openapi.json.',
  method_not_allowed: 'Use one of the methods listed in the Allow header.',
  vault_not_initialized: 'Initialize the vault first with POST /api/backup-account/bootstrap.',
  vault_not_empty: 'Delete the remaining backups first, or send {"deleteBackups": true}.',
  vault_changed:
    'Read the account again (GET /api/backup-account), unwrap its current material and send ' +
    'If-Match with its new ETag (details.currentEtag).',
  upload_in_progress: 'Finish the upload slot named in details.backupId, or DELETE it, then try again.',
  invalid_backup_state: 'Check the backup status in details.status; this operation does not apply to it.',
  ciphertext_size_mismatch: 'Send the exact number of ciphertext bytes that were uploaded.',
  quota_exceeded:
    'The account stores as much as its quota allows (details.quota, details.usage in bytes): delete backups you no longer need (deleted backups still count ' +
    'until their deletion grace ends; purge them to free the space at once), or ask the operator for a larger quota.',
  upload_exceeds_quota:
    'This archive does not fit in what is left of the quota (details.quota minus details.usage bytes): delete or ' +
    'purge older backups, or ask the operator for a larger quota, then upload again.',
  payload_too_large: 'Keep the encrypted archive within the size limit given in details.maxBytes.',
  unsupported_media_type: 'Send the body with a supported Content-Type (application/octet-stream or application/json).',
  backup_cadence_exceeded: 'Wait until details.nextAllowedAt (see Retry-After) or move to a plan with a shorter interval.',
  too_many_sign_in_attempts: 'Wait the number of seconds given in Retry-After, then sign in again.',
  reauthentication_required:
    'Confirm with a fresh sign-in (a new sign-in link or an all-scope API key), then repeat the action within details.freshSignInSeconds.',
  too_many_streams:
    'Close event streams you no longer need (details.limit names the cap that was reached: per account or per ' +
    'client address, at most details.maxStreams open at once), then open this one again.',
  internal_error: 'Try again later; if the problem persists, contact the operator.',
};

/**
 * Text that speaks the HTTP API (paths, verbs, headers, response fields) instead of a person's commands or page, as
 * the resolutions above do: the CLI and the console page show a server's text to their users only when it does not.
 */
export const API_INTERNALS = /\/api\/|details\.|bearer|authorization|x-api-key|x-csrf-token|content-type|\b(GET|POST|PUT|PATCH|DELETE) \//i;

export interface ValidationIssue {
  path: string;
  message: string;
}

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
    /** Overrides RESOLUTION_OF[code] when this refusal has a more precise next step (an append-only key). */
    readonly resolution?: string,
  ) {
    super(message);
    this.status = STATUS_OF[code];
  }

  static validation(issues: ValidationIssue[], message = 'The request is not valid.'): AppError {
    return new AppError('validation_failed', message, { issues });
  }
}
