/**
 * `coffer agent [--profile p]`: `coffer run` in a loop, in the foreground, for hosts without systemd (containers).
 * Between runs it sleeps until the next backup is due, looking at least every quarter interval. A failed run is
 * reported (and notified) and the loop goes on; SIGINT/SIGTERM end it like any command (exit 130, an open upload
 * slot deleted first).
 */
import type { Command } from 'commander';
import { setTimeout as sleep } from 'node:timers/promises';
import { checkEveryMs, INTERVAL_MS } from '../agent/agent-state.js';
import { action, PASSPHRASE_FILE_OPTION, requireProfile } from '../command-frame.js';
import { localTime } from '../format.js';
import { note, print, printJson } from '../output.js';
import { INTERVAL_OPTION, runProfile, type RunOptions, shownOutcome } from './run.js';

/** Without a known interval the agent looks this often (a 429 or the next run teaches it the interval). */
const DEFAULT_CHECK_MS = 15 * 60_000;

/** The floor between two runs of the loop. */
const MIN_WAIT_MS = 60_000;

export function registerAgent(program: Command): void {
  program
    .command('agent')
    .description('run `coffer run` for a profile in a loop in the foreground (containers, hosts without systemd)')
    .option(...PASSPHRASE_FILE_OPTION)
    .option(...INTERVAL_OPTION)
    .option('--json', "print each run's outcome as one JSON line")
    .action(
      action(async (context, options: RunOptions) => {
        const { name } = requireProfile(context.profile, 'coffer agent');
        note(`coffer agent: profile ${name}; stop with Ctrl-C or SIGTERM`);
        for (;;) {
          const outcome = await runProfile(context, options);
          const shown = shownOutcome(outcome);
          if (options.json) printJson(shown);
          else print(`${new Date().toISOString()} ${outcome.outcome}: ${shown.message}`);
          const checkMs = outcome.interval ? checkEveryMs(INTERVAL_MS[outcome.interval]) : DEFAULT_CHECK_MS;
          const dueIn = outcome.nextDueAt ? Date.parse(outcome.nextDueAt) - Date.now() : checkMs;
          // Wake at the due time (a few seconds after, so the server's clock agrees), never later than checkMs.
          // Never sooner than a minute: a refusal naming a time already past (a hostile server, a clock ahead of the
          // server's) must not rerun the hooks every second.
          const waitMs = Math.max(MIN_WAIT_MS, Math.min(checkMs, Number.isFinite(dueIn) ? dueIn + 5000 : checkMs));
          if (!options.json) note(`next look ${localTime(new Date(Date.now() + waitMs))}`);
          await sleep(waitMs, undefined, { signal: context.signal });
        }
      }),
    );
}
