/**
 * A real `coffer serve` process (the built CLI) on a random loopback port, for the tests that run several nodes.
 * Every node started here is also stopped when its test file ends (test/helpers/setup.ts runs stopServeNodes after
 * the file's own afterAll hooks): one whose start failed or timed out at once, and one whose sibling's start failed
 * (`Promise.all` rejects before the file could keep it) at the end of the file.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { hangGuard } from './bounds.js';
import { tempDir } from './tmp.js';

const BIN = path.resolve(import.meta.dirname, '../../dist/cli/main.js');

export interface ServeNode {
  name: string;
  child: ChildProcess;
  url: string;
  output: () => string;
}

/** The nodes of this test file not known to have exited. */
const running = new Set<ChildProcess>();

/** Starts `coffer serve` with `env` (and a data directory of its own) and waits for its "listening on" line. */
export async function startServeNode(name: string, env: Record<string, string>): Promise<ServeNode> {
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', COFFER_DATA_DIR: tempDir(`coffer-${name}-`), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  let output = '';
  const listening = new Promise<string>((resolve, reject) => {
    const bound = hangGuard(20_000);
    const timer = setTimeout(() => reject(new Error(`node ${name} did not start within ${bound / 1000} s: ${output}`)), bound);
    const look = (chunk: Buffer) => {
      output += chunk;
      const match = /listening on (\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', look);
    child.stderr!.on('data', look);
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`node ${name} exited before it listened: ${output}`));
    });
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
  try {
    const url = await listening;
    return { name, child, url, output: () => output };
  } catch (error) {
    await stop(child);
    throw error;
  }
}

/** Resolves once the process has exited (at once when it already has). */
export const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));

async function stop(child: ChildProcess): Promise<void> {
  running.delete(child);
  if (child.pid === undefined) return; // never spawned: no exit to wait for
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await exited(child);
}

/** Kills every node this file started that is still running and waits for their exits (setup.ts, at file end). */
export async function stopServeNodes(): Promise<void> {
  await Promise.all([...running].map(stop));
}
