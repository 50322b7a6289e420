/**
 * What an agent run remembers between runs (`$XDG_STATE_HOME/coffer/runs/<profile>.json`) and the rules it applies
 * to decide: when the next backup is due, whether the profile is overdue, how often a timer looks, and the
 * per-profile lock that keeps two runs of one profile (a timer and a manual run) apart.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { BACKUP_INTERVALS, type BackupInterval } from '../../domain/plans.js';

export const INTERVAL_MS: Record<BackupInterval, number> = { '30m': 30 * 60_000, '4h': 4 * 3_600_000, '1d': 86_400_000 };
export const isInterval = (value: string): value is BackupInterval => (BACKUP_INTERVALS as readonly string[]).includes(value);

const RunStateSchema = z.object({
  version: z.literal(1),
  /** The account's interval as last seen (a key that cannot read the account keeps using it). */
  interval: z.enum(BACKUP_INTERVALS).nullable(),
  firstRunAt: z.string(),
  lastRunAt: z.string(),
  lastOutcome: z.enum(['success', 'failure', 'skipped']),
  lastSuccessAt: z.string().nullable(),
  lastBackupId: z.string().nullable(),
  nextDueAt: z.string().nullable(),
  /** When the overdue notification of the current overdue stretch was sent (reset by a success). */
  overdueNotifiedAt: z.string().nullable(),
  /** When the profile's last restore drill was done (docs/client.md#restore-drills); absent in older state files. */
  lastDrillAt: z.string().nullable().default(null),
});
export type RunState = z.output<typeof RunStateSchema>;

export const runStateFile = (stateDir: string, profile: string) => path.join(stateDir, 'runs', `${profile}.json`);

export async function readRunState(stateDir: string, profile: string): Promise<RunState | null> {
  try {
    const parsed = RunStateSchema.safeParse(JSON.parse(await fsp.readFile(runStateFile(stateDir, profile), 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export async function writeRunState(stateDir: string, profile: string, state: RunState): Promise<void> {
  const file = runStateFile(stateDir, profile);
  await fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${process.pid}.tmp`;
  await fsp.writeFile(temp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  await fsp.rename(temp, file);
}

/** How often a profile's `drill` setting drills. */
export const DRILL_EVERY_MS = { daily: 86_400_000, weekly: 7 * 86_400_000 } as const;

/** Whether a drill is due: never drilled, or the last drill is at least the setting's period ago. */
export function drillDue(setting: keyof typeof DRILL_EVERY_MS, lastDrillAt: string | null, now: number): boolean {
  const last = lastDrillAt === null ? NaN : Date.parse(lastDrillAt);
  return !Number.isFinite(last) || now - last >= DRILL_EVERY_MS[setting];
}

/** When the next backup is due: the newest READY backup's creation plus the interval (null: now). */
export function nextDueAt(newestReadyCreatedAt: number | null, intervalMs: number): number | null {
  return newestReadyCreatedAt === null ? null : newestReadyCreatedAt + intervalMs;
}

/** Overdue: no successful backup within twice the interval (counted from the first run when there never was one). */
export function isOverdue(lastSuccessAt: number | null, since: number, intervalMs: number, now: number): boolean {
  return now - (lastSuccessAt ?? since) > 2 * intervalMs;
}

/**
 * How often a timer or the agent looks whether a backup is due: a quarter of the interval (so a backup is never
 * more than that late, and the first look after the interval is past the server's next allowed time), within
 * 5 minutes and 6 hours.
 */
export function checkEveryMs(intervalMs: number): number {
  return Math.min(6 * 3_600_000, Math.max(5 * 60_000, Math.floor(intervalMs / 4)));
}

export class ProfileBusyError extends Error {
  override readonly name = 'ProfileBusyError';
}

/**
 * Takes the profile's lock (an O_EXCL file holding this process's pid). A lock whose process is gone is taken
 * over. Returns the release function.
 */
export async function lockProfile(stateDir: string, profile: string): Promise<() => void> {
  const file = path.join(stateDir, 'runs', `${profile}.lock`);
  await fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      return () => fs.rmSync(file, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const pid = Number(fs.readFileSync(file, 'utf8').trim());
      let alive = false;
      try {
        alive = Number.isSafeInteger(pid) && pid > 0 && process.kill(pid, 0);
      } catch (e) {
        alive = (e as NodeJS.ErrnoException).code === 'EPERM';
      }
      if (alive) throw new ProfileBusyError(`another run of profile ${profile} is in progress (pid ${pid})`);
      fs.rmSync(file, { force: true });
    }
  }
  throw new ProfileBusyError(`could not take the lock of profile ${profile}`);
}
