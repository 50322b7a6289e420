/**
 * The processes a test starts end with the test, also when it fails or hits its bound: otherwise a CLI still running
 * after its test timed out writes on into temp folders the file is about to remove (and leaves them behind).
 */
import type { ChildProcess } from 'node:child_process';
import { onTestFinished } from 'vitest';

const ended = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

/** Kills `child` (SIGKILL) when the running test ends, and waits for its exit; outside a test (a hook) it does nothing. */
export function endsWithTest(child: ChildProcess): void {
  try {
    onTestFinished(async () => {
      if (child.pid === undefined || ended(child)) return;
      child.kill('SIGKILL');
      await new Promise<void>((resolve) => (ended(child) ? resolve() : child.once('exit', () => resolve())));
    });
  } catch {
    // Not inside a test (beforeAll, collection): the hook or the file's afterAll stops it.
  }
}
