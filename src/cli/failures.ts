/**
 * Failures of the client commands as messages and exit codes (docs/client.md#exit-codes): the server's refusals in
 * the words of this CLI, every other failure by its class, and the interruption (Ctrl-C, SIGTERM) every command
 * runs under.
 */
import { IntegrityError, NewerFormatError, RecipientFormatError } from '../client/envelope.js';
import { CofferApiError } from '../client/sdk.js';
import { StatusStreamError } from '../client/watch.js';
import { ConfigPermissionError, ProfileError } from '../client/profiles.js';
import { ConfigError } from '../config.js';
import { duration, localTime } from './format.js';
import { CliError, EXIT, usageError, writeHuman } from './output.js';

/** Whether a URL names this machine (localhost, 127.0.0.0/8, ::1): the server runs here. */
export function isThisMachine(url: string | undefined): boolean {
  if (!url) return false;
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return false;
  }
  return host === 'localhost' || host.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(host) || host === '[::1]';
}

/**
 * The 429 explained in local words. The server names the caller's account and plan (details.accountId, .plan);
 * when the server is on this machine (COFFER_URL is a loopback address), whoever runs it is the operator who can
 * move the account, so the message names the command; otherwise it says what to ask the operator for.
 */
export function cadenceMessage(error: CofferApiError): string {
  const details = error.details ?? {};
  const nextAllowedAt = typeof details.nextAllowedAt === 'string' ? details.nextAllowedAt : undefined;
  const wait = error.retryAfter;
  let when = 'later';
  if (nextAllowedAt && wait !== undefined) when = `at ${localTime(nextAllowedAt)}, in ${duration(wait)}`;
  else if (nextAllowedAt) when = `at ${localTime(nextAllowedAt)}`;
  else if (wait !== undefined) when = `in ${duration(wait)}`;
  const interval = typeof details.backupInterval === 'string' ? ` (interval ${details.backupInterval})` : '';
  const accountId = typeof details.accountId === 'string' && /^[0-9a-f-]{36}$/i.test(details.accountId) ? details.accountId : undefined;
  const head = `backup refused: ${error.message.replace(/\.$/, '')}${interval}. The next backup is allowed ${when}. `;
  if (details.plan === 'pro') return `${head}Run \`coffer backup\` again then (pro is the plan with the shortest interval).`;
  if (accountId && isThisMachine(error.url)) {
    return (
      `${head}Run \`coffer backup\` again then. This server runs on this machine: as its operator, ` +
      `\`coffer admin accounts set-plan ${accountId} pro\` (run where the server runs, with its settings) allows one backup ` +
      'every 30 minutes.'
    );
  }
  const account = accountId ? ` (account ${accountId})` : '';
  return `${head}Run \`coffer backup\` again then, or ask the operator for a plan with a shorter interval${account}.`;
}

/** What each permission lets a key do, in the commands that need it. */
const PERMISSION_USES: Record<string, string> = {
  'backups:read': 'read backups and the vault (list, show, watch, and every command that asks for the passphrase)',
  'backups:write': 'make and delete backups or change the vault (init, backup, delete, passphrase, reset)',
  'backups:restore': 'download backups (restore)',
};

/** Text that speaks the HTTP API (paths, verbs, headers, response fields) instead of the user's commands. */
const API_INTERNALS = /\/api\/|details\.|bearer|authorization|x-api-key|content-type|\b(GET|POST|PUT|PATCH|DELETE) \//i;
const userWords = (text: string) => (API_INTERNALS.test(text) ? '' : text.trim());

/**
 * A refusal of the server as what the user should do, in terms of this CLI. The API's own `resolution` is
 * written for API callers (it names paths, headers and `details.*` fields), so known codes get their own words
 * here; an unknown code falls back to the server's text only when it does not speak API internals.
 */
export function apiErrorMessage(error: CofferApiError): string {
  const details = error.details ?? {};
  const again = 'check that COFFER_URL points at a Coffer server of a matching version';
  switch (error.code) {
    case 'backup_cadence_exceeded':
      return cadenceMessage(error);
    case 'authentication_required':
      return (
        'the server refused the API key: it is unknown, revoked or expired. Set COFFER_API_KEY to a valid key ' +
        "(create one on the console's Keys page, or ask the operator: coffer admin keys create)."
      );
    case 'insufficient_scope': {
      if (details.reason === 'append_only') {
        return (
          'this API key is append-only: it may add backups, but not delete them, reset the account or change the vault. ' +
          "Nothing was changed. Do this with the account owner's key (or in the console)."
        );
      }
      const permission = typeof details.requiredPermission === 'string' ? details.requiredPermission : undefined;
      const uses = permission ? PERMISSION_USES[permission] : undefined;
      if (!permission || !uses) return 'this API key is not allowed to do this: use a key with more permissions (set COFFER_API_KEY).';
      return (
        `this API key is not allowed to ${uses}: it lacks the ${permission} permission. Use a key that has it ` +
        `(create one on the console's Keys page, or ask the operator: coffer admin keys create --scopes ${permission}) ` +
        'and set COFFER_API_KEY to it.'
      );
    }
    case 'backup_not_found':
      return 'no such backup: check the id (`coffer list` shows your backups).';
    case 'backup_content_unavailable':
      return 'this backup has no content to restore: only READY backups can be restored (see `coffer show <id>`).';
    case 'vault_not_initialized':
      return 'the vault is not initialized: run `coffer init` first.';
    case 'vault_not_empty': {
      const remaining = typeof details.remainingBackups === 'number' ? details.remainingBackups : 'some';
      return `reset refused: ${remaining} backup(s) remain. Delete them first, or pass --delete-backups.`;
    }
    case 'vault_changed':
      return 'the vault was changed by another client meanwhile (a rekey, recovery or passphrase change elsewhere); nothing was changed: run the command again.';
    case 'upload_in_progress':
      return 'another backup of this account is being uploaded: wait until it is finished, then try again.';
    case 'invalid_backup_state':
      return `the backup is ${typeof details.status === 'string' ? details.status : 'in another state'}, so this does not apply to it (see \`coffer show <id>\`).`;
    case 'ciphertext_size_mismatch':
      return 'the server holds a different number of bytes than were uploaded: run the backup again.';
    case 'payload_too_large':
      return 'the encrypted archive is larger than the server accepts: back up a smaller directory, or split it into several backups.';
    case 'internal_error':
      return 'the server failed on its side: try again later; if it keeps failing, tell the operator.';
    case 'validation_failed':
    case 'invalid_json':
    case 'unsupported_media_type':
    case 'not_found':
    case 'method_not_allowed':
      return `the server did not accept this request: ${again}.`;
    default: {
      const text = [userWords(error.message), userWords(error.resolution)].filter(Boolean).join(' ');
      return `the server refused (${error.code})${text ? `: ${text}` : `: ${again}.`}`;
    }
  }
}

/** Turns any failure of a client command into a CliError with the exit code of docs/client.md#exit-codes. */
export function toCliError(error: unknown, json: boolean): CliError {
  if (error instanceof CliError) return error;
  if (error instanceof ConfigError) return usageError(`invalid configuration: ${error.message}`);
  if (error instanceof ConfigPermissionError) return usageError(error.message);
  if (error instanceof ProfileError) return usageError(`invalid profile: ${error.message}`);
  if (error instanceof RecipientFormatError) return usageError(`invalid recipient: ${error.message}`);
  if (error instanceof NewerFormatError) return new CliError(`cannot open: ${error.message}`, EXIT.failure);
  if (error instanceof IntegrityError) {
    return new CliError(`integrity check failed: ${error.message}; nothing was written`, EXIT.integrity);
  }
  if (error instanceof CofferApiError) {
    if (json) process.stdout.write(`${JSON.stringify(error.body)}\n`);
    return new CliError(apiErrorMessage(error), error.status === 429 ? EXIT.cadence : EXIT.failure);
  }
  if (error instanceof StatusStreamError) return new CliError(`event stream error: ${error.message}`, EXIT.failure);
  const message = error instanceof Error ? error.message : String(error);
  return new CliError(message, EXIT.failure);
}

/** How long an interrupted command may take to clean up before it is ended anyway. */
const INTERRUPT_GRACE_MS = 2000;

/**
 * The one abort mechanism of the CLI: every command runs with this signal, which Ctrl-C (SIGINT) or SIGTERM
 * aborts; network requests, file I/O, retry sleeps and prompts all take it, clean up (upload slot, staging
 * directory) and end the command with exit 130. A second signal, or a command still running
 * INTERRUPT_GRACE_MS after the first, exits 130 at once.
 */
export function interruptible(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const exitNow = () => {
    if (process.stdin.isTTY && process.stdin.isRaw) process.stdin.setRawMode(false);
    writeHuman(process.stderr, 'coffer: interrupted');
    process.exit(EXIT.interrupted);
  };
  const onSignal = () => {
    if (controller.signal.aborted) return exitNow();
    controller.abort(new CliError('interrupted', EXIT.interrupted));
    timer = setTimeout(exitNow, INTERRUPT_GRACE_MS);
    timer.unref();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}
