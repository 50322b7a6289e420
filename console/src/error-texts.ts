/**
 * What the person at the console page should do about a refusal of the API, one row per error code
 * (src/domain/errors.ts), in terms of the page. The API's own `resolution` is written for API callers (it names
 * paths, headers and `details.*` fields), so every code either has the page's words here or is marked FROM_SERVER:
 * then, like any code this page does not know, it shows the server's resolution unless it speaks API internals.
 * The CLI has its own table (src/cli/error-texts.ts).
 */
import { API_INTERNALS, type ErrorCode } from '../../src/domain/errors.js';
import { isScope, type Scope } from '../../src/domain/scopes.js';

/** A refusal's `details`, as the server sent them: each text checks the type of what it reads. */
type RefusalDetails = Record<string, unknown>;

/** A code whose refusal the page shows with the server's resolution (when it does not speak API internals). */
export const FROM_SERVER = Symbol('the server’s words');

type ConsoleText = string | ((details: RefusalDetails) => string) | typeof FROM_SERVER;

/** What each permission lets a key do, in the page's words. */
export const PERMISSION_USES: Record<Scope, string> = {
  'backups:read': 'read backups',
  'backups:write': 'make and delete backups',
  'backups:restore': 'restore backups',
};

const RELOAD = 'Reload the page; if it keeps happening, tell your operator.';

function insufficientScope(details: RefusalDetails): string {
  if (details.reason === 'append_only') {
    return (
      'This key is append-only: it can add backups but not delete them, reset the account or change ' +
      'the vault. Sign in with a login link or an owner key.'
    );
  }
  const permission = typeof details.requiredPermission === 'string' ? details.requiredPermission : undefined;
  const uses = permission && isScope(permission) ? PERMISSION_USES[permission] : 'do this';
  return (
    `This key may not ${uses}${permission ? ` (it lacks ${permission})` : ''}. ` +
    'Sign in with a key that holds read, write and restore, or ask your operator for one (coffer admin keys create).'
  );
}

/** Every error code: the page's words, or FROM_SERVER (test/console/error-texts.test.ts checks the table is complete). */
export const CONSOLE_ERROR_TEXTS: Record<ErrorCode, ConsoleText> = {
  backup_cadence_exceeded: 'Wait until the next backup is allowed, or move to a plan with a shorter interval.',
  authentication_required: 'Check the key and sign in again, or open a new sign-in link from your operator (coffer admin login-link).',
  insufficient_scope: insufficientScope,
  csrf_token_invalid: 'Reload the page and try again.',
  reauthentication_required: 'Confirm it is you with a fresh sign-in (a new sign-in link or an API key with all three permissions).',
  login_link_invalid: FROM_SERVER,
  backup_not_found: 'It may have been deleted or have expired: go back to your backups.',
  backup_content_unavailable: 'Only READY backups can be restored: wait until it is ready.',
  vault_not_initialized: 'Set up the vault first with the CLI: coffer init.',
  vault_not_empty: 'Delete the remaining backups first.',
  vault_changed: FROM_SERVER,
  upload_in_progress: 'Wait until the upload in progress has finished, then try again.',
  invalid_backup_state: 'Reload the page to see its current status.',
  ciphertext_size_mismatch: FROM_SERVER,
  payload_too_large: FROM_SERVER,
  quota_exceeded: FROM_SERVER,
  upload_exceeds_quota: FROM_SERVER,
  too_many_sign_in_attempts: FROM_SERVER,
  too_many_streams: FROM_SERVER,
  internal_error: 'Try again later; if it keeps failing, tell your operator.',
  validation_failed: 'Check what you entered and try again.',
  invalid_json: RELOAD,
  unsupported_media_type: RELOAD,
  not_found: RELOAD,
  method_not_allowed: RELOAD,
};

/** A refusal as what the person at the page should do; a code without the page's words shows the server's, if fit. */
export function consoleErrorText(code: string, details: RefusalDetails, resolution: string): string {
  const text = Object.hasOwn(CONSOLE_ERROR_TEXTS, code) ? CONSOLE_ERROR_TEXTS[code as ErrorCode] : FROM_SERVER;
  if (typeof text === 'function') return text(details);
  if (typeof text === 'string') return text;
  return API_INTERNALS.test(resolution) ? '' : resolution;
}

/** The server's message when it is the user's (it does not speak API internals), else a plain refusal. */
export function consoleMessage(message: string | undefined): string {
  return message && !API_INTERNALS.test(message) ? message : 'The server refused this request.';
}
