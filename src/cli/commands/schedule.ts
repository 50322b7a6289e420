/**
 * `coffer schedule install|status|remove [--profile p]`: a systemd user service and timer that run `coffer run`
 * for a profile (or, with `--cron`, the crontab line that does the same). docs/client.md#coffer-schedule.
 */
import { execFile } from 'node:child_process';
import type { Command } from 'commander';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { checkEveryMs, INTERVAL_MS, isInterval, readRunState, type RunState } from '../agent/agent-state.js';
import {
  checkScheduleSpec,
  cronEveryMs,
  cronLine,
  type ScheduleSpec,
  ScheduleValueError,
  serviceUnit,
  timerUnit,
  unitName,
} from '../agent/schedule.js';
import { CofferApiError } from '../../client/index.js';
import type { BackupInterval } from '../../domain/plans.js';
import { action, clientFor, type CommandContext, requireProfile, type SelectedProfile } from '../command-frame.js';
import { duration, localTime } from '../format.js';
import { CliError, note, print, printJson, usageError } from '../output.js';
import { HOST_ADVICE } from './profile.js';
import { INTERVAL_OPTION } from './run.js';

interface InstallOptions {
  interval?: string;
  cron?: boolean;
  enable: boolean;
  passphraseFile?: string;
  json?: boolean;
}

/** `$XDG_CONFIG_HOME/systemd/user`: the config directory's sibling. */
const unitDir = (configDir: string) => path.join(path.dirname(configDir), 'systemd', 'user');

/** Said instead of systemctl's own words when there is no systemd user session (a container, a plain su). */
const NO_SYSTEMD =
  'no systemd user session here (systemctl --user cannot reach one; common in containers): ' +
  'schedule with a crontab line (`coffer schedule install --cron`) or keep `coffer agent` running instead';

/** Whether systemctl's failure means that there is no user manager to talk to at all. */
const noUserSystemd = (output: string) =>
  /Failed to connect to bus|No medium found|System has not been booted with systemd|\$DBUS_SESSION_BUS_ADDRESS|XDG_RUNTIME_DIR|ENOENT/i.test(
    output,
  );

function systemctl(args: string[]): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) => {
    execFile('systemctl', ['--user', ...args], { timeout: 30_000, encoding: 'utf8' }, (error, stdout, stderr) => {
      resolve({ ok: !error, output: `${stdout}${stderr}`.trim() || (error?.message ?? '') });
    });
  });
}

/**
 * The plan's interval: --interval, else the account's. A key that may not read the account (a write-only host key)
 * gets the interval its last run saw, else the shortest: `coffer run` asks the server before it does anything, and
 * once told when the next backup is allowed it waits for that time without asking, so frequent runs cost nothing.
 */
async function intervalOf(context: CommandContext, name: string, option: string | undefined): Promise<BackupInterval> {
  if (option !== undefined) {
    if (!isInterval(option)) throw usageError(`--interval must be one of 30m, 4h, 1d, got "${option}"`);
    return option;
  }
  try {
    return (await clientFor(context.config).getAccount(context.signal)).backupInterval;
  } catch (error) {
    if (!(error instanceof CofferApiError && error.code === 'insufficient_scope')) throw error;
    const seen = (await readRunState(context.config.stateDir, name))?.interval ?? null;
    const interval = seen ?? '30m';
    note(
      `this API key may not read the account's plan: the timer uses ${seen ? `the interval its last run saw (${seen})` : 'the shortest interval (30m)'}; ` +
        "each run asks the server first and backs up only when due (--interval 30m|4h|1d sets the plan's own)",
    );
    return interval;
  }
}

/** What the units run: this node and this coffer, with the profile (and a passphrase file when there is no recipient). */
function specFor(
  context: CommandContext,
  { name, profile }: SelectedProfile,
  interval: BackupInterval,
  passphraseFile: string | undefined,
): ScheduleSpec {
  const script = fs.realpathSync(process.argv[1]!);
  const argv = [process.execPath, script, 'run', '--profile', name];
  if (passphraseFile !== undefined) argv.push('--passphrase-file', path.resolve(passphraseFile));
  const environment: Record<string, string> = {};
  if (context.config.xdgConfigHome !== null) environment.XDG_CONFIG_HOME = context.config.xdgConfigHome;
  if (context.config.xdgStateHome !== null) environment.XDG_STATE_HOME = context.config.xdgStateHome;
  return {
    profile: name,
    interval,
    intervalMs: INTERVAL_MS[interval],
    argv,
    environment,
    // The units' runs read the same settings file, not this shell's COFFER_RUN_TIMEOUT: the profile's deadline.
    runTimeoutMs: profile.runTimeoutMinutes * 60_000,
    hookTimeoutMs: profile.hooks.timeoutSeconds * 1000,
  };
}

/**
 * When the next backup is due, as far as this host can tell: the run state's time; else the last backup plus the
 * plan's interval; else "now" only when no backup was ever made. A write-only host key cannot read the plan, so
 * after a backup its state may hold no time: the next run asks the server, which is not "now".
 */
function nextDue(state: RunState | null): { at: string | null; why: string } {
  if (state?.nextDueAt) return { at: state.nextDueAt, why: '' };
  if (state?.lastSuccessAt && state.interval) {
    return { at: new Date(Date.parse(state.lastSuccessAt) + INTERVAL_MS[state.interval]).toISOString(), why: '' };
  }
  if (state?.lastSuccessAt) {
    return {
      at: null,
      why: "not known here (this API key may not read the plan's interval): each run asks the server and backs up when it allows",
    };
  }
  return { at: null, why: 'now (no backup yet)' };
}

/** Where `schedule install --cron` keeps the line it printed, so that status can show it (nothing else is written). */
const cronRecordFile = (stateDir: string, profile: string) => path.join(stateDir, 'schedules', `${profile}.cron.json`);

async function recordCronLine(stateDir: string, profile: string, line: string): Promise<void> {
  const file = cronRecordFile(stateDir, profile);
  await fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${process.pid}.tmp`;
  await fsp.writeFile(temp, `${JSON.stringify({ line, printedAt: new Date().toISOString() }, null, 2)}\n`, { mode: 0o600 });
  await fsp.rename(temp, file);
}

/** The user's crontab (`crontab -l`), or null where there is no crontab command or it cannot be read. */
function readCrontab(): Promise<string | null> {
  return new Promise((resolve) => {
    execFile('crontab', ['-l'], { timeout: 10_000, encoding: 'utf8' }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout);
      // "no crontab for <user>": an empty one.
      resolve(/no crontab for/i.test(stderr) ? '' : null);
    });
  });
}

/** The cron line printed for the profile, and whether the crontab holds it (null: cannot tell). */
async function cronStatus(
  stateDir: string,
  profile: string,
): Promise<{ line: string; printedAt: string; inCrontab: boolean | null } | null> {
  let record: { line?: unknown; printedAt?: unknown };
  try {
    record = JSON.parse(await fsp.readFile(cronRecordFile(stateDir, profile), 'utf8')) as typeof record;
  } catch {
    return null;
  }
  if (typeof record.line !== 'string' || typeof record.printedAt !== 'string') return null;
  const crontab = await readCrontab();
  const command = record.line.replace(/^(\S+\s+){5}/, '');
  return { line: record.line, printedAt: record.printedAt, inCrontab: crontab === null ? null : crontab.includes(command) };
}

export function registerSchedule(program: Command): void {
  const schedule = program.command('schedule').description('run a profile on a timer: a systemd user service + timer, or a crontab line');
  registerScheduleInstall(schedule);
  registerScheduleStatus(schedule);
  registerScheduleRemove(schedule);
}

/** `coffer schedule install`. */
function registerScheduleInstall(schedule: Command): void {
  schedule
    .command('install')
    .description("write a systemd user service and timer that run `coffer run` every quarter of the plan's interval, and start the timer")
    .option(...INTERVAL_OPTION)
    .option('--passphrase-file <file>', 'for a profile without a recipient: the runs read the passphrase from this file')
    .option('--cron', 'print a crontab line instead (nothing is written)')
    .option('--no-enable', 'only write the unit files (do not run systemctl)')
    .option('--json', 'print {"service", "timer", "files"} or {"cron"}')
    .action(
      action(async (context, options: InstallOptions) => {
        const { name, profile } = requireProfile(context.profile, 'coffer schedule install');
        if (!profile.recipient && options.passphraseFile === undefined) {
          throw usageError(
            `profile ${name} has no recipient, so a scheduled run needs the passphrase: pass --passphrase-file <file> (mode 0600), ` +
              'or better, give the profile a recipient (coffer profile add … --recipient, from `coffer recipient`)',
          );
        }
        const interval = await intervalOf(context, name, options.interval);
        const spec = specFor(context, { name, profile }, interval, options.passphraseFile);
        try {
          checkScheduleSpec(spec); // before anything is written
        } catch (error) {
          if (error instanceof ScheduleValueError) throw usageError(`${error.message}; nothing was written`);
          throw error;
        }
        if (options.cron) {
          const line = cronLine(spec);
          await recordCronLine(context.config.stateDir, name, line);
          if (!profile.recipient) note(HOST_ADVICE);
          if (options.json) return printJson({ cron: line });
          print(line);
          return note(
            `add it with \`crontab -e\`; it looks every ${duration(cronEveryMs(spec.intervalMs) / 1000)} whether a backup is due`,
          );
        }
        const dir = unitDir(context.config.configDir);
        const unit = unitName(name);
        const files = { service: path.join(dir, `${unit}.service`), timer: path.join(dir, `${unit}.timer`) };
        await fsp.mkdir(dir, { recursive: true });
        // What was there before, to put back when systemctl fails: a failed install leaves no unit behind.
        const before = new Map(Object.values(files).map((file) => [file, fs.existsSync(file) ? fs.readFileSync(file) : null]));
        await fsp.writeFile(files.service, serviceUnit(spec));
        await fsp.writeFile(files.timer, timerUnit(spec));
        if (options.enable) {
          for (const args of [['daemon-reload'], ['enable', '--now', `${unit}.timer`]]) {
            const result = await systemctl(args);
            if (!result.ok) {
              for (const [file, content] of before) {
                if (content === null) await fsp.rm(file, { force: true });
                else await fsp.writeFile(file, content);
              }
              throw new CliError(
                noUserSystemd(result.output)
                  ? `${NO_SYSTEMD}; nothing was installed.`
                  : `\`systemctl --user ${args.join(' ')}\` failed: ${result.output}; the unit files were not kept. ` +
                      'Without a systemd user session, use `coffer schedule install --cron` or `coffer agent`.',
              );
            }
          }
        }
        if (!profile.recipient) note(HOST_ADVICE);
        if (options.json) return printJson({ service: serviceUnit(spec), timer: timerUnit(spec), files, enabled: options.enable });
        print(`wrote ${files.service}\nwrote ${files.timer}`);
        print(
          options.enable
            ? `timer ${unit}.timer started: it looks every ${duration(checkEveryMs(spec.intervalMs) / 1000)} whether a backup is due (plan interval ${interval})`
            : `start it with: systemctl --user daemon-reload && systemctl --user enable --now ${unit}.timer`,
        );
        note('user timers run only while you are logged in, unless: loginctl enable-linger "$(id -un)"');
      }),
    );
}

/** `coffer schedule status`. */
function registerScheduleStatus(schedule: Command): void {
  schedule
    .command('status')
    .description("the profile's units, timer state and last run")
    .option('--json', 'print {"profile", "files", "timer", "lastRun"}')
    .action(
      action(async (context, options: { json?: boolean }) => {
        const { name } = requireProfile(context.profile, 'coffer schedule status');
        const dir = unitDir(context.config.configDir);
        const unit = unitName(name);
        const files = { service: path.join(dir, `${unit}.service`), timer: path.join(dir, `${unit}.timer`) };
        const installed = fs.existsSync(files.service) && fs.existsSync(files.timer);
        const active = installed ? await systemctl(['is-active', `${unit}.timer`]) : { ok: false, output: 'not installed' };
        const state = await readRunState(context.config.stateDir, name);
        const cron = await cronStatus(context.config.stateDir, name);
        const next = nextDue(state);
        if (options.json) {
          const timer = installed && !active.ok && noUserSystemd(active.output) ? 'no-systemd' : (active.output.split('\n')[0] ?? '');
          return printJson({ profile: name, installed, files, timer, cron, lastRun: state, nextDue: next });
        }
        print(`profile:    ${name}`);
        const units = installed
          ? `${files.service}, ${files.timer}`
          : cron
            ? 'none (a crontab line instead, below)'
            : 'not installed (coffer schedule install)';
        print(`units:      ${units}`);
        if (installed || !cron) {
          print(
            `timer:      ${installed && !active.ok && noUserSystemd(active.output) ? NO_SYSTEMD : active.output.split('\n')[0] || '-'}`,
          );
        }
        if (cron) {
          print(`cron:       ${cron.line}`);
          const where =
            cron.inCrontab === null
              ? 'coffer cannot read the crontab here: `crontab -l` shows whether it is in yours'
              : cron.inCrontab
                ? 'it is in your crontab'
                : 'it is NOT in your crontab (add it with `crontab -e`)';
          print(`            printed by \`coffer schedule install --cron\` at ${localTime(cron.printedAt)}; ${where}`);
        }
        if (!state) return print('last run:   never');
        print(`last run:   ${localTime(state.lastRunAt)}: ${state.lastOutcome}`);
        print(`last backup:${state.lastSuccessAt ? ` ${state.lastBackupId} at ${localTime(state.lastSuccessAt)}` : ' never'}`);
        print(`next due:   ${next.at ? localTime(next.at) : next.why}`);
      }),
    );
}

/** `coffer schedule remove`. */
function registerScheduleRemove(schedule: Command): void {
  schedule
    .command('remove')
    .description("stop the profile's timer and delete its units")
    .option('--no-enable', 'only delete the unit files (do not run systemctl)')
    .option('--json', 'print {"removed": [files]}')
    .action(
      action(async (context, options: { enable: boolean; json?: boolean }) => {
        const { name } = requireProfile(context.profile, 'coffer schedule remove');
        const dir = unitDir(context.config.configDir);
        const unit = unitName(name);
        if (options.enable) {
          const result = await systemctl(['disable', '--now', `${unit}.timer`]);
          if (!result.ok) note(`note: systemctl --user disable --now ${unit}.timer: ${result.output}`);
        }
        const removed: string[] = [];
        for (const file of [`${unit}.timer`, `${unit}.service`].map((f) => path.join(dir, f))) {
          if (fs.existsSync(file)) {
            await fsp.rm(file);
            removed.push(file);
          }
        }
        if (options.enable) await systemctl(['daemon-reload']);
        const cron = cronRecordFile(context.config.stateDir, name);
        if (fs.existsSync(cron)) {
          await fsp.rm(cron);
          note(
            'note: the crontab line printed for this profile is no longer shown by `coffer schedule status`; remove it with `crontab -e`',
          );
        }
        if (options.json) return printJson({ removed });
        print(removed.length ? removed.map((f) => `removed ${f}`).join('\n') : `profile ${name} had no units`);
      }),
    );
}
