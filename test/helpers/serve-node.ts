/** A real `coffer serve` process (the built CLI) on a random loopback port, for the tests that run several nodes. */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { tempDir } from './tmp.js';

const BIN = path.resolve(import.meta.dirname, '../../dist/cli/main.js');

export interface ServeNode {
  name: string;
  child: ChildProcess;
  url: string;
  output: () => string;
}

/** Starts `coffer serve` with `env` (and a data directory of its own) and waits for its "listening on" line. */
export async function startServeNode(name: string, env: Record<string, string>): Promise<ServeNode> {
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', COFFER_DATA_DIR: tempDir(`coffer-${name}-`), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const deadline = Date.now() + 20_000;
  while (!/listening on (\S+)/.test(output)) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`node ${name} did not start: ${output}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return { name, child, url: /listening on (\S+)/.exec(output)![1]!, output: () => output };
}

/** Resolves once the process has exited (at once when it already has). */
export const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));
