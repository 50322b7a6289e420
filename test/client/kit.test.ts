/**
 * The recovery kit through the real CLI and a real server on loopback (docs/crypto.md §1c): `coffer kit` prints the
 * keyring as BIP-39 words; with the passphrase forgotten, `coffer recover` sets a new one from the kit, and every
 * backup restores with it. A damaged kit, another vault's kit and a kit older than the last rekey change nothing.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { wordlist } from '@scure/bip39/wordlists/english.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CofferClient } from '../../src/client/sdk.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, makeTree, runCli, snapshot } from './helpers.js';

const FORGOTTEN = 'kit-test passphrase, soon forgotten';
const NEW = 'kit-test new passphrase';

describe('recovery kit: a forgotten passphrase replaced with the kit', () => {
  let server: TestServer;
  let clock: ManualClock;
  let client: CofferClient;
  let apiKey: string;
  let work: string;
  let source: string;
  let owner: ReturnType<typeof cliFor>;
  let host: ReturnType<typeof cliFor>;
  let oldKit: string;
  let kit: string;
  const backups: string[] = [];

  const nextSlotAllowed = () => clock.advance(31 * 60 * 1000); // pro plan: one backup per 30 minutes
  async function backup(cli: ReturnType<typeof cliFor>, env: Record<string, string> = {}) {
    const detail = json(await cli(['backup', source, '--json'], env));
    nextSlotAllowed();
    backups.push(detail.id);
  }
  let restores = 0;
  async function restore(id: string, passphrase: string) {
    const target = path.join(work, `restored-${(restores += 1)}`);
    const result = await owner(['restore', id, target], { COFFER_PASSPHRASE: passphrase });
    if (result.code === 0) expect(await snapshot(target)).toEqual(await snapshot(source));
    return result;
  }
  /** `coffer recover` as someone who no longer has the passphrase. */
  const recover = (args: string[], input?: string, env: Record<string, string> = {}) =>
    runCli(['recover', ...args], { COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_KDF: 'min', COFFER_NEW_PASSPHRASE: NEW, ...env }, { input });
  async function expectUnchanged(run: () => Promise<{ code: number; stderr: string }>, code: number, pattern: RegExp) {
    const before = await client.getAccount();
    const result = await run();
    expect(result.code, result.stderr).toBe(code);
    expect(result.stderr).toMatch(pattern);
    expect(await client.getAccount()).toEqual(before);
  }

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    ({ apiKey } = await server.newKey({ plan: 'pro' }));
    client = new CofferClient({ baseUrl: server.url, apiKey });
    work = tempDir('coffer-kit-');
    source = path.join(work, 'source');
    await makeTree(source);
    owner = cliFor(server.url, apiKey, FORGOTTEN);
    host = cliFor(server.url, apiKey, undefined);
    expect((await owner(['init'])).code).toBe(0);
    const { recipient } = json(await owner(['recipient', '--json']));
    await backup(owner);
    await backup(host, { COFFER_RECIPIENT: recipient });
    const printed = await owner(['kit']);
    expect(printed.code, printed.stderr).toBe(0);
    oldKit = printed.stdout;
    expect((await owner(['rekey'])).code).toBe(0);
    await backup(owner);
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('`coffer kit` prints one line of 24 words per key, current first, and warns on stderr', async () => {
    const printed = await owner(['kit']);
    expect(printed.code, printed.stderr).toBe(0);
    kit = printed.stdout;
    expect(printed.stderr).toMatch(/whoever holds this kit can read every backup/);
    expect(kit).toMatch(/^# .*whoever holds this kit can read every backup/im);
    expect(kit).toContain(`\ncoffer recovery kit v1\nserver: ${server.url}\nrecipient: `);
    const keyLines = kit.split('\n').filter((line) => line.startsWith('key '));
    expect(keyLines.map((line) => line.split(':')[0])).toEqual(['key 1', 'key 2']);
    for (const line of keyLines) expect(line.split(': ')[1]!.split(' ')).toHaveLength(24);
    // The key printed before the rekey is now the second one.
    expect(keyLines[1]).toBe(oldKit.split('\n').find((line) => line.startsWith('key 1: '))!.replace('key 1', 'key 2'));
  });

  it('a mistyped word, a wrong word count or no kit at all: exit 2, nothing changed', async () => {
    const lines = kit.split('\n');
    const at = lines.findIndex((line) => line.startsWith('key 1: '));
    const words = lines[at]!.slice('key 1: '.length).split(' ');
    // The last word's low 8 bits are the checksum: flipping one always breaks it, whatever the key.
    const swapped = [...words];
    swapped[23] = wordlist[wordlist.indexOf(words[23]!) ^ 1]!;
    const withLine = (line: string) => lines.map((l, i) => (i === at ? line : l)).join('\n');
    await expectUnchanged(() => recover([], withLine(`key 1: ${['zzzz', ...words.slice(1)].join(' ')}`)), 2, /word 1 "zzzz" is not a BIP-39 English word/);
    await expectUnchanged(() => recover([], withLine(`key 1: ${swapped.join(' ')}`)), 2, /checksum does not match/);
    await expectUnchanged(() => recover([], withLine(`key 1: ${words.slice(1).join(' ')}`)), 2, /has 23 words, not 24/);
    await expectUnchanged(() => recover([], 'hello'), 2, /not a Coffer recovery kit/);
    await expectUnchanged(() => recover(['--kit-file', path.join(work, 'missing.txt')]), 2, /cannot read --kit-file/);
  });

  it("another vault's kit opens no backup: exit 4, nothing changed", async () => {
    const other = await server.newKey({ plan: 'pro' });
    const stranger = cliFor(server.url, other.apiKey, 'someone else');
    expect((await stranger(['init'])).code).toBe(0);
    const foreign = (await stranger(['kit'])).stdout;
    await expectUnchanged(() => recover([], foreign), 4, /the kit opens none of the 3 backups/);
  });

  it('a kit printed before the last rekey opens only the older backups: refused without --force', async () => {
    await expectUnchanged(() => recover([], oldKit), 1, /the kit opens 2 of 3 backups.*--force/s);
  });

  it('forgotten passphrase → kit file → recover → every backup restores with the new passphrase, the old one fails', async () => {
    const file = path.join(work, 'kit.txt');
    await fsp.writeFile(file, kit);
    const result = await recover(['--kit-file', file]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/the kit \(2 keys\) opened 3 of 3 backups/);
    for (const id of backups) expect((await restore(id, NEW)).code).toBe(0);
    expect((await restore(backups[0]!, FORGOTTEN)).code).toBe(4);
  });

  it('the kit also comes on stdin; with no backup to check against, only with --force', async () => {
    const other = await server.newKey({ plan: 'pro' });
    const alone = cliFor(server.url, other.apiKey, 'empty vault');
    expect((await alone(['init'])).code).toBe(0);
    const emptyKit = (await alone(['kit'])).stdout;
    const otherClient = new CofferClient({ baseUrl: server.url, apiKey: other.apiKey });
    const env = { COFFER_API_KEY: other.apiKey };
    const refused = await recover([], emptyKit, env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/no backup to check the kit against/);
    const before = await otherClient.getAccount();
    const forced = await recover(['--force', '--json'], emptyKit, env);
    expect(json(forced)).toMatchObject({ rotated: true, opened: 0, checked: 0 });
    expect((await otherClient.getAccount()).wrappedMasterKey).not.toBe(before.wrappedMasterKey);
    expect((await alone(['recipient'], { COFFER_PASSPHRASE: NEW })).code).toBe(0);
  });
});
