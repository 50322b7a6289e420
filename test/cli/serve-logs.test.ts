/**
 * The real `coffer serve` on a fresh data directory: stdout is the JSON log stream (every line parses, none holds
 * the first API key), the plain-text notices (the key, shown once) are on stderr, and a request makes exactly one
 * log line, with its reqId, method, path without the query, status and response time (docs/operations.md#logs).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/tmp.js';

const BIN = path.resolve('dist/cli/main.js');
let child: ChildProcess | undefined;
let stdout = '';
let stderr = '';

const exited = (proc: ChildProcess) =>
  new Promise<number | null>((resolve) =>
    proc.exitCode !== null || proc.signalCode !== null ? resolve(proc.exitCode) : proc.on('exit', resolve),
  );

async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!done()) {
    if (Date.now() > deadline || child?.exitCode !== null) throw new Error(`${what}\nstdout: ${stdout}\nstderr: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  if (!fs.existsSync(BIN)) throw new Error('dist/cli/main.js is missing: run `npm run build` (npm test does it)');
  child = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', COFFER_DATA_DIR: tempDir() },
  });
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  await until(() => /listening on (\S+)/.test(stderr), 'the server did not start');
});

afterAll(async () => {
  if (!child) return;
  child.kill('SIGKILL');
  await exited(child);
});

describe('coffer serve: logs and notices', () => {
  it('keeps the first API key out of the JSON log stream and writes one line per request', async () => {
    const url = /listening on (\S+)/.exec(stderr)![1]!;
    const keys = stderr.match(/cfk_[A-Za-z0-9_-]{43}/g) ?? [];
    expect(keys).toHaveLength(1);
    expect(stderr).toContain(`API key (shown once, store it now): ${keys[0]}`);

    const response = await fetch(`${url}/api/backup-account?note=query-secret`, { headers: { authorization: `Bearer ${keys[0]}` } });
    expect(response.status).toBe(200);
    const reqId = response.headers.get('x-request-id')!;
    expect(reqId).toMatch(/^[0-9a-f-]{36}$/);
    await until(() => stdout.includes(reqId), 'no log line for the request');

    child!.kill('SIGTERM');
    expect(await exited(child!)).toBe(0);

    const lines = stdout.split('\n').filter((line) => line !== '');
    expect(lines.length).toBeGreaterThan(1);
    const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(stdout).not.toContain(keys[0]);
    expect(stdout).not.toContain('cfk_');
    expect(stdout).not.toContain('query-secret');

    const forRequest = records.filter((record) => record.reqId === reqId);
    expect(forRequest).toHaveLength(1);
    expect(forRequest[0]).toMatchObject({ level: 30, msg: 'request', method: 'GET', url: '/api/backup-account', statusCode: 200 });
    expect(typeof forRequest[0]!.responseTimeMs).toBe('number');
    expect(records.some((record) => record.msg === 'incoming request' || record.msg === 'request completed')).toBe(false);
  });

  it('writes every request line before it exits, also lines still buffered when SIGTERM arrives', async () => {
    const server = spawn(process.execPath, [BIN, 'serve'], {
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', COFFER_DATA_DIR: tempDir() },
    });
    let out = '';
    let err = '';
    server.stdout!.on('data', (chunk) => (out += chunk));
    server.stderr!.on('data', (chunk) => (err += chunk));
    const deadline = Date.now() + 20_000;
    while (!/listening on (\S+)/.test(err)) {
      if (Date.now() > deadline || server.exitCode !== null) throw new Error(`the second server did not start: ${err}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const second = /listening on (\S+)/.exec(err)![1]!;
    const key = /cfk_[A-Za-z0-9_-]{43}/.exec(err)![0];
    const responses = await Promise.all(
      Array.from({ length: 30 }, () => fetch(`${second}/api/backup-account`, { headers: { authorization: `Bearer ${key}` } })),
    );
    const ids = responses.map((response) => response.headers.get('x-request-id')!);
    server.kill('SIGTERM');
    expect(await exited(server)).toBe(0);
    const logged = new Set(
      out
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => (JSON.parse(line) as { reqId?: string }).reqId),
    );
    expect(ids.filter((id) => !logged.has(id))).toEqual([]);
  });
});
