/**
 * Profile hooks (docs/client.md#hooks): `before`, `after` and `onFailure` shell commands around an agent run, each
 * with a timeout, told the outcome through their environment. The API key and passphrases of the CLI's own
 * environment are not passed on: a hook gets what it needs to act, not the keys.
 */
import { spawn } from 'node:child_process';

export type HookName = 'before' | 'after' | 'on-failure';

export interface HookOutcome {
  /** 'success' | 'failure' | 'skipped' (not due) | 'pending' (the before hook). */
  outcome: 'success' | 'failure' | 'skipped' | 'pending';
  profile: string;
  backupId?: string;
  /** The failure in words (may name local files: it stays on this host). */
  error?: string;
  nextDueAt?: string;
}

export interface HookResult {
  code: number | null;
  timedOut: boolean;
  /** The last lines it wrote (stdout and stderr), for the run's own output. */
  output: string;
}

export class HookError extends Error {
  override readonly name = 'HookError';
}

/** Variables never passed to a hook. */
const SECRET_VARIABLES = /^(COFFER_API_KEY|COFFER_PASSPHRASE|COFFER_NEW_PASSPHRASE)$/;
const OUTPUT_TAIL_BYTES = 4096;

/**
 * Runs `command` with /bin/sh in its own process group, in the `inherited` environment (the CLI's: src/config.ts
 * inheritedEnvironment) without the secrets; after `timeoutMs` (or on `signal`) the whole group gets SIGTERM, then
 * SIGKILL 5 s later. Resolves with the exit code (null when killed) and never rejects for the command's own failure.
 */
export function runHook(
  name: HookName,
  command: string,
  context: HookOutcome,
  options: { timeoutMs: number; signal?: AbortSignal; inherited: Record<string, string | undefined> },
): Promise<HookResult> {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(options.inherited)) if (!SECRET_VARIABLES.test(key)) env[key] = value;
  Object.assign(env, {
    COFFER_HOOK: name,
    COFFER_PROFILE: context.profile,
    COFFER_OUTCOME: context.outcome,
    COFFER_BACKUP_ID: context.backupId ?? '',
    COFFER_ERROR: context.error ?? '',
    COFFER_NEXT_DUE_AT: context.nextDueAt ?? '',
  });
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', command], { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const collect = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-OUTPUT_TAIL_BYTES);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    let timedOut = false;
    let killTimer: NodeJS.Timeout | undefined;
    const stop = () => {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        // already gone
      }
      killTimer = setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
      }, 5000);
      killTimer.unref();
    };
    const timer = setTimeout(() => {
      timedOut = true;
      stop();
    }, options.timeoutMs);
    const onAbort = () => stop();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', (error) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      reject(new HookError(`the ${name} hook could not be started: ${error.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      clearTimeout(killTimer);
      options.signal?.removeEventListener('abort', onAbort);
      resolve({ code, timedOut, output: output.trimEnd() });
    });
  });
}

/** A hook's failure in words. */
export function hookFailure(name: HookName, result: HookResult, timeoutMs: number): string | null {
  if (result.timedOut) return `the ${name} hook did not finish within ${Math.round(timeoutMs / 1000)} s and was stopped`;
  if (result.code !== 0) return `the ${name} hook failed (exit ${result.code ?? 'by signal'})`;
  return null;
}
