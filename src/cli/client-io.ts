/**
 * Terminal plumbing of the client commands: configuration from the environment, passphrases (never from argv),
 * the progress bar, human formatting, and the mapping of failures to exit codes (CONTRACT §10).
 */
import fsp from 'node:fs/promises';
import cliProgress from 'cli-progress';
import { ArchiveTooLargeError } from '../client/backup.js';
import { DEFAULT_KDF_PROFILE, IntegrityError, KDF_PROFILES, isKdfProfile, type KdfProfile } from '../client/envelope.js';
import { BackupNotRestorableError, TargetNotEmptyError } from '../client/restore.js';
import { CofferApiError, CofferClient, CofferNetworkError } from '../client/sdk.js';
import { VaultStateError } from '../client/vault.js';
import { StatusStreamError } from '../client/watch.js';
import { CliError, EXIT, usageError } from './output.js';

export const DEFAULT_URL = 'http://localhost:8080';
export const EXIT_INTERRUPTED = 130;

// ---- configuration ----

export function clientFromEnv(env: NodeJS.ProcessEnv = process.env): CofferClient {
  const baseUrl = env.COFFER_URL?.trim() || DEFAULT_URL;
  const apiKey = env.COFFER_API_KEY?.trim();
  if (!apiKey) throw usageError('COFFER_API_KEY is not set: export the API key the operator gave you');
  const blobApiUrl = env.COFFER_BLOB_API_URL?.trim() || undefined;
  for (const [name, value] of [['COFFER_URL', baseUrl], ['COFFER_BLOB_API_URL', blobApiUrl]] as const) {
    if (value !== undefined && !/^https?:\/\/[^/]/i.test(value)) {
      throw usageError(`${name} is not a valid http(s) URL: ${JSON.stringify(value)}`);
    }
  }
  try {
    return new CofferClient({ baseUrl, apiKey, blobApiUrl, userAgent: 'coffer-cli/0.1.0' });
  } catch {
    throw usageError(`COFFER_URL is not a valid http(s) URL: ${JSON.stringify(baseUrl)}`);
  }
}

export function kdfProfile(option: string | undefined, env: NodeJS.ProcessEnv = process.env): KdfProfile {
  const value = option ?? env.COFFER_KDF ?? DEFAULT_KDF_PROFILE;
  if (!isKdfProfile(value)) {
    throw usageError(`unknown key-derivation profile "${value}" (expected ${Object.keys(KDF_PROFILES).join(', ')})`);
  }
  return value;
}

export function maxArchiveBytes(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.COFFER_MAX_ARCHIVE_BYTES;
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value <= 0) throw usageError('COFFER_MAX_ARCHIVE_BYTES must be a positive integer');
  return value;
}

// ---- passphrases: --passphrase-file, the environment, or a no-echo prompt on a terminal ----

async function fromFile(file: string, option: string): Promise<string> {
  let text: string;
  try {
    text = await fsp.readFile(file, 'utf8');
  } catch (error) {
    throw usageError(`cannot read ${option} ${file}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  return text.replace(/\r?\n$/, '');
}

/** Reads a line from the terminal without echoing it. */
export function promptHidden(question: string): Promise<string> {
  const input = process.stdin;
  return new Promise((resolve, reject) => {
    let value = '';
    const finish = (error?: Error) => {
      input.off('data', onData);
      input.setRawMode(false);
      input.pause();
      process.stderr.write('\n');
      if (error) reject(error);
      else resolve(value);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n') return finish();
        if (ch === '\u0003') return finish(new CliError('cancelled', EXIT_INTERRUPTED));
        if (ch === '\u0004') {
          if (value === '') return finish(new CliError('cancelled', EXIT_INTERRUPTED));
          continue;
        }
        if (ch === '\u007f' || ch === '\b') {
          value = Array.from(value).slice(0, -1).join('');
          continue;
        }
        if (ch >= ' ') value += ch;
      }
    };
    process.stderr.write(question);
    input.setEncoding('utf8');
    input.setRawMode(true);
    input.resume();
    input.on('data', onData);
  });
}

const canPrompt = () => !!process.stdin.isTTY && typeof process.stdin.setRawMode === 'function';

function nonEmpty(value: string, source: string): string {
  if (value.length === 0) throw usageError(`the passphrase from ${source} is empty`);
  return value;
}

/** The vault passphrase: --passphrase-file, else COFFER_PASSPHRASE, else a prompt (asked twice when `confirm`). */
export async function readPassphrase(options: { passphraseFile?: string; confirm?: boolean }): Promise<string> {
  if (options.passphraseFile) return nonEmpty(await fromFile(options.passphraseFile, '--passphrase-file'), '--passphrase-file');
  const env = process.env.COFFER_PASSPHRASE;
  if (env !== undefined && env !== '') return env;
  if (!canPrompt()) {
    throw usageError('no passphrase: set COFFER_PASSPHRASE, pass --passphrase-file <file>, or run on a terminal');
  }
  return promptTwice('Passphrase: ', options.confirm ? 'Repeat the passphrase: ' : undefined);
}

/** The new passphrase of `coffer passphrase`: --new-passphrase-file, COFFER_NEW_PASSPHRASE, or a prompt asked twice. */
export async function readNewPassphrase(options: { newPassphraseFile?: string }): Promise<string> {
  if (options.newPassphraseFile) {
    return nonEmpty(await fromFile(options.newPassphraseFile, '--new-passphrase-file'), '--new-passphrase-file');
  }
  const env = process.env.COFFER_NEW_PASSPHRASE;
  if (env !== undefined && env !== '') return env;
  if (!canPrompt()) {
    throw usageError('no new passphrase: set COFFER_NEW_PASSPHRASE, pass --new-passphrase-file <file>, or run on a terminal');
  }
  return promptTwice('New passphrase: ', 'Repeat the new passphrase: ');
}

async function promptTwice(first: string, second: string | undefined): Promise<string> {
  const value = nonEmpty(await promptHidden(first), 'the prompt');
  if (second !== undefined && (await promptHidden(second)) !== value) throw usageError('the passphrases do not match');
  return value;
}

export async function confirmOnTerminal(question: string, expected: string): Promise<boolean> {
  if (!canPrompt()) return true;
  process.stderr.write(question);
  const input = process.stdin;
  input.setEncoding('utf8');
  input.resume();
  const answer = await new Promise<string>((resolve) => input.once('data', (chunk: string) => resolve(chunk)));
  input.pause();
  return answer.trim() === expected;
}

// ---- progress ----

export interface Progress {
  update(value: number, total?: number): void;
  /** Shows 100 % at the current value (the total was an estimate). */
  complete(): void;
  stop(): void;
}

/** A bytes/rate/ETA bar on stderr, only when stdout is a terminal (and not --json); silent otherwise. */
export function progressBar(label: string, json: boolean): Progress {
  if (json || !process.stdout.isTTY) return { update: () => undefined, complete: () => undefined, stop: () => undefined };
  const bar = new cliProgress.SingleBar(
    {
      format: `${label} [{bar}] {percentage}% | {done} / {size} | {rate} | ETA {eta_formatted}`,
      stream: process.stderr,
      hideCursor: true,
      etaBuffer: 64,
      fps: 8,
    },
    cliProgress.Presets.shades_classic,
  );
  const started = Date.now();
  let running = false;
  let lastTotal = 0;
  let lastValue = 0;
  return {
    update(value, total) {
      const size = total !== undefined && Number.isFinite(total) ? Math.max(total, value) : Math.max(lastTotal, value);
      const seconds = (Date.now() - started) / 1000;
      const payload = { done: bytes(value), size: bytes(size), rate: seconds > 0 ? `${bytes(value / seconds)}/s` : '-' };
      if (!running) {
        bar.start(size, value, payload);
        running = true;
      } else if (size !== lastTotal) bar.setTotal(size);
      lastTotal = size;
      lastValue = value;
      bar.update(value, payload);
    },
    complete() {
      if (!running) return;
      bar.setTotal(lastValue);
      lastTotal = lastValue;
      bar.update(lastValue);
    },
    stop() {
      if (running) bar.stop();
      running = false;
    },
  };
}

// ---- formatting ----

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${Math.round(value)} B` : `${value.toFixed(1)} ${units[unit]}`;
}

export function localTime(iso: string | Date): string {
  const date = typeof iso === 'string' ? new Date(iso) : iso;
  return date.toLocaleString(undefined, {
    weekday: 'short',
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    timeZoneName: 'short',
  });
}

/** "3 hours 12 minutes", "45 seconds". */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const parts: string[] = [];
  const units: [number, string][] = [
    [86_400, 'day'],
    [3_600, 'hour'],
    [60, 'minute'],
  ];
  let rest = s;
  for (const [size, name] of units) {
    const count = Math.floor(rest / size);
    if (count > 0) parts.push(`${count} ${name}${count === 1 ? '' : 's'}`);
    rest -= count * size;
  }
  if (parts.length === 0) return `${rest} second${rest === 1 ? '' : 's'}`;
  return parts.slice(0, 2).join(' ');
}

/** The 429 explained in local words. */
export function cadenceMessage(error: CofferApiError): string {
  const details = error.details ?? {};
  const nextAllowedAt = typeof details.nextAllowedAt === 'string' ? details.nextAllowedAt : undefined;
  const wait = error.retryAfter;
  let when = 'later';
  if (nextAllowedAt && wait !== undefined) when = `at ${localTime(nextAllowedAt)}, in ${duration(wait)}`;
  else if (nextAllowedAt) when = `at ${localTime(nextAllowedAt)}`;
  else if (wait !== undefined) when = `in ${duration(wait)}`;
  const interval = typeof details.backupInterval === 'string' ? ` (interval ${details.backupInterval})` : '';
  return (
    `backup refused: ${error.message.replace(/\.$/, '')}${interval}. The next backup is allowed ${when}. ` +
    'Run `coffer backup` again then, or ask the operator for a plan with a shorter interval.'
  );
}

// ---- failures → exit codes ----

/** Turns any failure of a client command into a CliError with the exit code of CONTRACT §10. */
export function toCliError(error: unknown, json: boolean): CliError {
  if (error instanceof CliError) return error;
  if (error instanceof IntegrityError) {
    return new CliError(`integrity check failed: ${error.message}; nothing was written`, EXIT.integrity);
  }
  if (error instanceof CofferApiError) {
    if (json) process.stdout.write(`${JSON.stringify(error.body)}\n`);
    if (error.status === 429) return new CliError(cadenceMessage(error), EXIT.cadence);
    if (error.status === 401) {
      return new CliError(`the server refused the API key (${error.code}): check COFFER_API_KEY`, EXIT.failure);
    }
    const resolution = error.resolution ? ` ${error.resolution}` : '';
    return new CliError(`${error.message} (${error.code}, HTTP ${error.status}).${resolution}`, EXIT.failure);
  }
  if (error instanceof StatusStreamError) return new CliError(`event stream error: ${error.message}`, EXIT.failure);
  if (
    error instanceof CofferNetworkError ||
    error instanceof ArchiveTooLargeError ||
    error instanceof TargetNotEmptyError ||
    error instanceof BackupNotRestorableError ||
    error instanceof VaultStateError
  ) {
    return new CliError(error.message, EXIT.failure);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new CliError(message, EXIT.failure);
}

/** An AbortController tied to Ctrl-C, so an interrupted backup or restore still cleans up after itself. */
export function interruptible(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const onSigint = () => controller.abort(new CliError('interrupted', EXIT_INTERRUPTED));
  process.once('SIGINT', onSigint);
  process.once('SIGTERM', onSigint);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', onSigint);
      process.off('SIGTERM', onSigint);
    },
  };
}
