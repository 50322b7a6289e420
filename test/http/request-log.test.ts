/**
 * The access line of an event stream (docs/operations.md#logs): a terminal status ends every stream of its backup at
 * once, and each still writes its one line with what operators read (reqId, method, path, status, response time),
 * the query string left out.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { assertBuilt } from '../helpers/built.js';
import { tempDir } from '../helpers/tmp.js';

describe('coffer serve: event streams ended by a terminal status', () => {
  let child: ChildProcess | undefined;
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child!.once('exit', resolve));
    }
  });

  it('log one line each, with reqId, method, path, status and response time', { timeout: 60_000 }, async () => {
    assertBuilt();
    let stdout = '';
    let stderr = '';
    child = spawn(process.execPath, [path.resolve('dist/cli/main.js'), 'serve'], {
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', COFFER_DATA_DIR: tempDir() },
    });
    child.stdout!.on('data', (chunk) => (stdout += chunk));
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    await expect.poll(() => /listening on (\S+)/.test(stderr), { timeout: 20_000 }).toBe(true);
    const url = /listening on (\S+)/.exec(stderr)![1]!;
    const apiKey = /cfk_[A-Za-z0-9_-]{43}/.exec(stderr)![0];
    const call = api(url, apiKey);
    expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    const backupId = (await call('POST', '/api/backups')).body.backupId as string;

    const streams = await Promise.all(
      Array.from({ length: 3 }, () =>
        fetch(`${url}/api/backups/${backupId}/events?note=query-secret`, { headers: { authorization: `Bearer ${apiKey}` } }),
      ),
    );
    const reqIds = streams.map((response) => response.headers.get('x-request-id')!);
    const bodies = streams.map((response) => response.text());
    const data = Buffer.alloc(1024, 7);
    const uploaded = await call('POST', `/api/backups/upload?backupId=${backupId}`, {
      body: data,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(uploaded.status).toBe(201);
    expect((await call('POST', `/api/backups/${backupId}/finalize`, { json: finalizeBody(data.length) })).status).toBe(200);
    for (const body of await Promise.all(bodies)) expect(body).toContain('event: backup.stream.closed');

    child.kill('SIGTERM');
    await new Promise((resolve) => child!.once('exit', resolve));
    const records = stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    for (const reqId of reqIds) {
      const lines = records.filter((record) => record.reqId === reqId);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        level: 30,
        msg: 'request',
        method: 'GET',
        url: `/api/backups/${backupId}/events`,
        statusCode: 200,
      });
      expect(typeof lines[0]!.responseTimeMs).toBe('number');
      expect(typeof lines[0]!.time).toBe('number');
      expect(lines[0]).toHaveProperty('pid');
      expect(lines[0]).toHaveProperty('hostname');
    }
    expect(stdout).not.toContain('query-secret');
  });
});
