/**
 * The processes a test starts end with the test, also when it fails or hits its bound: otherwise a CLI still running
 * after its test timed out writes on into temp folders the file is about to remove (and leaves them behind).
 */
import type { ChildProcess } from 'node:child_process';
import { onTestFinished } from 'vitest';

const ended = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

/** Started outside a test (a hook): stopped at the file's end by setup.ts, before its temp folders go. */
const startedInHooks = new Set<ChildProcess>();

async function stop(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || ended(child)) return;
  child.kill('SIGKILL');
  await new Promise<void>((resolve) => (ended(child) ? resolve() : child.once('exit', () => resolve())));
}

/**
 * Kills `child` (SIGKILL) when the running test ends, and waits for its exit. Started in a hook (beforeAll, whose
 * bound may be hit while it runs), it is killed when the file ends instead (stopHookChildren).
 */
export function endsWithTest(child: ChildProcess): void {
  try {
    onTestFinished(() => stop(child));
  } catch {
    startedInHooks.add(child);
    child.once('exit', () => startedInHooks.delete(child));
  }
}

/** setup.ts's last afterAll: what a hook started and nothing stopped. */
export async function stopHookChildren(): Promise<void> {
  await Promise.all([...startedInHooks].map(stop));
  startedInHooks.clear();
}
