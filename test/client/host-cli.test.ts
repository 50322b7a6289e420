/**
 * A backup host's CLI through the real `coffer` built in dist/ (docs/client.md#from-a-fresh-host-to-a-scheduled-notified-verified-backup):
 * restore refuses on a host instead of inviting the passphrase there, the host advice is printed only when it
 * applies, and scheduling on a machine without a systemd user session (this one, like a container) explains
 * itself, keeps no unit file, and prints a crontab line whose step is the one it names.
 */
import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { deriveRecipient, newKey } from '../../src/client/envelope.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, runCli } from './helpers.js';

const recipient = deriveRecipient(newKey()).text;
const ADVICE = 'use a write-only append-only API key';

describe('a backup host (a recipient, no passphrase)', () => {
  let work: string;
  beforeAll(() => {
    assertBuilt();
    work = tempDir('coffer-host-cli-');
  });

  function host(name: string) {
    const dir = path.join(work, name);
    fs.mkdirSync(dir, { recursive: true });
    const keyFile = path.join(dir, 'key');
    fs.writeFileSync(keyFile, `cfk_${'a'.repeat(43)}\n`, { mode: 0o600 });
    const env = { XDG_CONFIG_HOME: path.join(dir, 'config'), XDG_STATE_HOME: path.join(dir, 'state') };
    const add = (extra: string[]) =>
      runCli(['profile', 'add', name, '--url', 'http://127.0.0.1:9', '--api-key-file', keyFile, '--path', dir, ...extra], env);
    return { env, dir, add };
  }

  it('coffer restore refuses and says where restores happen, never asking for the passphrase here', async () => {
    const h = host('restore');
    expect((await h.add(['--recipient', recipient])).code).toBe(0);
    const target = path.join(h.dir, 'out');
    const result = await runCli(['restore', 'bk_x', target], h.env);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('this is a backup host');
    expect(result.stderr).toContain('--kit-file');
    expect(result.stderr).not.toContain('COFFER_PASSPHRASE');
    expect(fs.existsSync(target)).toBe(false);
  });

  it('profile add prints the host advice only for a profile without a recipient', async () => {
    const withRecipient = await host('advice-recipient').add(['--recipient', recipient]);
    expect(withRecipient.code, withRecipient.stderr).toBe(0);
    expect(withRecipient.stderr).not.toContain(ADVICE);
    const without = await host('advice-none').add([]);
    expect(without.code, without.stderr).toBe(0);
    expect(without.stderr).toContain(ADVICE);
  });

  it('without a systemd user session: install explains and keeps no unit file, status explains, --cron agrees with its words', async () => {
    const h = host('nosystemd');
    expect((await h.add(['--recipient', recipient])).code).toBe(0);
    const units = path.join(h.env.XDG_CONFIG_HOME, '..', 'systemd', 'user');
    const install = await runCli(['schedule', 'install', '--interval', '30m'], h.env);
    expect(install.code).toBe(1);
    expect(install.stderr).toContain('no systemd user session here');
    expect(install.stderr).toContain('--cron');
    expect(install.stderr).not.toContain(ADVICE);
    expect(fs.existsSync(units) ? fs.readdirSync(units) : []).toEqual([]);

    // Units written without enabling them (--no-enable): status explains instead of systemctl's bus error.
    expect((await runCli(['schedule', 'install', '--interval', '30m', '--no-enable'], h.env)).code).toBe(0);
    const status = await runCli(['schedule', 'status'], h.env);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('no systemd user session here');
    expect(status.stdout).not.toMatch(/Failed to connect to bus/);

    for (const [interval, when, words] of [
      ['30m', '*/6 * * * *', '6 minutes'],
      ['4h', ' */1 * * *', '1 hour'],
      ['1d', ' */6 * * *', '6 hours'],
    ] as const) {
      const cron = await runCli(['schedule', 'install', '--interval', interval, '--cron'], h.env);
      expect(cron.code, cron.stderr).toBe(0);
      expect(cron.stdout).toContain(when);
      expect(cron.stderr).toContain(`it looks every ${words} whether`);
    }
  });
});
