/**
 * The history chain (docs/crypto.md §3a). Through the real CLI and a real server: a profile's backups carry
 * links in their sealed metadata, and `coffer list --chain` (passphrase or kit) reports a backup the server hides
 * (deleted behind the client's back) as a gap, the newest ones hidden as a rollback, and exits 4; an intact chain
 * exits 0. The pure check (checkChains) on hand-made entries is in test/rules/chain.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, makeTree, ROOT, runCli } from './helpers.js';

const PASSPHRASE = 'chain-test passphrase';
const DAY = 86_400_000;
/** Tests that spawn many CLI processes: a bound against hangs on a loaded machine, not a timing check. */
const MANY_CLIS = 120_000;

describe('coffer list --chain against a server that hides backups', () => {
  let server: TestServer;
  let clock: ManualClock;
  let work: string;
  let env: Record<string, string>;
  let owner: ReturnType<typeof cliFor>;
  const ids: string[] = [];

  const coffer = (args: string[], more: Record<string, string> = {}) => runCli(args, { ...env, ...more });
  const hide = (id: string) =>
    server.parts.stores.backups.updateBackup(id, { statuses: ['READY'] }, { status: 'DELETED', deletedAt: clock.now() });
  const unhide = (id: string) =>
    server.parts.stores.backups.updateBackup(id, { statuses: ['DELETED'] }, { status: 'READY', deletedAt: null });

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock(Date.now());
    server = await startTestServer({ clock });
    const { apiKey } = await server.newKey({ plan: 'free' });
    work = tempDir('coffer-chain-');
    const source = path.join(work, 'source');
    await makeTree(source);
    env = {
      XDG_CONFIG_HOME: path.join(work, 'config'),
      XDG_STATE_HOME: path.join(work, 'state'),
      COFFER_PASSPHRASE: PASSPHRASE,
      COFFER_KDF: 'min',
    };
    owner = cliFor(server.url, apiKey, PASSPHRASE, { XDG_CONFIG_HOME: path.join(work, 'none'), XDG_STATE_HOME: path.join(work, 'none') });
    expect((await owner(['init'])).code).toBe(0);
    const keyFile = path.join(work, 'key');
    fs.writeFileSync(keyFile, apiKey, { mode: 0o600 });
    expect((await coffer(['profile', 'add', 'host', '--url', server.url, '--api-key-file', keyFile, '--path', source])).code).toBe(0);
    // One backup made without a profile (no chain), then four of the profile, a day apart (the free plan's cadence).
    expect((await owner(['backup', source])).code).toBe(0);
    for (let i = 0; i < 4; i++) {
      clock.advance(DAY + 1000);
      const made = await coffer(['backup', source, '--json']);
      expect(made.code, made.stderr).toBe(0);
      ids.push(json(made).id);
    }
  }, MANY_CLIS);
  afterAll(() => server?.stop());

  it('an intact chain: exit 0, one chain #1-#4 known to this host, the profile-less backup outside it', async () => {
    const result = await coffer(['list', '--chain']);
    expect(result.code, result.stderr).toBe(0);
    const verified = await coffer(['verify', '--all']);
    expect(verified.code, verified.stderr).toBe(0);
    expect(verified.stdout).toMatch(/5 verified, 0 failed[\s\S]*chain [0-9a-f]{8}: 4 backups, #1-#4; this host made #4: ok/);
    expect(result.stdout).toMatch(/chain [0-9a-f]{8}: 4 backups, #1-#4; this host made #4: ok/);
    expect(result.stdout).toContain('1 backup was made without a profile');
    const report = json(await coffer(['list', '--chain', '--json'])).chains;
    expect(report.findings).toEqual([]);
    expect(report.chains).toEqual([
      expect.objectContaining({ backups: 4, firstSeq: 1, lastSeq: 4, headBackupId: ids[3], localSeq: 4, ok: true }),
    ]);
    // Without this host's state (another machine, with the passphrase): the same chain, nothing to compare the head with.
    const elsewhere = await owner(['list', '--chain', '--json']);
    expect(json(elsewhere).chains.chains[0]).toMatchObject({ lastSeq: 4, localSeq: null, ok: true });
  });

  it(
    "a backup deleted behind the client's back is a gap; the newest hidden is a rollback; both exit 4",
    async () => {
      await hide(ids[1]!);
      try {
        const result = await coffer(['list', '--chain']);
        expect(result.code).toBe(4);
        expect(result.stdout).toContain(`gap: chain`);
        expect(result.stdout).toContain(`backup #2 is missing between ${ids[0]} (#1) and ${ids[2]} (#3)`);
        expect(result.stderr).toContain("the history chains show 1 problem the server's list does not explain");
        // coffer verify --all checks the chains of what it verified too, with each link's ciphertext SHA-256.
        const verified = await coffer(['verify', '--all', '--json']);
        expect(verified.code).toBe(4);
        const verifiedReport = JSON.parse(verified.stdout);
        expect(verifiedReport.failed).toBe(0);
        expect(verifiedReport.chains.findings).toEqual([expect.objectContaining({ kind: 'gap', missing: { from: 2, to: 2 } })]);
        // The same with the recovery kit instead of the passphrase, on a machine without the host's state.
        const kit = await owner(['kit']);
        const kitFile = path.join(work, 'kit.txt');
        fs.writeFileSync(kitFile, kit.stdout, { mode: 0o600 });
        const withKit = await owner(['list', '--chain', '--kit-file', kitFile, '--json'], { COFFER_PASSPHRASE: undefined });
        expect(withKit.code).toBe(4);
        expect(JSON.parse(withKit.stdout).chains.findings).toEqual([
          expect.objectContaining({ kind: 'gap', missing: { from: 2, to: 2 }, after: ids[0], before: ids[2] }),
        ]);
      } finally {
        await unhide(ids[1]!);
      }

      await hide(ids[3]!);
      await hide(ids[2]!);
      try {
        // Only the host knows: its state says #4 was made, the server lists #2 as the newest.
        const result = await coffer(['list', '--chain', '--json']);
        expect(result.code).toBe(4);
        expect(JSON.parse(result.stdout).chains.findings).toEqual([
          expect.objectContaining({ kind: 'rollback', newestListed: 2, expected: 4 }),
        ]);
        expect(json(await owner(['list', '--chain', '--json'])).chains.findings).toEqual([]); // elsewhere: undetectable
        // The host's own agent run sees it too, without decrypting anything (its key may list): a warning.
        const run = await coffer(['run']);
        expect(run.code, run.stderr).toBe(0);
        expect(run.stderr).toContain(`warning: the server no longer lists this profile's last backup ${ids[3]} (#4 of its history chain)`);
        // All of the chain hidden: the profile's own head is missing altogether.
        await hide(ids[1]!);
        await hide(ids[0]!);
        const none = await coffer(['list', '--chain', '--json']);
        expect(none.code).toBe(4);
        expect(JSON.parse(none.stdout).chains.findings).toEqual([
          expect.objectContaining({ kind: 'rollback', newestListed: 0, expected: 4 }),
        ]);
      } finally {
        for (const id of ids) await unhide(id).catch(() => undefined);
      }
      expect((await coffer(['list', '--chain'])).code).toBe(0);
    },
    MANY_CLIS,
  );
});

describe('a server that back-dates its finalize answers cannot make a hidden backup look expired', () => {
  let server: TestServer;
  let clock: ManualClock;
  let work: string;
  let env: Record<string, string>;
  const ids: string[] = [];
  /** The host's clock around the last backup: the head's createdAt is between them. */
  let lastMadeAfter = 0;
  let lastMadeBefore = 0;
  const coffer = (args: string[]) => runCli(args, env);
  const hide = (id: string) =>
    server.parts.stores.backups.updateBackup(id, { statuses: ['READY'] }, { status: 'DELETED', deletedAt: clock.now() });

  beforeAll(async () => {
    assertBuilt();
    // The server's clock (and so every createdAt it answers) is 100 days behind the host's.
    clock = new ManualClock(Date.now() - 100 * DAY);
    server = await startTestServer({ clock });
    const { apiKey } = await server.newKey({ plan: 'free' });
    work = tempDir('coffer-chain-skew-');
    const source = path.join(work, 'source');
    await makeTree(source);
    env = {
      XDG_CONFIG_HOME: path.join(work, 'config'),
      XDG_STATE_HOME: path.join(work, 'state'),
      COFFER_PASSPHRASE: PASSPHRASE,
      COFFER_KDF: 'min',
    };
    const owner = cliFor(server.url, apiKey, PASSPHRASE, {
      XDG_CONFIG_HOME: path.join(work, 'none'),
      XDG_STATE_HOME: path.join(work, 'none'),
    });
    expect((await owner(['init'])).code).toBe(0);
    const keyFile = path.join(work, 'key');
    fs.writeFileSync(keyFile, apiKey, { mode: 0o600 });
    expect((await coffer(['profile', 'add', 'host', '--url', server.url, '--api-key-file', keyFile, '--path', source])).code).toBe(0);
    for (let i = 0; i < 3; i++) {
      clock.advance(DAY + 1000);
      lastMadeAfter = Date.now();
      const made = await coffer(['backup', source, '--json']);
      lastMadeBefore = Date.now();
      expect(made.code, made.stderr).toBe(0);
      // The answer far from the host's clock is flagged at once.
      expect(made.stderr).toMatch(/warning: the server says backup [0-9a-f-]+ was created at .* before this host's clock/);
      ids.push(json(made).id);
    }
  }, MANY_CLIS);
  afterAll(() => server?.stop());

  it('the state file is exactly as docs/crypto.md "The chain state file" documents it: the host\'s clock, not the server\'s', async () => {
    const doc = fs.readFileSync(path.join(ROOT, 'docs/crypto.md'), 'utf8');
    const section = doc.slice(doc.indexOf('<!-- chain-state-file'), doc.indexOf('<!-- end chain-state-file -->'));
    const example = JSON.parse(/```json\n([\s\S]*?)\n```/.exec(section)![1]!) as Record<string, unknown>;
    // The documented rule for createdAt, in the one section that specifies the file.
    expect(section).toMatch(/`createdAt`\s+the host's own clock when the backup reached READY/);
    expect(section).not.toMatch(/the server's\s+`createdAt` from the finalize answer, as given/);
    const file = path.join(work, 'state', 'coffer', 'chains', 'host.json');
    const text = fs.readFileSync(file, 'utf8');
    const head = JSON.parse(text) as Record<string, unknown>;
    expect(Object.keys(head).sort()).toEqual(Object.keys(example).sort());
    expect(text).toBe(`${JSON.stringify(head, null, 2)}\n`);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(head).toMatchObject({ version: 1, seq: 3, backupId: ids[2] });
    const recorded = Date.parse(head.createdAt as string);
    expect(recorded).toBeGreaterThanOrEqual(lastMadeAfter);
    expect(recorded).toBeLessThanOrEqual(lastMadeBefore);
    const server = (await runCli(['show', ids[2]!, '--json'], env)).stdout;
    expect(Date.parse(JSON.parse(server).createdAt)).toBeLessThan(recorded - 90 * DAY); // the server's answer, 100 days back
  });

  it(
    "links carry the host's time: #1-#2 hidden is a gap (exit 4), not expiry",
    async () => {
      await hide(ids[0]!);
      await hide(ids[1]!);
      const result = await coffer(['list', '--chain', '--json']);
      expect(result.code, result.stdout).toBe(4);
      expect(JSON.parse(result.stdout).chains.findings).toEqual([expect.objectContaining({ kind: 'gap', missing: { from: 1, to: 2 } })]);
      const verified = await coffer(['verify', '--all', '--json']);
      expect(verified.code).toBe(4);
      expect(JSON.parse(verified.stdout).chains.findings).toEqual([expect.objectContaining({ kind: 'gap', missing: { from: 1, to: 2 } })]);
    },
    MANY_CLIS,
  );
});
