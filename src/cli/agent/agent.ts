/**
 * One agent run of a profile (docs/client.md#coffer-run): is a backup due (the account's cadence, else what the
 * last refusal said)? If so, make it, with the hooks around it, the notifications and the history chain; if not,
 * say when. What a run remembers and the rules it decides by are in ./agent-state.ts. The caller passes in what
 * speaks to the user or reaches outside (the hook runner, the notifier, the key material, the failure's words);
 * the run returns its outcome and prints nothing.
 */
import fsp from 'node:fs/promises';
import type { BackupInterval } from '../../domain/plans.js';
import { iso, isoOrNull } from '../../domain/time.js';
import { INTERVAL_MS, isOverdue, lockProfile, nextDueAt, readRunState, type RunState, writeRunState } from './agent-state.js';
import {
  type BackupResult,
  chainForProfile,
  CofferApiError,
  type CofferClient,
  CofferNetworkError,
  fsReason,
  readChainHead,
  type Recipient,
  requireSealableVault,
  runBackup,
  SourceReadError,
  wipe,
} from '../../client/index.js';
import { HookError, hookFailure, type HookName, type HookOutcome, type HookResult } from './hooks.js';
import type { Delivery, FailureKind, NotifyEvent, RunFacts } from './notify.js';
import type { Profile } from './profiles.js';

/** A run that did not end within its deadline: a network failure (a stalled server is the usual cause). */
export class RunDeadlineError extends CofferNetworkError {
  constructor(profile: string, deadlineMs: number) {
    super(
      `the run of profile ${profile} did not finish within ${durationText(deadlineMs)} and was stopped ` +
        '(runTimeoutMinutes of the profile, or COFFER_RUN_TIMEOUT; raise it if a backup this large needs longer)',
    );
  }
}

const durationText = (ms: number) =>
  ms % 3_600_000 === 0 ? `${ms / 3_600_000} h` : ms % 60_000 === 0 ? `${ms / 60_000} min` : `${Math.round(ms / 1000)} s`;

/** What a run tells of a failure: the caller's words and exit code (hooks, outcome) and its kind (notifications). */
export interface RunFailure {
  message: string;
  exitCode: number;
  kind: FailureKind;
}

/** Runs a profile hook (./hooks.ts runHook, or a stand-in). */
export type HookRunner = (
  name: HookName,
  command: string,
  outcome: HookOutcome,
  options: { timeoutMs: number; signal?: AbortSignal },
) => Promise<HookResult>;

/** Sends a notification to the profile's targets (./notify.ts notify, or a stand-in). */
export type Notifier = (targets: Profile['notify'], event: NotifyEvent, facts: RunFacts, signal?: AbortSignal) => Promise<Delivery[]>;

export interface AgentRunInput {
  profileName: string;
  profile: Profile;
  client: CofferClient;
  stateDir: string;
  /** The client's own bound on the archive (COFFER_MAX_ARCHIVE_BYTES); undefined: the server's. */
  maxArchiveBytes: number | undefined;
  /** The OS user archived as the owner of this user's files (ClientConfig.ownerName); undefined: none. */
  ownerName?: string;
  /** The plan interval to assume when the API key may not read the account (--interval). */
  interval: BackupInterval | undefined;
  signal: AbortSignal;
  /**
   * The run's deadline (COFFER_RUN_TIMEOUT, else the profile's runTimeoutMinutes): past it, what the run is doing
   * stops and the run fails as a network failure (RunDeadlineError), with `onFailure` and the notifications.
   */
  deadlineMs: number;
  /**
   * What the backup is sealed to, asked when the backup starts: the recipient (throws for an unusable one: a failed
   * run), else null and the vault's master key (a secure buffer: the run wipes it).
   */
  recipient(): Recipient | null;
  masterKey(): Promise<Buffer>;
  runHook: HookRunner;
  notify: Notifier;
  explain(error: unknown): RunFailure;
  /** Warnings on the way (a hook's output, a failed notification, a backup the server no longer lists). */
  warn(text: string): void;
}

interface OutcomeBase {
  profile: string;
  /** When the next backup is due (null: now, or unknown). */
  nextDueAt: string | null;
  /** The account's interval, when known. */
  interval: BackupInterval | null;
}

export type RunOutcome =
  | (OutcomeBase & {
      outcome: 'success';
      backupId: string;
      status: string;
      fileCount: number;
      plaintextBytes: number;
      ciphertextBytes: number | null;
    })
  | (OutcomeBase & { outcome: 'skipped'; backupId: null; /** Why no backup was made. */ why: string })
  | (OutcomeBase & { outcome: 'failure'; backupId: string | null; message: string; error: unknown });

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
 * and notifications ran. Throws for what stops the run before it starts (a busy profile, interruption).
 */
export async function agentRun(input: AgentRunInput): Promise<RunOutcome> {
  const { profileName: name, profile, client, stateDir, signal, warn } = input;
  const release = await lockProfile(stateDir, name);
  // The run's work (the server's answers, `before`, the backup) stops at the deadline; what reports a failure
  // (`after`, `onFailure`, the notifications, the state file) runs after it under the CLI's signal only.
  const deadline = new AbortController();
  const deadlineTimer = setTimeout(() => deadline.abort(new RunDeadlineError(name, input.deadlineMs)), input.deadlineMs);
  const work = AbortSignal.any([signal, deadline.signal]);
  /** What stopped the work: past the deadline, whatever broke (an aborted request, a pipeline) is the deadline. */
  const cause = (error: unknown): unknown => (deadline.signal.aborted && !signal.aborted ? deadline.signal.reason : error);
  try {
    const now = Date.now();
    // What fails before the "is a backup due?" decision (the server unreachable, a revoked key, a 5xx, a damaged
    // state file) is a failed run like any other: on-failure hook, notification, run state, overdue check.
    let earlyFailure: unknown;
    const previous = await readRunState(stateDir, name).catch((error: unknown) => void (earlyFailure = error));
    const seen =
      earlyFailure === undefined ? await cadenceOf(client, work).catch((error: unknown) => void (earlyFailure = cause(error))) : undefined;
    if (signal.aborted && earlyFailure !== undefined) throw earlyFailure;
    // The host knows its chain's head: a key that may list sees at once when the server stops listing it.
    const head = seen ? await readChainHead(stateDir, name).catch(() => null) : null;
    if (seen && head && !seen.listed.has(head.backupId) && Date.parse(head.createdAt) + (seen.retentionMs ?? Infinity) > now) {
      warn(
        `warning: the server no longer lists this profile's last backup ${head.backupId} (#${head.seq} of its history chain), ` +
          'which has not expired: it was deleted, or the server hides it (check with coffer list --chain)',
      );
    }
    const interval: BackupInterval | null = seen?.interval ?? previous?.interval ?? input.interval ?? null;
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
      for (const delivery of await input.notify(profile.notify, event, facts(more), signal)) {
        if (!delivery.ok) warn(`warning: the ${event} notification to ${delivery.target} failed: ${delivery.detail}`);
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
      await writeRunState(stateDir, name, state);
      return outcome;
    };
    const skipped = (at: number | null, why: string): RunOutcome => ({
      outcome: 'skipped',
      profile: name,
      backupId: null,
      nextDueAt: isoOrNull(at),
      interval,
      why,
    });

    const timeoutMs = profile.hooks.timeoutSeconds * 1000;
    if (earlyFailure !== undefined) {
      const failure = input.explain(earlyFailure);
      if (profile.hooks.onFailure) {
        const result = await input.runHook(
          'on-failure',
          profile.hooks.onFailure,
          { outcome: 'failure', profile: name, error: failure.message },
          { timeoutMs, signal },
        );
        if (result.output) warn(`on-failure hook: ${result.output}`);
      }
      await send('failure', { failure: failure.kind, exitCode: failure.exitCode });
      return await finish({
        outcome: 'failure',
        profile: name,
        backupId: null,
        nextDueAt: null,
        interval,
        message: failure.message,
        error: earlyFailure,
      });
    }
    if (due !== null && due > now) {
      return await finish(
        skipped(due, intervalMs === null ? 'not due (as the server said at the last run)' : `not due (one backup per ${interval})`),
      );
    }

    // ---- due: hooks, notifications and the backup ----
    const hook = async (hookName: HookName, command: string | undefined, outcome: HookOutcome): Promise<string | null> => {
      if (!command) return null;
      const result = await input.runHook(hookName, command, outcome, { timeoutMs, signal: hookName === 'before' ? work : signal });
      if (result.output) warn(`${hookName} hook: ${result.output}`);
      return hookFailure(hookName, result, timeoutMs);
    };
    const started = Date.now();
    // Once `before` ran (and did not fail), `after` runs whatever happens next: what `before` stopped must start again.
    let afterDue = false;
    const after = (outcome: HookOutcome) => {
      afterDue = false;
      return hook('after', profile.hooks.after, outcome);
    };
    try {
      // Only once the server has opened the slot: a run it refuses (cadence, quota) pings nothing and stops nothing.
      const afterSlot = async () => {
        await send('start');
        const beforeFailed = await hook('before', profile.hooks.before, { outcome: 'pending', profile: name });
        if (beforeFailed) throw new HookError(beforeFailed);
        afterDue = true;
      };
      const result = await backupProfile({ ...input, signal: work }, afterSlot);
      clearTimeout(deadlineTimer);
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
        await hook('on-failure', profile.hooks.onFailure, {
          outcome: 'failure',
          profile: name,
          backupId: result.detail.id,
          error: error.message,
        });
        await send('failure', { backupId: result.detail.id, failure: 'hook', exitCode: input.explain(error).exitCode });
        return await finish({
          outcome: 'failure',
          profile: name,
          backupId: result.detail.id,
          nextDueAt: isoOrNull(next),
          interval,
          message: error.message,
          error,
        });
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
        status: result.detail.status,
        fileCount: result.metadata.fileCount,
        plaintextBytes: result.metadata.plaintextSizeBytes,
        ciphertextBytes: result.detail.ciphertextSizeBytes,
      });
    } catch (thrown) {
      if (signal.aborted) throw thrown;
      const error = cause(thrown);
      if (error instanceof CofferApiError && error.status === 429) {
        // The server's clock, or a backup this host could not see, says not yet: nothing was opened, no hook ran.
        const at = retryAt(error, Date.now());
        return await finish(skipped(at, 'not due (the server refused: cadence)'));
      }
      const failure = input.explain(error);
      if (afterDue) await after({ outcome: 'failure', profile: name, error: failure.message });
      await hook('on-failure', profile.hooks.onFailure, { outcome: 'failure', profile: name, error: failure.message });
      await send('failure', {
        failure: failure.kind,
        exitCode: failure.exitCode,
        durationSeconds: Math.round((Date.now() - started) / 1000),
      });
      return await finish({
        outcome: 'failure',
        profile: name,
        backupId: null,
        nextDueAt: null,
        interval,
        message: failure.message,
        error,
      });
    } finally {
      // Interrupted, or a failure in the failure handling itself: still `after`, without the (aborted) run's signal.
      if (afterDue && profile.hooks.after) {
        await input
          .runHook(
            'after',
            profile.hooks.after,
            { outcome: 'failure', profile: name, error: 'the run stopped before it finished' },
            { timeoutMs },
          )
          .catch(() => undefined);
      }
    }
  } finally {
    clearTimeout(deadlineTimer);
    release();
  }
}

/** The backup of a profile: its paths, sealed to its recipient (else with the passphrase), linked into its chain. */
async function backupProfile(input: AgentRunInput, afterSlot: () => Promise<void>): Promise<BackupResult> {
  const { profile, client, signal } = input;
  for (const source of profile.paths) {
    await fsp.lstat(source).catch((error: unknown) => {
      throw new SourceReadError(`cannot back up ${source}: ${fsReason(error)}`, source);
    });
  }
  const recipient = input.recipient();
  let masterKey: Buffer | undefined;
  if (recipient) await requireSealableVault(client, signal);
  else masterKey = await input.masterKey();
  try {
    const chain = await chainForProfile(input.stateDir, input.profileName);
    const result = await runBackup({
      client,
      ...(recipient ? { recipient } : { masterKey }),
      sources: profile.paths,
      exclude: profile.excludes,
      name: profile.name,
      maxArchiveBytes: input.maxArchiveBytes,
      ownerName: input.ownerName,
      chain: chain.link,
      signal,
      afterSlot,
    });
    const skewWarning = await chain.record(result);
    if (skewWarning) input.warn(skewWarning);
    return result;
  } finally {
    wipe(masterKey);
  }
}
