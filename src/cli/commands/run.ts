/**
 * `coffer run [--profile p]`: one agent run of a profile (docs/client.md#coffer-run). If the plan's cadence allows a
 * backup, make one (hooks around it, notifications, the history chain); if not, exit 0 saying when the next one is
 * due, without opening a slot. `coffer agent` and the systemd timer of `coffer schedule` run exactly this.
 */
import type { Command } from 'commander';
import fsp from 'node:fs/promises';
import {
  INTERVAL_MS,
  isInterval,
  isOverdue,
  lockProfile,
  nextDueAt,
  readRunState,
  type RunState,
  writeRunState,
} from '../../client/agent-state.js';
import { ArchiveTooLargeError, runBackup } from '../../client/backup.js';
import { chainForProfile, readChainHead } from '../../client/chain.js';
import { IntegrityError, wipe } from '../../client/envelope.js';
import { fsReason, SourceReadError } from '../../client/fs-errors.js';
import { HookError, hookFailure, type HookName, type HookOutcome, runHook } from '../../client/hooks.js';
import { type FailureKind, notify, type NotifyEvent, type RunFacts } from '../../client/notify.js';
import { ProfileError } from '../../client/profiles.js';
import { CofferApiError, CofferNetworkError, type CofferClient } from '../../client/sdk.js';
import { HostWithoutVaultError, requireSealableVault } from '../../client/vault.js';
import type { BackupInterval } from '../../domain/plans.js';
import { iso, isoOrNull } from '../../domain/time.js';
import { ConfigError } from '../../config.js';
import {
  action,
  clientFor,
  type CommandContext,
  PASSPHRASE_FILE_OPTION,
  type PassphraseOptions,
  recipientFor,
  requireProfile,
  type SelectedProfile,
} from '../command-frame.js';
import { unlock } from '../secrets.js';
import { bytes, duration, localTime } from '../format.js';
import { toCliError } from '../failures.js';
import { CliError, EXIT, note, print, printJson, usageError } from '../output.js';

export type RunOptions = PassphraseOptions & { interval?: string };

export interface RunOutcome {
  outcome: 'success' | 'failure' | 'skipped';
  profile: string;
  backupId: string | null;
  /** When the next backup is due (null: now, or unknown). */
  nextDueAt: string | null;
  /** The account's interval, when known. */
  interval: BackupInterval | null;
  message: string;
  /** The failure, for the exit code (failure only). */
  error?: unknown;
}

/** What a failure is, as the category a notification may carry (never its message: that can name files). */
export function failureKind(error: unknown, aborted: boolean): FailureKind {
  if (aborted) return 'interrupted';
  if (error instanceof HookError) return 'hook';
  if (error instanceof SourceReadError) return 'source';
  if (error instanceof ArchiveTooLargeError) return 'too-large';
  // A key of an account without a vault: the host is set up with the wrong key, nothing the server did wrong.
  if (error instanceof HostWithoutVaultError) return 'configuration';
  if (error instanceof CofferApiError) return error.code === 'vault_not_initialized' ? 'configuration' : 'server';
  if (error instanceof CofferNetworkError) return 'network';
  if (error instanceof IntegrityError) return 'integrity';
  if (error instanceof ConfigError || error instanceof ProfileError) return 'configuration';
  if (error instanceof CliError) return error.exitCode === EXIT.usage ? 'configuration' : 'other';
  return 'other';
}

/** The account's interval and its newest READY backup, when the key may read them (null: it may not). */
async function cadenceOf(
  client: CofferClient,
  signal: AbortSignal,
): Promise<{ interval: BackupInterval; newestReady: number | null; listed: Set<string>; retentionMs: number | null } | null> {
  try {
    const account = await client.getAccount(signal);
    const { backups } = await client.listBackups(signal);
    const ready = backups.filter((b) => b.status === 'READY');
    const times = ready.map((b) => Date.parse(b.createdAt));
    return {
      interval: account.backupInterval,
      newestReady: times.length ? Math.max(...times) : null,
      listed: new Set(backups.map((b) => b.id)),
      retentionMs: ready[0] ? Date.parse(ready[0].expiresAt) - Date.parse(ready[0].createdAt) : null,
    };
  } catch (error) {
    // A write-only key cannot read the account: decide from the local state, and let a 429 say the rest.
    if (error instanceof CofferApiError && error.code === 'insufficient_scope') return null;
    throw error;
  }
}

/** The next allowed time a 429 names (details.nextAllowedAt, else Retry-After). */
function retryAt(error: CofferApiError, now: number): number | null {
  // Every time the server sends is checked: finite and within a year, else unknown; a past time is now.
  const inRange = (at: number) => (Number.isFinite(at) && Math.abs(at - now) <= MAX_SERVER_TIME_MS ? Math.max(at, now) : null);
  const named = typeof error.details?.nextAllowedAt === 'string' ? inRange(Date.parse(error.details.nextAllowedAt)) : null;
  if (named !== null) return named;
  const after = error.retryAfter;
  return typeof after === 'number' && Number.isFinite(after) && after >= 0 ? inRange(now + after * 1000) : null;
}

/** How far from now a time the server names may be before it is treated as unknown. */
const MAX_SERVER_TIME_MS = 366 * 86_400_000;

/**
 * One agent run. Never throws for the backup's own failure: the outcome says it (with `error`), after the hooks
 * and notifications ran. Throws for what stops the run before it starts (no profile, a busy profile, interruption).
 */
export async function agentRun(context: CommandContext, options: RunOptions): Promise<RunOutcome> {
  const { signal, config } = context;
  const { name, profile } = requireProfile(context.profile, 'coffer run');
  const release = await lockProfile(config.stateDir, name);
  try {
    const now = Date.now();
    // What fails before the "is a backup due?" decision (the server unreachable, a revoked key, a 5xx, a damaged
    // state file) is a failed run like any other: on-failure hook, notification, run state, overdue check.
    let earlyFailure: unknown;
    const previous = await readRunState(config.stateDir, name).catch((error: unknown) => void (earlyFailure = error));
    const client = clientFor(config);
    const seen = earlyFailure === undefined ? await cadenceOf(client, signal).catch((error: unknown) => void (earlyFailure = error)) : undefined;
    if (signal.aborted && earlyFailure !== undefined) throw earlyFailure;
    // The host knows its chain's head: a key that may list sees at once when the server stops listing it.
    const head = seen ? await readChainHead(config.stateDir, name).catch(() => null) : null;
    if (seen && head && !seen.listed.has(head.backupId) && Date.parse(head.createdAt) + (seen.retentionMs ?? Infinity) > now) {
      note(
        `warning: the server no longer lists this profile's last backup ${head.backupId} (#${head.seq} of its history chain), ` +
          'which has not expired: it was deleted, or the server hides it (check with coffer list --chain)',
      );
    }
    let interval: BackupInterval | null = seen?.interval ?? previous?.interval ?? null;
    if (options.interval !== undefined) {
      if (!isInterval(options.interval)) throw usageError(`--interval must be one of 30m, 4h, 1d, got "${options.interval}"`);
      interval ??= options.interval;
    }
    const intervalMs = interval ? INTERVAL_MS[interval] : null;
    const lastSuccess = previous?.lastSuccessAt ? Date.parse(previous.lastSuccessAt) : null;
    const newestReady = seen ? seen.newestReady : lastSuccess;
    // A key that may not read the account learns the next allowed time only from the server's refusals: the last
    // one it was told still holds, so the hooks do not run just to hear it again.
    const told = !seen && previous?.nextDueAt ? Date.parse(previous.nextDueAt) : null;
    const due = intervalMs === null ? (told !== null && told > now ? told : null) : nextDueAt(newestReady, intervalMs);

    const state: RunState = {
      version: 1,
      interval,
      firstRunAt: previous?.firstRunAt ?? iso(now),
      lastRunAt: iso(now),
      lastOutcome: 'skipped',
      lastSuccessAt: previous?.lastSuccessAt ?? null,
      lastBackupId: previous?.lastBackupId ?? null,
      nextDueAt: isoOrNull(due),
      overdueNotifiedAt: previous?.overdueNotifiedAt ?? null,
    };
    const facts = (more: Partial<RunFacts> = {}): RunFacts => ({
      profile: name,
      lastSuccessAt: state.lastSuccessAt,
      nextDueAt: state.nextDueAt,
      ...more,
    });
    const send = async (event: NotifyEvent, more: Partial<RunFacts> = {}) => {
      for (const delivery of await notify(profile.notify, event, facts(more), signal)) {
        if (!delivery.ok) note(`warning: the ${event} notification to ${delivery.target} failed: ${delivery.detail}`);
      }
    };
    const checkOverdue = async () => {
      if (intervalMs === null || state.overdueNotifiedAt !== null) return;
      if (!isOverdue(lastSuccess, Date.parse(state.firstRunAt), intervalMs, Date.now())) return;
      await send('overdue');
      state.overdueNotifiedAt = new Date().toISOString();
    };
    const finish = async (outcome: RunOutcome): Promise<RunOutcome> => {
      state.lastOutcome = outcome.outcome;
      state.nextDueAt = outcome.nextDueAt;
      if (outcome.outcome !== 'success') await checkOverdue();
      await writeRunState(config.stateDir, name, state);
      return outcome;
    };
    const skipped = (at: number | null, why: string): RunOutcome => ({
      outcome: 'skipped',
      profile: name,
      backupId: null,
      nextDueAt: isoOrNull(at),
      interval,
      message: at === null ? why : `${why}: the next backup is due ${localTime(new Date(at))} (in ${duration((at - Date.now()) / 1000)})`,
    });

    if (earlyFailure !== undefined) {
      const cli = toCliError(earlyFailure, false);
      const timeoutMs = profile.hooks.timeoutSeconds * 1000;
      if (profile.hooks.onFailure) {
        const result = await runHook('on-failure', profile.hooks.onFailure, { outcome: 'failure', profile: name, error: cli.message }, { timeoutMs, signal });
        if (result.output) note(`on-failure hook: ${result.output}`);
      }
      await send('failure', { failure: failureKind(earlyFailure, false), exitCode: cli.exitCode });
      return await finish({ outcome: 'failure', profile: name, backupId: null, nextDueAt: null, interval, message: cli.message, error: earlyFailure });
    }
    if (due !== null && due > now) {
      return await finish(skipped(due, intervalMs === null ? 'not due (as the server said at the last run)' : `not due (one backup per ${interval})`));
    }

    // ---- due: hooks, notifications and the backup ----
    const timeoutMs = profile.hooks.timeoutSeconds * 1000;
    const hook = async (hookName: HookName, command: string | undefined, context: HookOutcome): Promise<string | null> => {
      if (!command) return null;
      const result = await runHook(hookName, command, context, { timeoutMs, signal });
      if (result.output) note(`${hookName} hook: ${result.output}`);
      return hookFailure(hookName, result, timeoutMs);
    };
    const started = Date.now();
    // Once `before` ran (and did not fail), `after` runs whatever happens next: what `before` stopped must start again.
    let afterDue = false;
    const after = (context: HookOutcome) => {
      afterDue = false;
      return hook('after', profile.hooks.after, context);
    };
    try {
      // Only once the server has opened the slot: a run it refuses (cadence, quota) pings nothing and stops nothing.
      const afterSlot = async () => {
        await send('start');
        const beforeFailed = await hook('before', profile.hooks.before, { outcome: 'pending', profile: name });
        if (beforeFailed) throw new HookError(beforeFailed);
        afterDue = true;
      };
      const result = await backupProfile(context, { name, profile }, options, afterSlot);
      state.lastSuccessAt = result.detail.createdAt;
      state.lastBackupId = result.detail.id;
      state.overdueNotifiedAt = null;
      const next = intervalMs === null ? null : Date.parse(result.detail.createdAt) + intervalMs;
      const afterFailed = await after({
        outcome: 'success',
        profile: name,
        backupId: result.detail.id,
        nextDueAt: isoOrNull(next) ?? undefined,
      });
      if (afterFailed) {
        // The backup is READY; the run still failed (what the before hook stopped may not be running again).
        const error = new HookError(`backup ${result.detail.id} is READY, but ${afterFailed}`);
        await hook('on-failure', profile.hooks.onFailure, { outcome: 'failure', profile: name, backupId: result.detail.id, error: error.message });
        await send('failure', { backupId: result.detail.id, failure: 'hook', exitCode: EXIT.failure });
        return await finish({ outcome: 'failure', profile: name, backupId: result.detail.id, nextDueAt: isoOrNull(next), interval, message: error.message, error });
      }
      await send('success', {
        backupId: result.detail.id,
        fileCount: result.metadata.fileCount,
        plaintextBytes: result.metadata.plaintextSizeBytes,
        ciphertextBytes: result.detail.ciphertextSizeBytes ?? undefined,
        durationSeconds: Math.round((Date.now() - started) / 1000),
        nextDueAt: isoOrNull(next),
      });
      return await finish({
        outcome: 'success',
        profile: name,
        backupId: result.detail.id,
        nextDueAt: isoOrNull(next),
        interval,
        message:
          `backup ${result.detail.id} ${result.detail.status}: ${result.metadata.fileCount} files, ${bytes(result.metadata.plaintextSizeBytes)} archived, ` +
          `${bytes(result.detail.ciphertextSizeBytes)} encrypted`,
      });
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof CofferApiError && error.status === 429) {
        // The server's clock, or a backup this host could not see, says not yet: nothing was opened, no hook ran.
        const at = retryAt(error, Date.now());
        return await finish(skipped(at, 'not due (the server refused: cadence)'));
      }
      const cli = toCliError(error, false);
      if (afterDue) await after({ outcome: 'failure', profile: name, error: cli.message });
      await hook('on-failure', profile.hooks.onFailure, { outcome: 'failure', profile: name, error: cli.message });
      await send('failure', { failure: failureKind(error, false), exitCode: cli.exitCode, durationSeconds: Math.round((Date.now() - started) / 1000) });
      return await finish({ outcome: 'failure', profile: name, backupId: null, nextDueAt: null, interval, message: cli.message, error });
    } finally {
      // Interrupted, or a failure in the failure handling itself: still `after`, without the (aborted) run's signal.
      if (afterDue && profile.hooks.after) {
        await runHook('after', profile.hooks.after, { outcome: 'failure', profile: name, error: 'the run stopped before it finished' }, { timeoutMs }).catch(
          () => undefined,
        );
      }
    }
  } finally {
    release();
  }
}

/**
 * The backup of a profile: its paths, sealed to its recipient (else with the passphrase), linked into its chain.
 */
async function backupProfile(context: CommandContext, { name, profile }: SelectedProfile, options: RunOptions, afterSlot: () => Promise<void>) {
  const { signal, config } = context;
  for (const source of profile.paths) {
    await fsp.lstat(source).catch((error: unknown) => {
      throw new SourceReadError(`cannot back up ${source}: ${fsReason(error)}`, source);
    });
  }
  const client = clientFor(config);
  const recipient = recipientFor(undefined, config);
  let masterKey: Buffer | undefined;
  if (recipient) await requireSealableVault(client, signal);
  else ({ masterKey } = await unlock(client, config, options, signal));
  try {
    const chain = await chainForProfile(config.stateDir, name);
    const result = await runBackup({
      client,
      ...(recipient ? { recipient } : { masterKey }),
      sources: profile.paths,
      exclude: profile.excludes,
      name: profile.name,
      maxArchiveBytes: config.maxArchiveBytes ?? undefined,
      chain: chain.link,
      signal,
      afterSlot,
    });
    const skewWarning = await chain.record(result);
    if (skewWarning) process.stderr.write(`${skewWarning}\n`);
    return result;
  } finally {
    wipe(masterKey);
  }
}

export const INTERVAL_OPTION = ['--interval <interval>', 'the plan interval (30m, 4h, 1d) when the API key may not read the account'] as const;

export function registerRun(program: Command): void {
  program
    .command('run')
    .description("one agent run of a profile: back up if the plan's cadence allows (hooks, notifications, history chain), else say when")
    .option(...PASSPHRASE_FILE_OPTION)
    .option(...INTERVAL_OPTION)
    .option('--json', 'print the outcome as JSON ({"outcome", "profile", "backupId", "nextDueAt", "interval", "message"})')
    .action(
      action(async (context, options: RunOptions) => {
        const outcome = await agentRun(context, options);
        const { error, ...shown } = outcome;
        if (options.json) printJson(shown);
        else if (outcome.outcome !== 'failure') print(outcome.message);
        if (outcome.outcome === 'failure') throw toCliError(error, false);
      }),
    );
}
