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
import { randomInt } from 'node:crypto';
import { VERSION } from '../../lib/version.js';
import { drillNeedsRead, serverRecordsNoDrills } from '../error-texts.js';
import { drillBackups, drillChoice, drillLine, type DrillReport, NO_DRILL_ROUTE } from './drill.js';
import { drillDue, INTERVAL_MS, isOverdue, lockProfile, nextDueAt, readRunState, type RunState, writeRunState } from './agent-state.js';
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
  /** The profile's restore drill, when one was due in this run. */
  drill?: RunDrill;
}

/** A due restore drill as the run reports it: each backup drilled, or why none could be. */
export type RunDrill =
  { ran: true; backups: { backupId: string; result: DrillReport['result']; recorded: boolean }[] } | { ran: false; why: string };

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

/** What a run knows before it decides whether a backup is due (planRun). */
interface RunPlan {
  now: number;
  previous: RunState | null | undefined;
  /** What fails before the decision (the server unreachable, a revoked key, a 5xx, a damaged state file). */
  earlyFailure: unknown;
  interval: BackupInterval | null;
  intervalMs: number | null;
  lastSuccess: number | null;
  due: number | null;
}

/**
 * One agent run. Never throws for the backup's own failure: the outcome says it (with `error`), after the hooks
 * and notifications ran. Throws for what stops the run before it starts (a busy profile, interruption).
 */
export async function agentRun(input: AgentRunInput): Promise<RunOutcome> {
  const { profileName: name, stateDir, signal } = input;
  const release = await lockProfile(stateDir, name);
  // The run's work (the server's answers, `before`, the backup) stops at the deadline; what reports a failure
  // (`after`, `onFailure`, the notifications, the state file) runs after it under the CLI's signal only.
  const deadline = new AbortController();
  const deadlineTimer = setTimeout(() => deadline.abort(new RunDeadlineError(name, input.deadlineMs)), input.deadlineMs);
  const work = AbortSignal.any([signal, deadline.signal]);
  /** What stopped the work: past the deadline, whatever broke (an aborted request, a pipeline) is the deadline. */
  const cause = (error: unknown): unknown => (deadline.signal.aborted && !signal.aborted ? deadline.signal.reason : error);
  try {
    const plan = await planRun(input, work, cause);
    const run = new AgentRun(input, plan, work, cause, () => clearTimeout(deadlineTimer));
    if (plan.earlyFailure !== undefined) return await run.failEarly(plan.earlyFailure);
    let outcome: RunOutcome;
    if (plan.due !== null && plan.due > plan.now) {
      outcome = await run.finish(
        run.skipped(
          plan.due,
          plan.intervalMs === null ? 'not due (as the server said at the last run)' : `not due (one backup per ${plan.interval})`,
        ),
      );
    } else outcome = await run.backUp();
    // The profile's restore drill, when due (whatever became of the backup: the older backups are still there).
    const drill = await run.drillIfDue();
    return drill === undefined ? outcome : { ...outcome, drill };
  } finally {
    clearTimeout(deadlineTimer);
    release();
  }
}

/** The run state, the server's cadence and the chain's head: whether (and when) a backup is due. */
async function planRun(input: AgentRunInput, work: AbortSignal, cause: (error: unknown) => unknown): Promise<RunPlan> {
  const { profileName: name, client, stateDir, signal, warn } = input;
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
  return { now, previous, earlyFailure, interval, intervalMs, lastSuccess, due };
}

/** One run once planned: its state, hooks, notifications, and the backup when it is due. */
class AgentRun {
  readonly state: RunState;
  private readonly name: string;
  private readonly profile: Profile;
  private readonly timeoutMs: number;
  /** Once `before` ran (and did not fail), `after` runs whatever happens next: what `before` stopped must start again. */
  private afterDue = false;

  constructor(
    private readonly input: AgentRunInput,
    private readonly plan: RunPlan,
    private readonly work: AbortSignal,
    private readonly cause: (error: unknown) => unknown,
    private readonly stopDeadline: () => void,
  ) {
    const { now, previous, interval, due } = plan;
    this.name = input.profileName;
    this.profile = input.profile;
    this.timeoutMs = input.profile.hooks.timeoutSeconds * 1000;
    this.state = {
      version: 1,
      interval,
      firstRunAt: previous?.firstRunAt ?? iso(now),
      lastRunAt: iso(now),
      lastOutcome: 'skipped',
      lastSuccessAt: previous?.lastSuccessAt ?? null,
      lastBackupId: previous?.lastBackupId ?? null,
      nextDueAt: isoOrNull(due),
      overdueNotifiedAt: previous?.overdueNotifiedAt ?? null,
      lastDrillAt: previous?.lastDrillAt ?? null,
    };
  }

  private facts(more: Partial<RunFacts> = {}): RunFacts {
    return { profile: this.name, lastSuccessAt: this.state.lastSuccessAt, nextDueAt: this.state.nextDueAt, ...more };
  }

  private async send(event: NotifyEvent, more: Partial<RunFacts> = {}): Promise<void> {
    for (const delivery of await this.input.notify(this.profile.notify, event, this.facts(more), this.input.signal)) {
      if (!delivery.ok) this.input.warn(`warning: the ${event} notification to ${delivery.target} failed: ${delivery.detail}`);
    }
  }

  private async checkOverdue(): Promise<void> {
    const { intervalMs, lastSuccess } = this.plan;
    if (intervalMs === null || this.state.overdueNotifiedAt !== null) return;
    if (!isOverdue(lastSuccess, Date.parse(this.state.firstRunAt), intervalMs, Date.now())) return;
    await this.send('overdue');
    this.state.overdueNotifiedAt = new Date().toISOString();
  }

  async finish(outcome: RunOutcome): Promise<RunOutcome> {
    this.state.lastOutcome = outcome.outcome;
    this.state.nextDueAt = outcome.nextDueAt;
    if (outcome.outcome !== 'success') await this.checkOverdue();
    await writeRunState(this.input.stateDir, this.name, this.state);
    return outcome;
  }

  skipped(at: number | null, why: string): RunOutcome {
    return { outcome: 'skipped', profile: this.name, backupId: null, nextDueAt: isoOrNull(at), interval: this.plan.interval, why };
  }

  /**
   * The profile's restore drill when its `drill` setting says one is due (docs/client.md#restore-drills): the newest
   * READY backup and a random older one, verified whole and recorded at the server as attestations. A failed drill
   * is notified; a drill that could not run (no passphrase, a key that may not read, the network) is a warning and
   * is tried again at the next run.
   */
  async drillIfDue(): Promise<RunDrill | undefined> {
    const setting = this.profile.drill;
    if (setting === 'off' || this.work.aborted || !drillDue(setting, this.state.lastDrillAt, Date.now())) return undefined;
    const { client, warn } = this.input;
    const notRun = (why: string): RunDrill => {
      warn(`restore drill of profile ${this.name} not run: ${why}`);
      return { ran: false, why };
    };
    const words = (error: unknown) =>
      error instanceof CofferApiError && error.code === 'insufficient_scope' ? drillNeedsRead() : this.input.explain(error).message;
    let accountId: string | undefined;
    let targets: string[];
    try {
      accountId = (await client.readAccount(this.work)).accountId;
      targets = drillChoice((await client.listBackups(this.work)).backups, randomInt);
    } catch (error) {
      if (this.input.signal.aborted) throw error;
      return notRun(words(error));
    }
    if (targets.length === 0) return undefined; // no READY backup yet: the first drill comes once there is one
    if (accountId === undefined) return notRun(serverRecordsNoDrills(VERSION, 'nothing was checked'));
    let material: Buffer;
    try {
      material = await this.input.masterKey();
    } catch (error) {
      if (this.input.signal.aborted) throw error;
      return notRun(words(error));
    }
    let drilled;
    try {
      drilled = await drillBackups(
        targets.map((backupId) => ({ backupId, accountId })),
        { client, material, signal: this.work, explain: (error) => words(error), onReport: (report) => warn(drillLine(report)) },
      );
    } finally {
      wipe(material);
    }
    if (!drilled.serverRecords) warn(serverRecordsNoDrills(VERSION, 'the backups were checked'));
    // Done once every backup was checked and its result recorded (or the server keeps no record): else tried again.
    if (drilled.reports.every((r) => r.result !== 'not-run' && (r.recorded || r.notRecorded === NO_DRILL_ROUTE))) {
      this.state.lastDrillAt = new Date().toISOString();
    }
    for (const report of drilled.reports.filter((r) => r.result === 'failed')) {
      await this.send('drill-failed', { backupId: report.backupId, failure: 'integrity' });
    }
    await writeRunState(this.input.stateDir, this.name, this.state);
    return { ran: true, backups: drilled.reports.map(({ backupId, result, recorded }) => ({ backupId, result, recorded })) };
  }

  /** A run that failed before the decision: the on-failure hook, the notification, the state. */
  async failEarly(earlyFailure: unknown): Promise<RunOutcome> {
    const failure = this.input.explain(earlyFailure);
    if (this.profile.hooks.onFailure) {
      const result = await this.input.runHook(
        'on-failure',
        this.profile.hooks.onFailure,
        { outcome: 'failure', profile: this.name, error: failure.message },
        { timeoutMs: this.timeoutMs, signal: this.input.signal },
      );
      if (result.output) this.input.warn(`on-failure hook: ${result.output}`);
    }
    await this.send('failure', { failure: failure.kind, exitCode: failure.exitCode });
    return await this.finish({
      outcome: 'failure',
      profile: this.name,
      backupId: null,
      nextDueAt: null,
      interval: this.plan.interval,
      message: failure.message,
      error: earlyFailure,
    });
  }

  private async hook(hookName: HookName, command: string | undefined, outcome: HookOutcome): Promise<string | null> {
    if (!command) return null;
    const signal = hookName === 'before' ? this.work : this.input.signal;
    const result = await this.input.runHook(hookName, command, outcome, { timeoutMs: this.timeoutMs, signal });
    if (result.output) this.input.warn(`${hookName} hook: ${result.output}`);
    return hookFailure(hookName, result, this.timeoutMs);
  }

  private after(outcome: HookOutcome): Promise<string | null> {
    this.afterDue = false;
    return this.hook('after', this.profile.hooks.after, outcome);
  }

  /** Due: hooks, notifications and the backup. */
  async backUp(): Promise<RunOutcome> {
    const { profile, name } = this;
    const started = Date.now();
    try {
      // Only once the server has opened the slot: a run it refuses (cadence, quota) pings nothing and stops nothing.
      const afterSlot = async () => {
        await this.send('start');
        const beforeFailed = await this.hook('before', profile.hooks.before, { outcome: 'pending', profile: name });
        if (beforeFailed) throw new HookError(beforeFailed);
        this.afterDue = true;
      };
      const result = await backupProfile({ ...this.input, signal: this.work }, afterSlot);
      this.stopDeadline();
      return await this.succeeded(result, started);
    } catch (thrown) {
      if (this.input.signal.aborted) throw thrown;
      return await this.failed(this.cause(thrown), started);
    } finally {
      // Interrupted, or a failure in the failure handling itself: still `after`, without the (aborted) run's signal.
      if (this.afterDue && profile.hooks.after) {
        await this.input
          .runHook(
            'after',
            profile.hooks.after,
            { outcome: 'failure', profile: name, error: 'the run stopped before it finished' },
            { timeoutMs: this.timeoutMs },
          )
          .catch(() => undefined);
      }
    }
  }

  /** The backup is READY: `after`, then the success (or, when `after` failed, the failure) reported. */
  private async succeeded(result: BackupResult, started: number): Promise<RunOutcome> {
    const { profile, name, state } = this;
    const { intervalMs, interval } = this.plan;
    state.lastSuccessAt = result.detail.createdAt;
    state.lastBackupId = result.detail.id;
    state.overdueNotifiedAt = null;
    const next = intervalMs === null ? null : Date.parse(result.detail.createdAt) + intervalMs;
    const afterFailed = await this.after({
      outcome: 'success',
      profile: name,
      backupId: result.detail.id,
      nextDueAt: isoOrNull(next) ?? undefined,
    });
    if (afterFailed) {
      // The backup is READY; the run still failed (what the before hook stopped may not be running again).
      const error = new HookError(`backup ${result.detail.id} is READY, but ${afterFailed}`);
      await this.hook('on-failure', profile.hooks.onFailure, {
        outcome: 'failure',
        profile: name,
        backupId: result.detail.id,
        error: error.message,
      });
      await this.send('failure', { backupId: result.detail.id, failure: 'hook', exitCode: this.input.explain(error).exitCode });
      return await this.finish({
        outcome: 'failure',
        profile: name,
        backupId: result.detail.id,
        nextDueAt: isoOrNull(next),
        interval,
        message: error.message,
        error,
      });
    }
    await this.send('success', {
      backupId: result.detail.id,
      fileCount: result.metadata.fileCount,
      plaintextBytes: result.metadata.plaintextSizeBytes,
      ciphertextBytes: result.detail.ciphertextSizeBytes ?? undefined,
      durationSeconds: Math.round((Date.now() - started) / 1000),
      nextDueAt: isoOrNull(next),
    });
    return await this.finish({
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
  }

  /** The backup failed (`error`, the deadline's when it passed): a cadence refusal is a skip, else the failure reported. */
  private async failed(error: unknown, started: number): Promise<RunOutcome> {
    const { profile, name } = this;
    if (error instanceof CofferApiError && error.status === 429) {
      // The server's clock, or a backup this host could not see, says not yet: nothing was opened, no hook ran.
      const at = retryAt(error, Date.now());
      return await this.finish(this.skipped(at, 'not due (the server refused: cadence)'));
    }
    const failure = this.input.explain(error);
    if (this.afterDue) await this.after({ outcome: 'failure', profile: name, error: failure.message });
    await this.hook('on-failure', profile.hooks.onFailure, { outcome: 'failure', profile: name, error: failure.message });
    await this.send('failure', {
      failure: failure.kind,
      exitCode: failure.exitCode,
      durationSeconds: Math.round((Date.now() - started) / 1000),
    });
    return await this.finish({
      outcome: 'failure',
      profile: name,
      backupId: null,
      nextDueAt: null,
      interval: this.plan.interval,
      message: failure.message,
      error,
    });
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
