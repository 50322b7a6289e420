/**
 * What the CLI's user should do about a refusal of the API, one row per error code (src/domain/errors.ts), in terms
 * of the CLI's commands and COFFER_* settings. The API's own `resolution` is written for API callers (it names
 * paths, headers and `details.*` fields), so every code either has the CLI's words here or is marked FROM_SERVER:
 * then, like any code this CLI does not know, it shows the server's message and resolution when they do not speak
 * API internals. The console page has its own table (console/src/error-texts.ts).
 */
import { API_INTERNALS, type ErrorCode } from '../domain/errors.js';
import { isScope, type Scope } from '../domain/scopes.js';

/** What the CLI's texts may use: the details, the server's message, and two facts only the CLI knows. */
export interface CliRefusal {
  /** The refusal's `details`, as the server sent them: each text checks the type of what it reads. */
  details: Record<string, unknown>;
  message: string;
  /** When the next backup is allowed, in the terminal's local words ("at …, in 3 hours", "later"). */
  nextBackupAllowed: string;
  /** Whether the server runs on this machine (its URL is a loopback address): whoever runs the CLI is its operator. */
  serverIsHere: boolean;
}

/** A code whose refusal the CLI shows in the server's words (its message and resolution, when they are the user's). */
export const FROM_SERVER = Symbol('the server’s words');

type CliText = string | ((refusal: CliRefusal) => string) | typeof FROM_SERVER;

/** What each permission lets a key do, in terms of the CLI's commands. */
export const PERMISSION_USES: Record<Scope, string> = {
  'backups:read': 'read backups and the vault (list, show, watch, and every command that asks for the passphrase)',
  'backups:write': 'make and delete backups or change the vault (init, backup, delete, passphrase, reset)',
  'backups:restore': 'download backups (restore)',
};

/** The CLI's words for a request this server does not understand: most likely another server or version. */
const MISMATCH = 'check that COFFER_URL points at a Coffer server of a matching version';
const NOT_ACCEPTED = `the server did not accept this request: ${MISMATCH}.`;

/**
 * The 429 in local words. The server names the caller's account and plan (details.accountId, .plan); when the server
 * runs on this machine, whoever runs the CLI is the operator who can move the account, so the text names the
 * command; otherwise it says what to ask the operator for.
 */
function cadence({ details, message, nextBackupAllowed, serverIsHere }: CliRefusal): string {
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

function insufficientScope({ details }: CliRefusal): string {
  if (details.reason === 'append_only') {
    return (
      'this API key is append-only: it may add backups, but not delete them, reset the account or change the vault. ' +
      "Nothing was changed. Do this with the account owner's key (or in the console)."
    );
  }
  const permission = typeof details.requiredPermission === 'string' ? details.requiredPermission : undefined;
  if (!permission || !isScope(permission))
    return 'this API key is not allowed to do this: use a key with more permissions (set COFFER_API_KEY).';
  return (
    `this API key is not allowed to ${PERMISSION_USES[permission]}: it lacks the ${permission} permission. Use a key that has it ` +
    `(create one on the console's Keys page, or ask the operator: coffer admin keys create --scopes ${permission}) ` +
    'and set COFFER_API_KEY to it.'
  );
}

/** Every error code: the CLI's words, or FROM_SERVER (test/cli/error-texts.test.ts checks the table is complete). */
export const CLI_ERROR_TEXTS: Record<ErrorCode, CliText> = {
  backup_cadence_exceeded: cadence,
  authentication_required:
    'the server refused the API key: it is unknown, revoked or expired. Set COFFER_API_KEY to a valid key ' +
    "(create one on the console's Keys page, or ask the operator: coffer admin keys create).",
  insufficient_scope: insufficientScope,
  csrf_token_invalid: FROM_SERVER,
  reauthentication_required: FROM_SERVER,
  login_link_invalid: FROM_SERVER,
  backup_not_found: 'no such backup: check the id (`coffer list` shows your backups).',
  backup_content_unavailable: 'this backup has no content to restore: only READY backups can be restored (see `coffer show <id>`).',
  vault_not_initialized: 'the vault is not initialized: run `coffer init` first.',
  vault_not_empty: ({ details }) => {
    const remaining = typeof details.remainingBackups === 'number' ? details.remainingBackups : 'some';
    return `reset refused: ${remaining} backup(s) remain. Delete them first, or pass --delete-backups.`;
  },
  vault_changed:
    'the vault was changed by another client meanwhile (a rekey, recovery or passphrase change ' +
    'elsewhere); nothing was changed: run the command again.',
  upload_in_progress: 'another backup of this account is being uploaded: wait until it is finished, then try again.',
  invalid_backup_state: ({ details }) =>
    `the backup is ${typeof details.status === 'string' ? details.status : 'in another state'}, so this does not apply to it (see \`coffer show <id>\`).`,
  ciphertext_size_mismatch: 'the server holds a different number of bytes than were uploaded: run the backup again.',
  payload_too_large:
    'the encrypted archive is larger than the server accepts: back up a smaller directory, or split it into several backups.',
  quota_exceeded: FROM_SERVER,
  upload_exceeds_quota: FROM_SERVER,
  too_many_sign_in_attempts: FROM_SERVER,
  too_many_streams: FROM_SERVER,
  internal_error: 'the server failed on its side: try again later; if it keeps failing, tell the operator.',
  validation_failed: NOT_ACCEPTED,
  invalid_json: NOT_ACCEPTED,
  unsupported_media_type: NOT_ACCEPTED,
  not_found: NOT_ACCEPTED,
  method_not_allowed: NOT_ACCEPTED,
};

/** Server text without API internals, else empty. */
const userWords = (text: string): string => (API_INTERNALS.test(text) ? '' : text.trim());

/** A refusal as what the CLI's user should do; a code without CLI words shows the server's words when they are the user's. */
export function cliErrorText(code: string, refusal: CliRefusal, resolution: string): string {
  const text = Object.hasOwn(CLI_ERROR_TEXTS, code) ? CLI_ERROR_TEXTS[code as ErrorCode] : FROM_SERVER;
  if (typeof text === 'function') return text(refusal);
  if (typeof text === 'string') return text;
  const words = [userWords(refusal.message), userWords(resolution)].filter(Boolean).join(' ');
  return `the server refused (${code})${words ? `: ${words}` : `: ${MISMATCH}.`}`;
}

// ---- restore drills (docs/client.md#restore-drills): where they may run ----

const WHERE_DRILLS_RUN =
  "Run drills where the passphrase or the recovery kit is at hand, with a key that may read backups: the owner's " +
  'workstation (coffer verify --drill --all, or a profile with "drill": "weekly"), never the backup host.';

/** `coffer verify --drill` on a backup host: a recipient and no passphrase (and no kit given). */
export const DRILL_ON_A_HOST =
  'this is a backup host: it seals backups to a recipient and holds no passphrase, so it cannot open a backup to drill ' +
  `it (and it should never hold the passphrase). ${WHERE_DRILLS_RUN} Nothing was checked or recorded.`;

/** `coffer verify --drill` with a key without backups:read (a write-only host key). */
export const drillNeedsRead = (): string =>
  'this API key may not read backups (it lacks the backups:read permission, like a write-only backup host key), so it ' +
  `cannot drill: a drill downloads and checks a backup and records the result. ${WHERE_DRILLS_RUN} Nothing was checked or recorded.`;

/** `coffer verify --drill` with the passphrase and an append-only key: the server never hands it the wrapped vault key. */
export const drillWithAppendOnlyKey = (): string =>
  "this API key is append-only: the server never gives it the vault's wrapped key, so the passphrase cannot open the " +
  `vault here. Drill with the recovery kit (--kit-file) or with the owner's key. ${WHERE_DRILLS_RUN} Nothing was checked or recorded.`;

/** A server without the attestation routes (or that does not name the key's account): drills are checked, not recorded. */
export const serverRecordsNoDrills = (version: string, then: string): string =>
  `this server does not record restore drills (it is older than this coffer, ${version}): ${then}; nothing was recorded. ` +
  'Update the server to keep a record of drills.';
