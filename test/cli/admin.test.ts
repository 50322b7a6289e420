/** The real `coffer` executable: first start, graceful shutdown, configuration errors, admin commands. */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/tmp.js';

const BIN = path.resolve('dist/cli/main.js');

function coffer(args: string[], env: Record<string, string>) {
  const result = spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

function adminJson(args: string[], env: Record<string, string>) {
  const result = coffer(['admin', ...args, '--json'], env);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
}

interface Running {
  child: ChildProcess;
  url: string;
  output: () => string;
}

/** Every `coffer serve` started here; all are killed (and awaited) before their data directories go. */
const started: ChildProcess[] = [];

async function serve(env: Record<string, string>): Promise<Running> {
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', ...env },
  });
  started.push(child);
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const deadline = Date.now() + 15_000;
  while (!/listening on (\S+)/.test(output)) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`server did not start: ${output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, url: /listening on (\S+)/.exec(output)![1]!, output: () => output };
}

const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) =>
    child.exitCode !== null || child.signalCode !== null ? resolve(child.exitCode) : child.on('exit', resolve),
  );

beforeAll(() => {
  if (!fs.existsSync(BIN)) throw new Error('dist/cli/main.js is missing: run `npm run build` (npm test does it)');
});

afterAll(async () => {
  for (const child of started) child.kill('SIGKILL');
  await Promise.all(started.map(exited));
});

describe('coffer serve', () => {
  const dataDir = tempDir();
  let running: Running | undefined;

  it('creates the first account and prints its all-scope key once', async () => {
    running = await serve({ COFFER_DATA_DIR: dataDir });
    const key = /API key \(shown once, store it now\): (cfk_[A-Za-z0-9_-]{43})/.exec(running.output())?.[1];
    expect(key).toBeDefined();
    const account = await fetch(`${running.url}/api/backup-account`, { headers: { authorization: `Bearer ${key}` } });
    expect(account.status).toBe(200);
    expect((await account.json()).backupInterval).toBe('30m');
    const keys = adminJson(['keys', 'list'], { COFFER_DATA_DIR: dataDir });
    expect(keys.keys).toHaveLength(1);
    expect(keys.keys[0].scopes).toEqual(['backups:read', 'backups:write', 'backups:restore']);
    expect(JSON.stringify(keys)).not.toContain(key!);
  });

  it('shuts down on SIGINT, closing open event streams with reason shutdown', async () => {
    const { apiKey } = adminJson(['keys', 'create', '--plan', 'pro'], { COFFER_DATA_DIR: dataDir });
    const auth = { authorization: `Bearer ${apiKey}` };
    const b64 = (n: number) => Buffer.alloc(n, 3).toString('base64');
    await fetch(`${running!.url}/api/backup-account/bootstrap`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        cryptoVersion: 'v1',
        kdf: { salt: b64(16), opslimit: 2, memlimit: 8192 },
        wrappedMasterKey: b64(48),
        wrappedMasterKeyNonce: b64(24),
      }),
    });
    const { backupId } = await (await fetch(`${running!.url}/api/backups`, { method: 'POST', headers: auth })).json();
    const stream = await fetch(`${running!.url}/api/backups/${backupId}/events`, { headers: auth });
    const reader = stream.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain('retry: 2000');
    running!.child.kill('SIGINT');
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toMatch(/event: backup\.stream\.closed\ndata: \{[^\n]*"reason":"shutdown"/);
    expect(await exited(running!.child)).toBe(0);
  });

  it('lets an in-flight upload finish when asked to stop', async () => {
    running = await serve({ COFFER_DATA_DIR: dataDir });
    const { apiKey } = adminJson(['keys', 'create', '--plan', 'pro'], { COFFER_DATA_DIR: dataDir });
    const auth = { authorization: `Bearer ${apiKey}` };
    const b64 = (n: number) => Buffer.alloc(n, 3).toString('base64');
    await fetch(`${running.url}/api/backup-account/bootstrap`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        cryptoVersion: 'v1',
        kdf: { salt: b64(16), opslimit: 2, memlimit: 8192 },
        wrappedMasterKey: b64(48),
        wrappedMasterKeyNonce: b64(24),
      }),
    });
    const { backupId } = await (await fetch(`${running.url}/api/backups`, { method: 'POST', headers: auth })).json();
    const half = Buffer.alloc(256 * 1024, 5);
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = http.request(`${running!.url}/api/backups/upload?backupId=${backupId}`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/octet-stream', 'content-length': String(half.length * 2) },
      });
      request.on('response', (response) => {
        let body = '';
        response.on('data', (chunk) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode!, body }));
      });
      request.on('error', reject);
      request.write(half);
      setTimeout(() => {
        running!.child.kill('SIGINT');
        setTimeout(() => request.end(half), 300);
      }, 200);
    });
    const { status, body } = await answer;
    expect(status).toBe(201);
    expect(JSON.parse(body).size).toBe(half.length * 2);
    expect(await exited(running.child)).toBe(0);
  });

  it('records the first start in the audit trail by the operator who started it, named as every later operator entry', async () => {
    const fresh = tempDir();
    const first = await serve({ COFFER_DATA_DIR: fresh });
    const accountId = /created account (\S+)/.exec(first.output())![1]!;
    first.child.kill('SIGTERM');
    expect(await exited(first.child)).toBe(0);
    adminJson(['accounts', 'set-plan', accountId, 'plus'], { COFFER_DATA_DIR: fresh });
    const { events } = adminJson(['audit', accountId], { COFFER_DATA_DIR: fresh });
    const user = os.userInfo().username;
    expect(events.map((e: { action: string; actor: unknown }) => [e.action, e.actor])).toEqual([
      ['account.plan', { kind: 'operator', id: user }],
      ['key.create', { kind: 'operator', id: user }],
    ]);
    const text = coffer(['admin', 'audit', accountId], { COFFER_DATA_DIR: fresh }).stdout.trimEnd().split('\n');
    expect(text.slice(1).map((line) => line.split(/ {2,}/)[2])).toEqual([`operator ${user}`, `operator ${user}`]);
  });

  it('prints no key on a later start of the same data directory', async () => {
    running = await serve({ COFFER_DATA_DIR: dataDir });
    expect(running.output()).not.toContain('cfk_');
    running.child.kill('SIGTERM');
    expect(await exited(running.child)).toBe(0);
  });

  it('uses COFFER_INITIAL_API_KEY on first start', async () => {
    const initial = `cfk_${Buffer.alloc(32, 9).toString('base64url')}`;
    running = await serve({ COFFER_DATA_DIR: tempDir(), COFFER_INITIAL_API_KEY: initial });
    expect(running.output()).not.toContain(initial);
    const response = await fetch(`${running.url}/api/backups`, { headers: { 'x-api-key': initial } });
    expect(response.status).toBe(200);
    running.child.kill('SIGTERM');
    await exited(running.child);
  });

  it.each([
    ['PORT', 'eighty'],
    ['COFFER_SSE_INTERVAL', 'soon'],
    ['COFFER_UPLOAD_PROTOCOL', 'ftp'],
    ['COFFER_PUBLIC_URL', 'not a url'],
    ['COFFER_SIGNIN_ATTEMPTS', '0'],
    ['COFFER_SIGNIN_WINDOW', 'often'],
  ])('refuses an invalid %s with exit 1 and one line naming it', (variable, value) => {
    const result = coffer(['serve'], { COFFER_DATA_DIR: tempDir(), [variable]: value });
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain(variable);
  });
});

describe('coffer admin', () => {
  const env = { COFFER_DATA_DIR: tempDir() };

  it('creates accounts, changes plans and lists them', () => {
    const created = adminJson(['accounts', 'create', '--plan', 'plus'], env);
    expect(created).toEqual({ accountId: expect.any(String), plan: 'plus' });
    expect(adminJson(['accounts', 'set-plan', created.accountId, 'pro'], env)).toEqual({ accountId: created.accountId, plan: 'pro' });
    const listed = adminJson(['accounts', 'list'], env);
    expect(listed.accounts).toContainEqual(expect.objectContaining({ accountId: created.accountId, plan: 'pro' }));
  });

  it('creates keys with the documented JSON shape', () => {
    const fresh = adminJson(['keys', 'create', '--plan', 'pro', '--scopes', 'backups:read,backups:restore', '--expires-in', '30d'], env);
    expect(fresh).toEqual({
      accountId: expect.any(String),
      keyId: expect.any(String),
      apiKey: expect.stringMatching(/^cfk_[A-Za-z0-9_-]{43}$/),
      plan: 'pro',
      scopes: ['backups:read', 'backups:restore'],
      appendOnly: false,
      label: null,
      expiresAt: expect.any(String),
    });
    const days = (Date.parse(fresh.expiresAt) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(29.9);
    const more = adminJson(['keys', 'create', '--account', fresh.accountId, '--plan', 'pro'], env);
    expect(more).toMatchObject({ accountId: fresh.accountId, plan: 'pro', expiresAt: null });
    expect(more.scopes).toEqual(['backups:read', 'backups:write', 'backups:restore']);
    const listed = adminJson(['keys', 'list', '--account', fresh.accountId], env);
    expect(listed.keys.map((k: { keyId: string }) => k.keyId)).toEqual([fresh.keyId, more.keyId]);
    const host = adminJson(
      [
        'keys',
        'create',
        '--account',
        fresh.accountId,
        '--scopes',
        'backups:read,backups:write',
        '--append-only',
        '--label',
        'db host (nightly)',
      ],
      env,
    );
    expect(host).toMatchObject({
      accountId: fresh.accountId,
      scopes: ['backups:read', 'backups:write'],
      appendOnly: true,
      label: 'db host (nightly)',
    });
    const all = adminJson(['keys', 'list', '--account', fresh.accountId], env);
    expect(all.keys.map((k: { keyId: string; appendOnly: boolean }) => [k.keyId, k.appendOnly])).toEqual([
      [fresh.keyId, false],
      [more.keyId, false],
      [host.keyId, true],
    ]);
    expect(all.keys.map((k: { label: string | null }) => k.label)).toEqual([null, null, 'db host (nightly)']);
    const text = coffer(['admin', 'keys', 'list', '--account', fresh.accountId], env);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^KEY +LABEL +ACCOUNT +SCOPES +STATUS$/);
    expect(lines.find((line) => line.startsWith(host.keyId))).toMatch(
      new RegExp(`^${host.keyId} +"db host \\(nightly\\)" +${fresh.accountId} +backups:read,backups:write append-only +active, no expiry$`),
    );
    // One quoting style for labels: `keys create` as `accounts add-host` and the lists (straight double quotes).
    const made = coffer(['admin', 'keys', 'create', '--account', fresh.accountId, '--label', 'laptop'], env);
    expect(made.stdout).toMatch(/^key \S+ "laptop" for account /m);
    expect(made.stdout + text.stdout).not.toMatch(/[“”]/);
  });

  it('refuses a key label that is not plain short text (usage error, exit 2, no key made, no stack trace)', () => {
    const { accountId } = adminJson(['accounts', 'create', '--plan', 'free'], env);
    for (const label of ['<script>', 'two\nlines', 'x'.repeat(49), `cfk_${'a'.repeat(43)}`, ' spaced ']) {
      const refused = coffer(['admin', 'keys', 'create', '--account', accountId, '--label', label], env);
      expect(refused.code, label).toBe(2);
      expect(refused.stderr).toContain('--label: ');
      expect(refused.stderr).not.toMatch(/\n\s+at /);
    }
    expect(adminJson(['keys', 'list', '--account', accountId], env).keys).toEqual([]);
  });

  it('revokes keys', async () => {
    const issued = adminJson(['keys', 'create'], env);
    expect(adminJson(['keys', 'revoke', issued.keyId], env)).toEqual({ keyId: issued.keyId, revoked: true });
    const listed = adminJson(['keys', 'list', '--account', issued.accountId], env);
    expect(listed.keys[0]).toMatchObject({ revokedAt: expect.any(String), status: 'revoked' });
    expect(coffer(['admin', 'keys', 'revoke', issued.keyId], env).code).toBe(1);
  });

  it.each([
    [['keys', 'create', '--scopes', 'backups:everything']],
    [['accounts', 'create', '--plan', 'gold']],
    [['keys', 'create', '--expires-in', 'forever']],
    [['keys', 'frobnicate']],
  ])('answers usage errors with exit 2: %j', (args) => {
    expect(coffer(['admin', ...args], env).code).toBe(2);
  });

  it('refuses an append-only key without --account (exit 2, nothing created); a key without --account names its new account', () => {
    const before = adminJson(['accounts', 'list'], env).accounts.length;
    const refused = coffer(['admin', 'keys', 'create', '--append-only', '--scopes', 'backups:write'], env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--append-only needs --account');
    expect(adminJson(['accounts', 'list'], env).accounts.length).toBe(before);

    const made = coffer(['admin', 'keys', 'create', '--json'], env);
    expect(made.code, made.stderr).toBe(0);
    const { accountId } = JSON.parse(made.stdout) as { accountId: string };
    expect(made.stderr).toContain(`created a new account ${accountId}`);
    const again = coffer(['admin', 'keys', 'create', '--account', accountId], env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).not.toContain('created a new account');
  }, 120_000);

  it('set-label names an account for operators: listed under a header row, searchable, audited; bad labels change nothing', () => {
    const named = adminJson(['accounts', 'create', '--plan', 'plus'], env);
    const other = adminJson(['accounts', 'create', '--plan', 'plus'], env);
    expect(adminJson(['accounts', 'set-label', named.accountId, 'ACME web team'], env)).toEqual({
      accountId: named.accountId,
      label: 'ACME web team',
    });
    const listed = adminJson(['accounts', 'list'], env);
    expect(listed.accounts).toContainEqual(expect.objectContaining({ accountId: named.accountId, label: 'ACME web team' }));
    const text = coffer(['admin', 'accounts', 'list'], env).stdout.trimEnd().split('\n');
    expect(text[0]).toMatch(/^ACCOUNT +LABEL +PLAN +CREATED +HOST OF$/);
    expect(text.find((line) => line.startsWith(named.accountId))).toMatch(/^\S+ +"ACME web team" +plus +\S+Z +-$/);
    expect(text.find((line) => line.startsWith(other.accountId))).toMatch(/^\S+ +- +plus /);

    // The search finds it by its label (any case) or id, and nothing else.
    const found = adminJson(['accounts', 'list', '--search', 'acme WEB'], env);
    expect(found.accounts.map((a: { accountId: string }) => a.accountId)).toEqual([named.accountId]);
    expect(adminJson(['accounts', 'list', '--search', other.accountId.slice(0, 13)], env).accounts).toHaveLength(1);
    expect(coffer(['admin', 'accounts', 'list', '--search', 'nobody-at-all'], env).stdout).toContain('no account matches "nobody-at-all"');

    for (const bad of ['<b>', `cfk_${'a'.repeat(43)}`, 'x'.repeat(49), 'two\nlines']) {
      const refused = coffer(['admin', 'accounts', 'set-label', named.accountId, bad], env);
      expect(refused.code, bad).toBe(2);
      expect(refused.stderr).toContain('nothing was changed');
      expect(refused.stderr).not.toMatch(/\n\s+at /);
    }
    expect(coffer(['admin', 'accounts', 'set-label', '00000000-0000-4000-8000-000000000000', 'x'], env).code).toBe(1);
    expect(adminJson(['accounts', 'list', '--search', 'ACME'], env).accounts).toHaveLength(1);

    const audit = coffer(['admin', 'audit', named.accountId], env).stdout.trimEnd().split('\n');
    expect(audit[0]).toMatch(/^AT +ACTION +BY +FROM +ON +DETAIL$/);
    expect(audit[1]).toMatch(/ account\.label +operator \S+ +- +- +none → "ACME web team"$/);

    expect(adminJson(['accounts', 'set-label', named.accountId, ''], env)).toEqual({ accountId: named.accountId, label: null });
    expect(adminJson(['accounts', 'list', '--search', 'ACME'], env).accounts).toEqual([]);
  });

  it('set-quota answers in human sizes in text and bytes in --json', () => {
    const { accountId } = adminJson(['accounts', 'create', '--plan', 'free'], env);
    expect(adminJson(['accounts', 'set-quota', accountId, '5000000'], env)).toMatchObject({ quotaBytes: 5_000_000 });
    expect(coffer(['admin', 'accounts', 'set-quota', accountId, '5000000'], env).stdout).toContain('storage quota 4.8 MiB (5000000 bytes)');
  });

  it('refuses --plan that contradicts --account with exit 2', () => {
    const { accountId } = adminJson(['accounts', 'create', '--plan', 'free'], env);
    const result = coffer(['admin', 'keys', 'create', '--account', accountId, '--plan', 'pro'], env);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('set-plan');
  });
});
