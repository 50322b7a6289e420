/**
 * Failures of the client commands as messages and exit codes (docs/client.md#exit-codes): the server's refusals in
 * the words of this CLI, every other failure by its class, and the interruption (Ctrl-C, SIGTERM) every command
 * runs under.
 */
import { CofferApiError, IntegrityError, NewerFormatError, RecipientFormatError, StatusStreamError } from '../client/index.js';
import { ConfigPermissionError, ProfileError } from './agent/profiles.js';
import { ConfigError } from '../config.js';
import { cliErrorText } from './error-texts.js';
import { duration, localTime } from './format.js';
import { CliError, endLiveLines, EXIT, usageError, writeHuman } from './output.js';

/** Whether a URL names this machine (localhost, 127.0.0.0/8, ::1): the server runs here. */
function isThisMachine(url: string | undefined): boolean {
  if (!url) return false;
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return false;
  }
  return host === 'localhost' || host.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(host) || host === '[::1]';
}

/** When a 429 says the next backup is allowed, in local time and a duration. */
function nextBackupAllowed(error: CofferApiError): string {
  const nextAllowedAt = typeof error.details?.nextAllowedAt === 'string' ? error.details.nextAllowedAt : undefined;
  const wait = error.retryAfter;
  if (nextAllowedAt && wait !== undefined) return `at ${localTime(nextAllowedAt)}, in ${duration(wait)}`;
  if (nextAllowedAt) return `at ${localTime(nextAllowedAt)}`;
  if (wait !== undefined) return `in ${duration(wait)}`;
  return 'later';
}

/** A refusal of the server as what the user should do, in terms of this CLI (./error-texts.ts). */
export function apiErrorMessage(error: CofferApiError): string {
  const refusal = {
    details: error.details ?? {},
    message: error.message,
    nextBackupAllowed: nextBackupAllowed(error),
    serverIsHere: isThisMachine(error.url),
  };
  return cliErrorText(String(error.code), refusal, error.resolution);
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
    // No progress bar draws over what the interrupted command still says (its cleanup, "interrupted").
    endLiveLines(true);
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
