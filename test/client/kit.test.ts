/**
 * The recovery kit through the real CLI and a real server on loopback (docs/crypto.md §1c): `coffer kit` prints the
 * keyring as BIP-39 words; with the passphrase forgotten, `coffer recover` sets a new one from the kit, and every
 * backup restores with it. A damaged kit, another vault's kit and a kit older than the last rekey change nothing.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { wordlist } from '@scure/bip39/wordlists/english.js';
import jsQRModule from 'jsqr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyMaterialOf, newKey, wipe } from '../../src/client/envelope.js';
import { formatKit } from '../../src/client/kit.js';
import { CofferClient } from '../../src/client/sdk.js';
import { kitQr } from '../../src/cli/commands/kit.js';
import type { TestServer } from '../helpers/server.js';
import { type Cli, cliFor, exists, json, runCli, snapshot, startVault, type VaultFixture } from './helpers.js';

// jsqr is CommonJS whose export is the function itself (and `.default`); its types declare only the default.
const jsQR = jsQRModule.default;

type Rgb = 'black' | 'white';

/**
 * What a terminal shows for `rows` (qrcode's half-block output with its SGR colour codes), as RGBA pixels: each
 * character is one module wide and two high (▀ ▄ █ and space split into top and bottom halves by foreground and
 * background colour), `scale` pixels a module, inside a margin of the terminal's own background. `terminal` gives
 * the default colours (after a reset): light text on dark, or dark on light.
 */
function terminalPixels(rows: string[], terminal: { fg: Rgb; bg: Rgb }, scale = 4, margin = 4) {
  const grid: Rgb[][] = [];
  for (const row of rows) {
    let fg = terminal.fg;
    let bg = terminal.bg;
    const top: Rgb[] = [];
    const bottom: Rgb[] = [];
    // eslint-disable-next-line no-control-regex
    for (const token of row.match(/\x1b\[[0-9;]*m|[^\x1b]/gu) ?? []) {
      if (token.startsWith('\x1b')) {
        for (const code of token.slice(2, -1).split(';').map(Number)) {
          if (code === 0) [fg, bg] = [terminal.fg, terminal.bg];
          else if (code === 30) fg = 'black';
          else if (code === 37) fg = 'white';
          else if (code === 40) bg = 'black';
          else if (code === 47) bg = 'white';
          else throw new Error(`unexpected SGR code ${code}`);
        }
        continue;
      }
      const halves: Record<string, [Rgb, Rgb]> = { ' ': [bg, bg], '█': [fg, fg], '▀': [fg, bg], '▄': [bg, fg] };
      const pair = halves[token];
      if (!pair) throw new Error(`unexpected character ${JSON.stringify(token)} in the QR code`);
      top.push(pair[0]);
      bottom.push(pair[1]);
    }
    grid.push(top, bottom);
  }
  const columns = Math.max(...grid.map((line) => line.length)) + 2 * margin;
  const lines = grid.length + 2 * margin;
  const [width, height] = [columns * scale, lines * scale];
  const data = new Uint8ClampedArray(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const module = grid[Math.floor(y / scale) - margin]?.[Math.floor(x / scale) - margin] ?? terminal.bg;
      data.fill(module === 'black' ? 0 : 255, (y * width + x) * 4, (y * width + x) * 4 + 3);
      data[(y * width + x) * 4 + 3] = 255;
    }
  }
  return { data, width, height };
}

const FORGOTTEN = 'kit-test passphrase, soon forgotten';
const NEW = 'kit-test new passphrase';

describe('recovery kit: a forgotten passphrase replaced with the kit', () => {
  let vault: VaultFixture;
  let server: TestServer;
  let client: CofferClient;
  let apiKey: string;
  let work: string;
  let source: string;
  let owner: Cli;
  let host: Cli;
  let oldKit: string;
  let kit: string;
  const backups: string[] = [];

  async function backup(cli: Cli, env: Record<string, string> = {}) {
    backups.push(await vault.backup(cli, env));
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
    runCli(
      ['recover', ...args],
      { COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_KDF: 'min', COFFER_NEW_PASSPHRASE: NEW, ...env },
      { input },
    );
  async function expectUnchanged(run: () => Promise<{ code: number; stderr: string }>, code: number, pattern: RegExp) {
    const before = await client.getAccount();
    const result = await run();
    expect(result.code, result.stderr).toBe(code);
    expect(result.stderr).toMatch(pattern);
    expect(await client.getAccount()).toEqual(before);
  }

  beforeAll(async () => {
    vault = await startVault('coffer-kit-', FORGOTTEN);
    ({ server, client, apiKey, work, source, owner, host } = vault);
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
    await vault?.stop();
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
    expect(keyLines[1]).toBe(
      oldKit
        .split('\n')
        .find((line) => line.startsWith('key 1: '))!
        .replace('key 1', 'key 2'),
    );
  });

  it('kit --qr: the QR code a terminal shows decodes back to the kit lines, on a dark and on a light terminal', async () => {
    const rows = (await kitQr(kit, true))
      .split('\n')
      .filter((line) => line.startsWith('# \x1b['))
      .map((line) => line.slice(2));
    expect(rows.length).toBeGreaterThan(20);
    const lines = `${kit
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'))
      .join('\n')}\n`;
    for (const terminal of [
      { fg: 'white', bg: 'black' },
      { fg: 'black', bg: 'white' },
    ] as const) {
      const { data, width, height } = terminalPixels(rows, terminal);
      const decoded = jsQR(data, width, height, { inversionAttempts: 'dontInvert' });
      expect(decoded?.data, `${terminal.bg} terminal`).toBe(lines);
    }
  });

  it('kit --qr into a pipe or a file: no escape code at all, and the QR is plain text that decodes printed black on white', async () => {
    // The real CLI with stdout a pipe, as `coffer kit --qr > kit.txt` or `| lpr` gives it.
    const printed = await owner(['kit', '--qr']);
    expect(printed.code, printed.stderr).toBe(0);
    expect(printed.stdout).not.toContain('\x1b');
    // The words come first, as without --qr; the QR rows are comment lines, so the whole output is still a kit.
    expect(printed.stdout.startsWith(kit)).toBe(true);
    const rows = printed.stdout
      .split('\n')
      .filter((line) => /^# [ █▀▄]+$/u.test(line) && /[█▀▄]/u.test(line))
      .map((line) => line.slice(2));
    expect(rows.length).toBeGreaterThan(20);
    const lines = `${kit
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'))
      .join('\n')}\n`;
    const { data, width, height } = terminalPixels(rows, { fg: 'black', bg: 'white' });
    expect(jsQR(data, width, height, { inversionAttempts: 'dontInvert' })?.data).toBe(lines);
    // What the scan gives is a kit `coffer restore --kit-file` reads, and so is the printed output itself.
    const scanned = path.join(work, 'scanned-kit.txt');
    await fsp.writeFile(scanned, lines);
    const printedFile = path.join(work, 'printed-kit.txt');
    await fsp.writeFile(printedFile, printed.stdout);
    for (const file of [scanned, printedFile]) {
      const target = path.join(work, `qr-restored-${path.basename(file)}`);
      const result = await runCli(['restore', backups[0]!, target, '--kit-file', file], { COFFER_URL: server.url, COFFER_API_KEY: apiKey });
      expect(result.code, result.stderr).toBe(0);
      expect(await snapshot(target)).toEqual(await snapshot(source));
    }
  });

  it('kit --qr refuses a kit too long for one QR code, naming the way out (the printed words)', async () => {
    const keys = Array.from({ length: 20 }, () => newKey());
    const material = keyMaterialOf(keys);
    try {
      await expect(kitQr(formatKit(material, server.url), false)).rejects.toThrow(
        /the kit is too long for one QR code .*keep the printed words instead/,
      );
    } finally {
      wipe(material, ...keys);
    }
  });

  it('restore --kit-file: every backup restores with the kit alone (no passphrase anywhere), same safety rules', async () => {
    const file = path.join(work, 'restore-kit.txt');
    await fsp.writeFile(file, kit);
    // Only the server and the API key: no COFFER_PASSPHRASE, no file, stdin a closed pipe (a prompt would fail).
    const withKit = (args: string[], input?: string) =>
      runCli(['restore', ...args], { COFFER_URL: server.url, COFFER_API_KEY: apiKey }, { input });
    for (const id of backups) {
      const target = path.join(work, `kit-restored-${id}`);
      const result = await withKit([id, target, '--kit-file', file]);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toMatch(/final tag and SHA-256 verified/);
      expect(await snapshot(target)).toEqual(await snapshot(source));
    }
    const viaStdin = path.join(work, 'kit-restored-stdin');
    expect((await withKit([backups[0]!, viaStdin, '--kit-file', '-'], kit)).code).toBe(0);
    // A non-empty target is refused (exit 1, as with the passphrase) before anything is read or written.
    const busy = path.join(work, 'kit-busy');
    await fsp.mkdir(busy);
    await fsp.writeFile(path.join(busy, 'keep.txt'), 'mine');
    const refused = await withKit([backups[0]!, busy, '--kit-file', file]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/not empty/);
    expect(await fsp.readdir(busy)).toEqual(['keep.txt']);
    // A kit printed before the rekey does not hold the key of the newest backup: integrity failure, nothing written.
    const oldFile = path.join(work, 'old-kit.txt');
    await fsp.writeFile(oldFile, oldKit);
    const newest = path.join(work, 'kit-old-newest');
    const tooOld = await withKit([backups[2]!, newest, '--kit-file', oldFile]);
    expect(tooOld.code, tooOld.stderr).toBe(4);
    expect(tooOld.stderr).toMatch(/integrity check failed/);
    expect(exists(newest)).toBe(false);
    // It still restores a backup made before the rekey (reading changes nothing), and says it is an old kit.
    const older = path.join(work, 'kit-old-older');
    const fromOld = await withKit([backups[0]!, older, '--kit-file', oldFile]);
    expect(fromOld.code, fromOld.stderr).toBe(0);
    expect(fromOld.stderr).toMatch(
      /this kit \(recipient [0-9a-f-]{19}\) is from before a rekey of its vault.* It reads that vault's backups made before the rekey, not the newer ones/s,
    );
    expect(await snapshot(older)).toEqual(await snapshot(source));
    // A damaged kit, and a kit together with a passphrase file: usage errors, nothing written.
    await fsp.writeFile(path.join(work, 'damaged-kit.txt'), kit.replace(/key 1: (\S+)/, 'key 1: zzzz'));
    const damaged = await withKit([backups[0]!, path.join(work, 'kit-damaged'), '--kit-file', path.join(work, 'damaged-kit.txt')]);
    expect(damaged.code).toBe(2);
    expect(damaged.stderr).toMatch(/invalid recovery kit: line \d+ \(key 1\): word 1 "zzzz"/);
    expect(exists(path.join(work, 'kit-damaged'))).toBe(false);
    const both = await withKit([backups[0]!, path.join(work, 'kit-both'), '--kit-file', file, '--passphrase-file', file]);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--kit-file and --passphrase-file exclude each other/);
  });

  it('a mistyped word, a wrong word count or no kit at all: exit 2, nothing changed', async () => {
    const lines = kit.split('\n');
    const at = lines.findIndex((line) => line.startsWith('key 1: '));
    const words = lines[at]!.slice('key 1: '.length).split(' ');
    // The last word's low 8 bits are the checksum: flipping one always breaks it, whatever the key.
    const swapped = [...words];
    swapped[23] = wordlist[wordlist.indexOf(words[23]!) ^ 1]!;
    const withLine = (line: string) => lines.map((l, i) => (i === at ? line : l)).join('\n');
    await expectUnchanged(
      () => recover([], withLine(`key 1: ${['zzzz', ...words.slice(1)].join(' ')}`)),
      2,
      /word 1 "zzzz" is not a BIP-39 English word/,
    );
    await expectUnchanged(() => recover([], withLine(`key 1: ${swapped.join(' ')}`)), 2, /checksum does not match/);
    await expectUnchanged(() => recover([], withLine(`key 1: ${words.slice(1).join(' ')}`)), 2, /has 23 words, not 24/);
    await expectUnchanged(() => recover([], 'hello'), 2, /not a Coffer recovery kit/);
    await expectUnchanged(() => recover(['--kit-file', path.join(work, 'missing.txt')]), 2, /cannot read --kit-file/);
  });

  it('the reading rules (§1c): case, white space, CRLF and comments accepted; anything else refused, exit 2, nothing changed', async () => {
    const lines = kit.split('\n');
    const keyLine = (n: number) => lines.find((line) => line.startsWith(`key ${n}: `))!;
    const header = lines.find((line) => line === 'coffer recovery kit v1')!;
    const serverLine = lines.find((line) => line.startsWith('server: '))!;
    const recipientLine = lines.find((line) => line.startsWith('recipient: '))!;
    // Accepted: upper case, white space around lines and between words (tabs too), CRLF, comments and blank lines
    // anywhere, server/recipient after the keys. Read-only: restore with it.
    const loose = [
      '\uFEFF# a comment before the header',
      '',
      `  ${header.toUpperCase()}  `,
      '   # an indented comment',
      `KEY 1:\t${keyLine(1).slice('key 1: '.length).toUpperCase().split(' ').join(' \t ')}  `,
      `Key 2:   ${keyLine(2).slice('key 2: '.length)}`,
      '',
      recipientLine.toUpperCase(),
      serverLine,
    ].join('\r\n');
    const target = path.join(work, 'kit-loose');
    const read = await runCli(
      ['restore', backups[0]!, target, '--kit-file', '-'],
      { COFFER_URL: server.url, COFFER_API_KEY: apiKey },
      { input: loose },
    );
    expect(read.code, read.stderr).toBe(0);
    expect(await snapshot(target)).toEqual(await snapshot(source));
    // Refused, each naming its reason.
    const refused: [string[], RegExp][] = [
      [[keyLine(1), header, keyLine(2)], /not a Coffer recovery kit: its first line must be "coffer recovery kit v1"/],
      [['coffer  recovery kit v1', keyLine(1), keyLine(2)], /not a Coffer recovery kit/],
      [[header, keyLine(2), keyLine(1)], /line 2: expected "key 1:", found "key 2:"/],
      [[header, keyLine(1), keyLine(2).replace('key 2', 'key 3')], /line 3: expected "key 2:", found "key 3:"/],
      [[header, keyLine(1).replace('key 1:', 'key 1 :'), keyLine(2)], /line 2 is not "server:", "recipient:" or "key <n>:"/],
      [[header, keyLine(1).replace('key 1:', 'key  1:'), keyLine(2)], /line 2 is not "server:", "recipient:" or "key <n>:"/],
      [[header, 'note: printed on paper', keyLine(1), keyLine(2)], /line 2: expected "key 1:", found "note:"/],
      [[header, recipientLine, recipientLine, keyLine(1), keyLine(2)], /line 3: a second "recipient:" line/],
      [[header, serverLine, keyLine(1), serverLine, keyLine(2)], /line 4: a second "server:" line/],
      [[header, serverLine, recipientLine], /the kit holds no key line/],
      [[header, recipientLine, keyLine(2).replace('key 2', 'key 1')], /the kit's keys do not give its recipient/],
    ];
    for (const [kitLines, message] of refused) {
      await expectUnchanged(() => recover([], kitLines.join('\n')), 2, message);
    }
  });

  it("another vault's kit opens no backup: exit 4, nothing changed", async () => {
    const other = await server.newKey({ plan: 'pro' });
    const stranger = cliFor(server.url, other.apiKey, 'someone else');
    expect((await stranger(['init'])).code).toBe(0);
    const foreign = (await stranger(['kit'])).stdout;
    await expectUnchanged(() => recover([], foreign), 4, /the kit opens none of the 3 backups/);
  });

  it('a kit printed before the last rekey: refused where the rekey was seen; elsewhere it opens only the older backups', async () => {
    // This machine saw the newer key (its state directory remembers it): the old kit is refused outright, even forced.
    await expectUnchanged(
      () => recover(['--force'], oldKit),
      4,
      /the kit lacks the newest vault key this machine has seen.*a kit printed before a rekey.*print a new kit after every rekey/s,
    );
    // A machine that never saw it (a fresh state directory) still finds that the kit opens only the older backups.
    const elsewhere = { XDG_STATE_HOME: path.join(work, 'state-of-another-machine') };
    await expectUnchanged(() => recover([], oldKit, elsewhere), 1, /the kit opens 2 of 3 backups.*--force/s);
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
