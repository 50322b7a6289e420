/**
 * What a person should do about a refusal of the API, one row per error code (./errors.ts), in two columns: the
 * CLI's, in terms of its commands and COFFER_* settings, and the console page's, in terms of the page. The API's own
 * `resolution` is written for API callers (it names paths, headers and `details.*` fields), so known codes get these
 * words; for any other code a side shows the server's text only when it does not speak API internals.
 */
import type { ErrorCode } from './errors.js';
import { isScope, type Scope } from './scopes.js';

/** A refusal's `details`, as the server sent them: each text checks the type of what it reads. */
export type RefusalDetails = Record<string, unknown>;

/** What the CLI's texts may use: the details, the server's message, and two facts only the CLI knows. */
export interface CliRefusal {
  details: RefusalDetails;
  message: string;
  /** When the next backup is allowed, in the terminal's local words ("at …, in 3 hours", "later"). */
  nextBackupAllowed: string;
  /** Whether the server runs on this machine (its URL is a loopback address): whoever runs the CLI is its operator. */
  serverIsHere: boolean;
}

type Text<Refusal> = string | ((refusal: Refusal) => string);

interface ErrorTexts {
  cli?: Text<CliRefusal>;
  console?: Text<RefusalDetails>;
}

/** What each permission lets a key do, in each side's words. */
export const PERMISSION_USES: Record<Scope, { cli: string; console: string }> = {
  'backups:read': {
    cli: 'read backups and the vault (list, show, watch, and every command that asks for the passphrase)',
    console: 'read backups',
  },
  'backups:write': {
    cli: 'make and delete backups or change the vault (init, backup, delete, passphrase, reset)',
    console: 'make and delete backups',
  },
  'backups:restore': { cli: 'download backups (restore)', console: 'restore backups' },
};

/** Text that speaks the HTTP API (paths, verbs, headers, response fields) instead of the user's commands or page. */
export const API_INTERNALS = /\/api\/|details\.|bearer|authorization|x-api-key|x-csrf-token|content-type|\b(GET|POST|PUT|PATCH|DELETE) \//i;

const requiredPermission = (details: RefusalDetails): string | undefined =>
  typeof details.requiredPermission === 'string' ? details.requiredPermission : undefined;

/** The CLI's words for a request this server does not understand: most likely another server or version. */
const CLI_MISMATCH = 'check that COFFER_URL points at a Coffer server of a matching version';
const CONSOLE_RELOAD = 'Reload the page; if it keeps happening, tell your operator.';

/**
 * The 429 in local words. The server names the caller's account and plan (details.accountId, .plan); when the server
 * runs on this machine, whoever runs the CLI is the operator who can move the account, so the text names the
 * command; otherwise it says what to ask the operator for.
 */
function cliCadence({ details, message, nextBackupAllowed, serverIsHere }: CliRefusal): string {
  const interval = typeof details.backupInterval === 'string' ? ` (interval ${details.backupInterval})` : '';
  const accountId = typeof details.accountId === 'string' && /^[0-9a-f-]{36}$/i.test(details.accountId) ? details.accountId : undefined;
  const head = `backup refused: ${message.replace(/\.$/, '')}${interval}. The next backup is allowed ${nextBackupAllowed}. `;
  if (details.plan === 'pro') return `${head}Run \`coffer backup\` again then (pro is the plan with the shortest interval).`;
  if (accountId && serverIsHere) {
    return (
      `${head}Run \`coffer backup\` again then. This server runs on this machine: as its operator, ` +
      `\`coffer admin accounts set-plan ${accountId} pro\` (run where the server runs, with its settings) allows one backup ` +
      'every 30 minutes.'
    );
  }
  const account = accountId ? ` (account ${accountId})` : '';
  return `${head}Run \`coffer backup\` again then, or ask the operator for a plan with a shorter interval${account}.`;
}

function cliInsufficientScope({ details }: CliRefusal): string {
  if (details.reason === 'append_only') {
    return (
      'this API key is append-only: it may add backups, but not delete them, reset the account or change the vault. ' +
      "Nothing was changed. Do this with the account owner's key (or in the console)."
    );
  }
  const permission = requiredPermission(details);
  if (!permission || !isScope(permission))
    return 'this API key is not allowed to do this: use a key with more permissions (set COFFER_API_KEY).';
  return (
    `this API key is not allowed to ${PERMISSION_USES[permission].cli}: it lacks the ${permission} permission. Use a key that has it ` +
    `(create one on the console's Keys page, or ask the operator: coffer admin keys create --scopes ${permission}) ` +
    'and set COFFER_API_KEY to it.'
  );
}

function consoleInsufficientScope(details: RefusalDetails): string {
  if (details.reason === 'append_only') {
    return (
      'This key is append-only: it can add backups but not delete them, reset the account or change ' +
      'the vault. Sign in with a login link or an owner key.'
    );
  }
  const permission = requiredPermission(details);
  const uses = permission && isScope(permission) ? PERMISSION_USES[permission].console : 'do this';
  return (
    `This key may not ${uses}${permission ? ` (it lacks ${permission})` : ''}. ` +
    'Sign in with a key that holds read, write and restore, or ask your operator for one (coffer admin keys create).'
  );
}

export const ERROR_TEXTS: Partial<Record<ErrorCode, ErrorTexts>> = {
  backup_cadence_exceeded: {
    cli: cliCadence,
    console: 'Wait until the next backup is allowed, or move to a plan with a shorter interval.',
  },
  authentication_required: {
    cli:
      'the server refused the API key: it is unknown, revoked or expired. Set COFFER_API_KEY to a valid key ' +
      "(create one on the console's Keys page, or ask the operator: coffer admin keys create).",
    console: 'Check the key and sign in again, or open a new sign-in link from your operator (coffer admin login-link).',
  },
  insufficient_scope: { cli: cliInsufficientScope, console: consoleInsufficientScope },
  csrf_token_invalid: { console: 'Reload the page and try again.' },
  reauthentication_required: {
    console: 'Confirm it is you with a fresh sign-in (a new sign-in link or an API key with all three permissions).',
  },
  backup_not_found: {
    cli: 'no such backup: check the id (`coffer list` shows your backups).',
    console: 'It may have been deleted or have expired: go back to your backups.',
  },
  backup_content_unavailable: {
    cli: 'this backup has no content to restore: only READY backups can be restored (see `coffer show <id>`).',
    console: 'Only READY backups can be restored: wait until it is ready.',
  },
  vault_not_initialized: {
    cli: 'the vault is not initialized: run `coffer init` first.',
    console: 'Set up the vault first with the CLI: coffer init.',
  },
  vault_not_empty: {
    cli: ({ details }) => {
      const remaining = typeof details.remainingBackups === 'number' ? details.remainingBackups : 'some';
      return `reset refused: ${remaining} backup(s) remain. Delete them first, or pass --delete-backups.`;
    },
    console: 'Delete the remaining backups first.',
  },
  vault_changed: {
    cli:
      'the vault was changed by another client meanwhile (a rekey, recovery or passphrase change ' +
      'elsewhere); nothing was changed: run the command again.',
  },
  upload_in_progress: {
    cli: 'another backup of this account is being uploaded: wait until it is finished, then try again.',
    console: 'Wait until the upload in progress has finished, then try again.',
  },
  invalid_backup_state: {
    cli: ({ details }) =>
      `the backup is ${typeof details.status === 'string' ? details.status : 'in another state'}, so this does not apply to it (see \`coffer show <id>\`).`,
    console: 'Reload the page to see its current status.',
  },
  ciphertext_size_mismatch: { cli: 'the server holds a different number of bytes than were uploaded: run the backup again.' },
  payload_too_large: {
    cli: 'the encrypted archive is larger than the server accepts: back up a smaller directory, or split it into several backups.',
  },
  internal_error: {
    cli: 'the server failed on its side: try again later; if it keeps failing, tell the operator.',
    console: 'Try again later; if it keeps failing, tell your operator.',
  },
  validation_failed: {
    cli: `the server did not accept this request: ${CLI_MISMATCH}.`,
    console: 'Check what you entered and try again.',
  },
  invalid_json: { cli: `the server did not accept this request: ${CLI_MISMATCH}.`, console: CONSOLE_RELOAD },
  unsupported_media_type: { cli: `the server did not accept this request: ${CLI_MISMATCH}.`, console: CONSOLE_RELOAD },
  not_found: { cli: `the server did not accept this request: ${CLI_MISMATCH}.`, console: CONSOLE_RELOAD },
  method_not_allowed: { cli: `the server did not accept this request: ${CLI_MISMATCH}.`, console: CONSOLE_RELOAD },
};

function columnText<Refusal>(text: Text<Refusal> | undefined, refusal: Refusal): string | undefined {
  return typeof text === 'function' ? text(refusal) : text;
}

const textsOf = (code: string): ErrorTexts | undefined => (Object.hasOwn(ERROR_TEXTS, code) ? ERROR_TEXTS[code as ErrorCode] : undefined);

/** Server text without API internals, else empty. */
const userWords = (text: string): string => (API_INTERNALS.test(text) ? '' : text.trim());

/** A refusal as what the CLI's user should do; an unknown code shows the server's words when they are the user's. */
export function cliErrorText(code: string, refusal: CliRefusal, resolution: string): string {
  const text = columnText(textsOf(code)?.cli, refusal);
  if (text !== undefined) return text;
  const words = [userWords(refusal.message), userWords(resolution)].filter(Boolean).join(' ');
  return `the server refused (${code})${words ? `: ${words}` : `: ${CLI_MISMATCH}.`}`;
}

/** A refusal as what the person at the console page should do; for an unknown code the server's resolution, if fit. */
export function consoleErrorText(code: string, details: RefusalDetails, resolution: string): string {
  const text = columnText(textsOf(code)?.console, details);
  if (text !== undefined) return text;
  return API_INTERNALS.test(resolution) ? '' : resolution;
}
