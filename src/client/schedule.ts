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
}

export const unitName = (profile: string) => `coffer-${profile}`;

/** A systemd word: quoted when needed, with `\`, `"`, `%` and `$` escaped (systemd.syntax(7), systemd.service(5)). */
function systemdWord(word: string): string {
  const escaped = word.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/%/g, '%%').replace(/\$/g, '$$$$');
  return /^[A-Za-z0-9_@%+=:,./$-]+$/.test(word) ? escaped : `"${escaped}"`;
}

/** Seconds as systemd's shortest time span text. */
function span(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s % 3600 === 0) return `${s / 3600}h`;
  if (s % 60 === 0) return `${s / 60}min`;
  return `${s}s`;
}

export function serviceUnit(spec: ScheduleSpec): string {
  const env = Object.entries(spec.environment).map(([k, v]) => `Environment=${systemdWord(`${k}=${v}`)}\n`);
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
    `TimeoutStartSec=${span(Math.max(spec.intervalMs, 3_600_000))}\n`
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

/** A POSIX shell word (single quotes). */
const shellWord = (word: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`);

/** One crontab line: every quarter interval, at a minute picked from the profile's name (so hosts spread out). */
export function cronLine(spec: ScheduleSpec): string {
  const minutes = Math.round(checkEveryMs(spec.intervalMs) / 60_000);
  const minute = createHash('sha256').update(spec.profile).digest()[0]! % 60;
  const when = minutes < 60 ? `*/${minutes} * * * *` : `${minute} */${Math.round(minutes / 60)} * * *`;
  const env = Object.entries(spec.environment).map(([k, v]) => `${k}=${shellWord(v)} `);
  // In a crontab command an unescaped % is a newline.
  return `${when} ${env.join('')}${spec.argv.map(shellWord).join(' ')}`.replace(/%/g, '\\%');
}
