/**
 * `coffer run [--profile p]`: one agent run of a profile (docs/client.md#coffer-run). If the plan's cadence allows a
 * backup, make one (hooks around it, notifications, the history chain); if not, exit 0 saying when the next one is
 * due, without opening a slot. `coffer agent` and the systemd timer of `coffer schedule` run exactly this.
 */
import { plural } from '../../domain/words.js';
import type { Command } from 'commander';
import { isInterval } from '../agent/agent-state.js';
import { agentRun, type RunFailure, type RunOutcome } from '../agent/agent.js';
import {
  ArchiveTooLargeError,
  CofferApiError,
  CofferNetworkError,
  HostWithoutVaultError,
  IntegrityError,
  SourceReadError,
} from '../../client/index.js';
import { HookError, runHook } from '../agent/hooks.js';
import { type FailureKind, notify } from '../agent/notify.js';
import { ProfileError } from '../agent/profiles.js';
import type { BackupInterval } from '../../domain/plans.js';
import { ConfigError, inheritedEnvironment } from '../../config.js';
import {
  action,
  clientFor,
  type CommandContext,
  PASSPHRASE_FILE_OPTION,
  type PassphraseOptions,
  recipientFor,
  requireProfile,
} from '../command-frame.js';
import { unlock } from '../secrets.js';
import { bytes, duration, localTime } from '../format.js';
import { toCliError } from '../failures.js';
import { CliError, EXIT, note, print, printJson, usageError } from '../output.js';

export type RunOptions = PassphraseOptions & { interval?: string };

/** What a failure is, as the category a notification may carry (never its message: that can name files). */
function failureKind(error: unknown): FailureKind {
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

/** A failed run in this CLI's words and exit code (docs/client.md#exit-codes). */
function explainFailure(error: unknown): RunFailure {
  const { message, exitCode } = toCliError(error, false);
  return { message, exitCode, kind: failureKind(error) };
}

/** The --interval option, checked. */
function intervalOption(option: string | undefined): BackupInterval | undefined {
  if (option !== undefined && !isInterval(option)) throw usageError(`--interval must be one of 30m, 4h, 1d, got "${option}"`);
  return option;
}

/**
 * One agent run of the command's profile (src/cli/agent/agent.ts), with the hooks, the notifications and the keys of
 * this CLI. Throws for what stops the run before it starts (no profile, a busy profile, interruption).
 */
export async function runProfile(context: CommandContext, options: RunOptions): Promise<RunOutcome> {
  const { signal, config } = context;
  const { name, profile } = requireProfile(context.profile, 'coffer run');
  const interval = intervalOption(options.interval);
  const client = clientFor(config);
  const inherited = inheritedEnvironment();
  return agentRun({
    profileName: name,
    profile,
    client,
    stateDir: config.stateDir,
    maxArchiveBytes: config.maxArchiveBytes ?? undefined,
    ownerName: config.ownerName,
    interval,
    signal,
    deadlineMs: config.runTimeoutMs ?? profile.runTimeoutMinutes * 60_000,
    recipient: () => recipientFor(undefined, config),
    masterKey: async () => (await unlock(client, config, options, signal)).masterKey,
    runHook: (hook, command, outcome, hookOptions) => runHook(hook, command, outcome, { ...hookOptions, inherited }),
    notify,
    explain: explainFailure,
    warn: note,
  });
}

/** A run's outcome as `coffer run` and `coffer agent` show it (--json: this object). */
export function shownOutcome(outcome: RunOutcome) {
  const { profile, backupId, nextDueAt, interval, drill } = outcome;
  // `drill` is undefined when none was due: JSON.stringify leaves it out.
  return { outcome: outcome.outcome, profile, backupId, nextDueAt, interval, message: outcomeMessage(outcome), drill };
}

function outcomeMessage(outcome: RunOutcome): string {
  switch (outcome.outcome) {
    case 'success':
      return (
        `backup ${outcome.backupId} ${outcome.status}: ${plural(outcome.fileCount, 'file')}, ${bytes(outcome.plaintextBytes)} archived, ` +
        `${bytes(outcome.ciphertextBytes)} encrypted`
      );
    case 'skipped': {
      if (outcome.nextDueAt === null) return outcome.why;
      const at = Date.parse(outcome.nextDueAt);
      return `${outcome.why}: the next backup is due ${localTime(new Date(at))} (in ${duration((at - Date.now()) / 1000)})`;
    }
    case 'failure':
      return outcome.message;
  }
}

export const INTERVAL_OPTION = [
  '--interval <interval>',
  'the plan interval (30m, 4h, 1d) when the API key may not read the account',
] as const;

export function registerRun(program: Command): void {
  program
    .command('run')
    .description("one agent run of a profile: back up if the plan's cadence allows (hooks, notifications, history chain), else say when")
    .option(...PASSPHRASE_FILE_OPTION)
    .option(...INTERVAL_OPTION)
    .option('--json', 'print the outcome as JSON ({"outcome", "profile", "backupId", "nextDueAt", "interval", "message", "drill"?})')
    .action(
      action(async (context, options: RunOptions) => {
        const outcome = await runProfile(context, options);
        const shown = shownOutcome(outcome);
        if (options.json) printJson(shown);
        else if (outcome.outcome !== 'failure') print(shown.message);
        if (outcome.outcome === 'failure') throw toCliError(outcome.error, false);
      }),
    );
}
