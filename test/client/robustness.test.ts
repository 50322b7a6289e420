/**
 * The CLI against hostile servers, signals and a changing file system, through the real CLI process:
 * server text cannot rewrite the terminal (JSON stays exact); SIGINT/SIGTERM end every command with exit 130
 * after its cleanup; a restore target that cannot be created is a clear error; a file that changes while it is
 * read, or cannot be read, fails the backup with its name; refusals are explained in CLI terms, not API terms.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CofferClient } from '../../src/client/sdk.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, cliForAnyUser, json, listenHttp, startCli } from './helpers.js';
import { isRoot, lacking } from '../helpers/required.js';

const PASSPHRASE = 'robustness tests';
const MiB = 1024 * 1024;
/** Bound against hangs (the test fails when it passes), not a timing assertion. */
const BOUND_MS = 20_000;
// eslint-disable-next-line no-control-regex
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
const API_TALK = /\/api\/|details\.|Bearer|Authorization|HTTP \d{3}/;

/**
 * A forwarding proxy to the real server that holds the first upload body (after its first chunk) or the first
 * content download (after 100 bytes): the command is then provably in the middle of its transfer. `held`
 * resolves at that moment (with the slot id for an upload); `release()` lets a held upload go on.
 */
async function holdingProxy(upstream: string, what: 'upload' | 'content') {
  let holding = false;
  let onHeld: (backupId: string) => void = () => undefined;
  const held = new Promise<string>((resolve) => (onHeld = resolve));
  let release = () => undefined as void;
  const forwards = new Set<http.ClientRequest>();
  const proxy = await listenHttp((req, res) => {
    const url = new URL(req.url!, upstream);
    const hold = !holding && (what === 'upload' ? url.pathname === '/api/backups/upload' : url.pathname.endsWith('/content'));
    if (hold) holding = true;
    const forward = http.request(url, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      if (!(hold && what === 'content')) return void answer.pipe(res);
      answer.once('data', (chunk: Buffer) => {
        answer.destroy();
        res.write(chunk.subarray(0, 100), () => onHeld(url.pathname.split('/')[3]!));
      });
    });
    forwards.add(forward);
    forward.on('close', () => forwards.delete(forward));
    forward.on('error', () => res.destroy());
    if (!(hold && what === 'upload')) return void req.pipe(forward);
    let first = true;
    req.on('data', (chunk: Buffer) => {
      forward.write(chunk);
      if (!first) return;
      first = false;
      req.pause();
      release = () => void req.resume();
      onHeld(url.searchParams.get('backupId') ?? '');
    });
    req.on('end', () => forward.end());
  });
  const close = async () => {
    for (const forward of forwards) forward.destroy();
    await proxy.close();
  };
  return { url: proxy.url, close, held, release: () => release() };
}

describe('CLI robustness', () => {
  let server: TestServer;
  let work: string;

  /** A fresh account (pro plan: no cadence in the way) with an initialized vault. */
  async function account(scopes?: ('backups:read' | 'backups:write' | 'backups:restore')[]) {
    const full = await server.newKey({ plan: 'pro' });
    const cli = cliFor(server.url, full.apiKey, PASSPHRASE);
    expect((await cli(['init'])).code).toBe(0);
    const limited = scopes ? (await server.newKey({ accountId: full.accountId, scopes })).apiKey : full.apiKey;
    return { cli, apiKey: full.apiKey, limited, client: new CofferClient({ baseUrl: server.url, apiKey: full.apiKey }) };
  }

  async function dirWith(name: string, bytes: number): Promise<{ dir: string; file: string }> {
    const dir = path.join(work, name);
    await fsp.mkdir(dir, { recursive: true });
    const file = path.join(dir, 'data.bin');
    await fsp.writeFile(file, randomBytes(bytes));
    return { dir, file };
  }

  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer();
    work = tempDir('coffer-robust-');
  });

  afterAll(async () => {
    await server?.stop();
    if (work) await fsp.rm(work, { recursive: true, force: true });
  });

  describe('terminal escapes from a hostile server', () => {
    const ESC = '\u001b';
    const evil = `${ESC}]0;owned${ESC}\\${ESC}[2J${ESC}[31mred\r\u009b1A\u0007\u202e`;
    const id = '01900000-0000-7000-8000-000000000001';
    const record = {
      id,
      status: `READY${evil}`,
      createdAt: '2026-01-01T00:00:00.000Z',
      expiresAt: '2026-02-01T00:00:00.000Z',
      ciphertextSizeBytes: 10,
      plaintextSizeBytes: 5,
      clientVersion: `cli ${evil}`,
      hostappVersion: `app ${evil}`,
    };
    const detail = {
      ...record,
      cryptoVersion: 'v1',
      wrappedDek: null,
      wrappedDekNonce: null,
      encryptedMetadata: null,
      encryptedMetadataNonce: null,
    };
    const refusal = { error: `no ${evil}`, code: `odd${evil}`, message: `no ${evil}`, resolution: `do ${evil} now` };
    let hostile: Awaited<ReturnType<typeof listenHttp>>;
    let cli: ReturnType<typeof cliFor>;

    beforeAll(async () => {
      hostile = await listenHttp((req, res) => {
        const send = (status: number, body: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(body));
        };
        if (req.method === 'GET' && req.url === '/api/backups') return send(200, { backups: [record] });
        if (req.method === 'GET' && req.url === `/api/backups/${id}`) return send(200, detail);
        if (req.method === 'GET' && req.url === '/api/host-accounts') return send(200, { hosts: [] });
        send(409, refusal);
      });
      cli = cliFor(hostile.url, 'cfk_anything', PASSPHRASE);
    });
    afterAll(() => hostile?.close());

    it('prints no control characters in human output', async () => {
      const target = path.join(work, 'hostile-target');
      const runs = [
        await cli(['list']),
        await cli(['show', id]),
        await cli(['restore', id, target]),
        await cli(['delete', id]),
        await cli(['backup', work]),
      ];
      expect(runs.map((r) => r.code)).toEqual([0, 0, 1, 1, 1]);
      expect(runs[0]!.stdout).toContain('READY\\u{1b}]0;owned');
      expect(runs[1]!.stdout).toMatch(/client: +cli \\u\{1b\}/);
      expect(runs[1]!.stdout).toMatch(/hostapp: +app \\u\{1b\}/);
      expect(runs[2]!.stderr).toContain('do \\u{1b}]0;owned');
      for (const run of runs) {
        expect(run.stdout).not.toMatch(CONTROLS);
        expect(run.stderr).not.toMatch(CONTROLS);
        expect(run.stderr).not.toContain('\u202e');
      }
    });

    it('keeps the exact server strings in --json output', async () => {
      expect(json(await cli(['list', '--json']))).toEqual({ backups: [record] });
      expect(json(await cli(['show', id, '--json']))).toEqual(detail);
      const refused = await cli(['delete', id, '--json']);
      expect(refused.code).toBe(1);
      expect(JSON.parse(refused.stdout)).toEqual(refusal);
      expect(refused.stderr).not.toMatch(CONTROLS);
    });
  });

  describe('interruption (SIGINT, SIGTERM) and restore targets', () => {
    it('refuses a restore target that cannot be created, naming it, instead of spinning', async () => {
      const { cli, apiKey } = await account();
      const { dir } = await dirWith('proc-source', 1000);
      const { id } = json(await cli(['backup', dir, '--json']));
      const target = '/proc/coffer-no-such-dir/target';
      const run = startCli(['restore', id, target], { COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: PASSPHRASE });
      const result = await run.within(BOUND_MS);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`cannot create the restore target ${target}`);
      expect(result.stderr).toMatch(/does not allow creating directories there/);
    });

    it('ends a command waiting on a server that never answers with exit 130 on SIGTERM', async () => {
      let asked: () => void = () => undefined;
      const waiting = new Promise<void>((resolve) => (asked = resolve));
      const silent = await listenHttp(() => asked());
      try {
        const run = startCli(['list'], { COFFER_URL: silent.url, COFFER_API_KEY: 'cfk_anything' });
        await waiting;
        run.kill('SIGTERM');
        const result = await run.within(BOUND_MS);
        expect(result.code).toBe(130);
        expect(result.stderr).toMatch(/interrupted/);
      } finally {
        await silent.close();
      }
    });

    it('SIGTERM in the middle of an upload: exit 130 and the upload slot is deleted', async () => {
      const { apiKey, client } = await account();
      const { dir } = await dirWith('sigterm-backup', 4 * MiB);
      const proxy = await holdingProxy(server.url, 'upload');
      try {
        const run = startCli(['backup', dir], { COFFER_URL: proxy.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: PASSPHRASE });
        const slotId = await proxy.held;
        expect((await client.getBackup(slotId)).status).toBe('PENDING_UPLOAD');
        run.kill('SIGTERM');
        const result = await run.within(BOUND_MS);
        expect(result.code, result.stderr).toBe(130);
        expect(result.stderr).toContain(`deleted the upload slot ${slotId}`);
        expect((await client.listBackups()).backups).toEqual([]);
      } finally {
        await proxy.close();
      }
    });

    it('SIGINT in the middle of a download: exit 130 and nothing is left in the target', async () => {
      const { cli, apiKey } = await account();
      const { dir } = await dirWith('sigint-restore', 2 * MiB);
      const { id } = json(await cli(['backup', dir, '--json']));
      const target = path.join(work, 'sigint-target');
      await fsp.mkdir(target);
      const proxy = await holdingProxy(server.url, 'content');
      try {
        const run = startCli(['restore', id, target], { COFFER_URL: proxy.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: PASSPHRASE });
        await proxy.held;
        // The download starts while the key is derived; the staging directory comes once the key opened the record.
        const staging = async () => (await fsp.readdir(target)).some((name) => name.startsWith('.coffer-restore-'));
        for (let waited = 0; !(await staging()) && waited < BOUND_MS; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
        expect(await staging()).toBe(true);
        run.kill('SIGINT');
        const result = await run.within(BOUND_MS);
        expect(result.code, result.stderr).toBe(130);
        expect(await fsp.readdir(target)).toEqual([]);
      } finally {
        await proxy.close();
      }
    });
  });

  describe('files that change or cannot be read during a backup', () => {
    /** Backs up `dir` through a proxy that holds the upload after its first bytes, runs `change`, then lets it go on. */
    async function backupWhile(dir: string, change: () => Promise<void>) {
      const { apiKey, client } = await account();
      const proxy = await holdingProxy(server.url, 'upload');
      try {
        const run = startCli(['backup', dir], { COFFER_URL: proxy.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: PASSPHRASE });
        await proxy.held;
        // The file is read in 1 MiB steps as the upload drains: held after its first bytes, the backup has read
        // only the start of a 40 MiB file (the buffers between here and the file hold far less).
        await change();
        proxy.release();
        const result = await run.within(BOUND_MS * 3);
        return { result, backups: (await client.listBackups()).backups };
      } finally {
        await proxy.close();
      }
    }

    it('fails on a file that shrinks while it is read, naming it, and stores nothing', async () => {
      const { dir, file } = await dirWith('shrinks', 40 * MiB);
      const { result, backups } = await backupWhile(dir, () => fsp.truncate(file, 3 * MiB));
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`file changed while it was read: ${file}`);
      expect(result.stderr).not.toMatch(/unexpected EOF/);
      expect(backups).toEqual([]);
    });

    it('fails on a file that grows while it is read (instead of storing its old length), and stores nothing', async () => {
      const { dir, file } = await dirWith('grows', 40 * MiB);
      const { result, backups } = await backupWhile(dir, () => fsp.appendFile(file, randomBytes(MiB)));
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`file changed while it was read: ${file}`);
      expect(backups).toEqual([]);
    });

    const setpriv = lacking(isRoot, 'root') || lacking(spawnSync('setpriv', ['--version']).status === 0, 'setpriv');
    it.skipIf(setpriv)('names an unreadable file and says why in words (run as an unprivileged user)', async () => {
      const { apiKey } = await account();
      const dir = path.join(work, 'unreadable');
      await fsp.mkdir(dir, { recursive: true });
      await fsp.writeFile(path.join(dir, 'ok.txt'), 'fine\n');
      const secret = path.join(dir, 'secret.txt');
      await fsp.writeFile(secret, 'private\n');
      await fsp.chmod(secret, 0o000);
      await fsp.chmod(work, 0o755);
      await fsp.chmod(dir, 0o755);
      const nobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', process.execPath];
      const env = { COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: PASSPHRASE, HOME: work };
      const result = await startCli(['backup', dir], env, { command: nobody, cli: cliForAnyUser() }).within(BOUND_MS);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`cannot read ${secret}: permission denied`);
      expect(result.stderr).not.toMatch(/EACCES/);
    });
  });

  describe('refusals in CLI terms, not API terms', () => {
    it('explains a key without the needed permission, a bad key and an unknown backup', async () => {
      const { cli, limited } = await account(['backups:write']);
      const { dir } = await dirWith('scoped', 1000);
      const { id } = json(await cli(['backup', dir, '--json']));

      const cannotList = await cli(['list'], { COFFER_API_KEY: limited });
      expect(cannotList.code).toBe(1);
      expect(cannotList.stderr).toMatch(/this API key is not allowed to read backups.*lacks the backups:read permission/);
      expect(cannotList.stderr).toMatch(/coffer admin keys create --scopes backups:read/);

      const { limited: noRestore } = await account(['backups:read']);
      const cannotRestore = await cli(['restore', id, path.join(work, 'scoped-target')], { COFFER_API_KEY: noRestore });
      expect(cannotRestore.code).toBe(1);

      const badKey = await cli(['list'], { COFFER_API_KEY: `cfk_${'A'.repeat(43)}` });
      expect(badKey.code).toBe(1);
      expect(badKey.stderr).toMatch(/refused the API key.*Set COFFER_API_KEY/);

      const unknown = await cli(['show', '01900000-0000-7000-8000-0000000000ff']);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/no such backup: check the id \(`coffer list` shows your backups\)/);

      for (const run of [cannotList, cannotRestore, badKey, unknown]) expect(run.stderr).not.toMatch(API_TALK);
    });
  });
});
