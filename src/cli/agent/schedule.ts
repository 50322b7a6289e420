/**
 * The units `coffer schedule install` writes (docs/client.md#coffer-schedule): a systemd user service that runs
 * `coffer run --profile <name>` once, and a timer that starts it every quarter of the plan's interval (the run
 * itself decides whether a backup is due, so a timer that looks more often than the interval never misses the
 * allowed time by more than that quarter). Or one crontab line that does the same.
 */
import { createHash } from 'node:crypto';
import { checkEveryMs } from './agent-state.js';

export interface ScheduleSpec {
  profile: string;
  /** The plan's interval in ms, and in its own words (`1d`). */
  intervalMs: number;
  interval: string;
  /** The program that runs: node's path and the coffer script's, then the arguments. */
  argv: string[];
  /** Variables the run needs to find the same config and state (XDG_CONFIG_HOME, XDG_STATE_HOME). */
  environment: Record<string, string>;
  /** The run's own deadline (the profile's runTimeoutMinutes) and its hooks' timeout, in ms. */
  runTimeoutMs: number;
  hookTimeoutMs: number;
}

/**
 * systemd's TimeoutStartSec= for the service: the run's own deadline, then room for what a failed run still does
 * (`after` and `onFailure`, each up to its timeout and the 5 s before SIGKILL; the notifications, 10 s each; the
 * upload slot's deletion). The run ends itself first and reports it; systemd stops only a run that could not.
 */
export function serviceTimeoutMs(spec: Pick<ScheduleSpec, 'runTimeoutMs' | 'hookTimeoutMs'>): number {
  const span = spec.runTimeoutMs + 2 * (spec.hookTimeoutMs + 5000) + 60_000;
  return Math.ceil(span / 60_000) * 60_000;
}

export const unitName = (profile: string) => `coffer-${profile}`;

/** A character no value written into a unit or a crontab line may hold: a line break, NUL, any control character. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

export class ScheduleValueError extends Error {
  override readonly name = 'ScheduleValueError';
}

/**
 * Every value a unit or crontab line is made of (the program, its arguments, the environment): one holding a line
 * break, NUL or another control character is refused, so no value can add a line (`ExecStartPre=…`, a second
 * crontab entry). Throws ScheduleValueError naming what holds it.
 */
export function checkScheduleSpec(spec: ScheduleSpec): void {
  const values: [string, string][] = [
    ['the profile name', spec.profile],
    ...spec.argv.map((word, i): [string, string] => [
      i === 0 ? 'the node program path' : i === 1 ? 'the coffer script path' : `argument ${JSON.stringify(word)}`,
      word,
    ]),
    ...Object.entries(spec.environment).map(([k, v]): [string, string] => [k, `${k}=${v}`]),
  ];
  for (const [what, value] of values) {
    if (CONTROL.test(value)) {
      throw new ScheduleValueError(
        `${what} holds a line break, NUL or another control character: it cannot be written into a unit or a crontab line`,
      );
    }
  }
}

/** `\`, `"` and `%` escaped for a double-quoted systemd word (systemd.syntax(7); `%` starts a specifier). */
const systemdQuoted = (word: string) => word.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/%/g, '%%');

/** A word of ExecStart=: quoted when needed, and `$` doubled too (ExecStart= expands `$VAR`; systemd.service(5)). */
function systemdWord(word: string): string {
  const escaped = systemdQuoted(word).replace(/\$/g, '$$$$');
  return /^[A-Za-z0-9_@%+=:,./$-]+$/.test(word) ? escaped : `"${escaped}"`;
}

/** One Environment= assignment, quoted when needed: specifiers and C escapes apply, `$` is plain text there (systemd.exec(5)). */
function systemdAssignment(name: string, value: string): string {
  const word = `${name}=${value}`;
  return /^[A-Za-z0-9_@%+=:,./$-]+$/.test(word) ? systemdQuoted(word) : `"${systemdQuoted(word)}"`;
}

/** Seconds as systemd's shortest time span text. */
function span(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s % 3600 === 0) return `${s / 3600}h`;
  if (s % 60 === 0) return `${s / 60}min`;
  return `${s}s`;
}

export function serviceUnit(spec: ScheduleSpec): string {
  checkScheduleSpec(spec);
  const env = Object.entries(spec.environment).map(([k, v]) => `Environment=${systemdAssignment(k, v)}\n`);
  return (
    '[Unit]\n' +
    `Description=Coffer backup of profile ${spec.profile}\n` +
    '\n' +
    '[Service]\n' +
    'Type=oneshot\n' +
    `ExecStart=${spec.argv.map(systemdWord).join(' ')}\n` +
    env.join('') +
    'Nice=10\n' +
    'IOSchedulingClass=idle\n' +
    `TimeoutStartSec=${span(serviceTimeoutMs(spec))}\n`
  );
}

export function timerUnit(spec: ScheduleSpec): string {
  const every = checkEveryMs(spec.intervalMs);
  return (
    '[Unit]\n' +
    `Description=Coffer backup of profile ${spec.profile}: looks every ${span(every)} whether one is due (plan interval ${spec.interval})\n` +
    '\n' +
    '[Timer]\n' +
    'OnActiveSec=1min\n' +
    'OnBootSec=5min\n' +
    `OnUnitInactiveSec=${span(every)}\n` +
    `RandomizedDelaySec=${span(Math.min(every / 5, 15 * 60_000))}\n` +
    'AccuracySec=1min\n' +
    '\n' +
    '[Install]\n' +
    'WantedBy=timers.target\n'
  );
}

/**
 * A POSIX shell word (single quotes) inside a crontab line, where an unescaped `%` ends the command (the rest goes
 * to its stdin) and `\%` is a `%`: each `%` stands outside the quotes as `\%` (`'a'\%'b'`), so no backslash of the
 * value can pair with it (crontab(5)).
 */
const cronWord = (word: string) =>
  /^[A-Za-z0-9_@+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`).replace(/%/g, `'\\%'`)}'`;

/**
 * How often the crontab line runs: the agent's look interval (checkEveryMs), rounded down to a step cron can keep
 * exactly (a step of N minutes or hours is exact only when N divides 60 or 24: a step of 8 minutes also runs at :56 and :00).
 */
export function cronEveryMs(intervalMs: number): number {
  const minutes = Math.max(1, Math.floor(checkEveryMs(intervalMs) / 60_000));
  if (minutes < 60) return [30, 20, 15, 12, 10, 6, 5, 4, 3, 2, 1].find((step) => step <= minutes)! * 60_000;
  const hours = Math.floor(minutes / 60);
  return [12, 8, 6, 4, 3, 2, 1].find((step) => step <= hours)! * 3_600_000;
}

/** One crontab line: every cronEveryMs, at a minute picked from the profile's name (so hosts spread out). */
export function cronLine(spec: ScheduleSpec): string {
  checkScheduleSpec(spec);
  const minutes = cronEveryMs(spec.intervalMs) / 60_000;
  const minute = createHash('sha256').update(spec.profile).digest()[0]! % 60;
  const when = minutes < 60 ? `*/${minutes} * * * *` : `${minute} */${minutes / 60} * * *`;
  const env = Object.entries(spec.environment).map(([k, v]) => `${k}=${cronWord(v)} `);
  return `${when} ${env.join('')}${spec.argv.map(cronWord).join(' ')}`;
}
