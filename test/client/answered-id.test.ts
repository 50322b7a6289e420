/**
 * A hostile server answers another backup than the one asked for. A proxy on loopback in front of the real
 * server sends every request about backup B to backup A (an older one of the same vault), optionally relabelling
 * A's detail with B's id. `coffer restore B` and `coffer show B --metadata` must refuse with exit 4, never
 * restore or show A in B's place.
 */
import http from 'node:http';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, exists, json, listenHttp } from './helpers.js';

const PASSPHRASE = 'answered-id passphrase';

/** Forwards to `upstream`, sending requests about `asked` to `answered`; `relabel` also puts `asked` back into the JSON. */
async function startSwappingProxy(upstream: string, swap: { asked: string; answered: string; relabel: boolean }) {
  const target = new URL(upstream);
  const handler: http.RequestListener = (req, res) => {
    const swapped = req.url!.startsWith(`/api/backups/${swap.asked}`);
    const forward = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: swapped ? req.url!.replace(swap.asked, swap.answered) : req.url,
        headers: { ...req.headers, host: target.host },
      },
      (answer) => {
        const isJson = String(answer.headers['content-type']).startsWith('application/json');
        if (!(swapped && swap.relabel && isJson)) {
          res.writeHead(answer.statusCode!, answer.headers);
          answer.pipe(res);
          return;
        }
        const parts: Buffer[] = [];
        answer.on('data', (part: Buffer) => parts.push(part));
        answer.on('end', () => {
          const body = Buffer.from(Buffer.concat(parts).toString('utf8').replaceAll(swap.answered, swap.asked));
          res.writeHead(answer.statusCode!, { ...answer.headers, 'content-length': String(body.length) });
          res.end(body);
        });
      },
    );
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  };
  return listenHttp(handler);
}

describe('the CLI binds every unwrap, metadata open and download to the backup id it asked for', () => {
  let server: TestServer;
  let work: string;
  let apiKey: string;
  let older: string;
  let newer: string;
  const proxies: { close(): Promise<void> }[] = [];

  beforeAll(async () => {
    assertBuilt();
    const clock = new ManualClock();
    server = await startTestServer({ clock });
    ({ apiKey } = await server.newKey({ plan: 'pro' }));
    work = tempDir('coffer-answered-id-');
    const cli = cliFor(server.url, apiKey, PASSPHRASE);
    expect((await cli(['init'])).code).toBe(0);
    const ids: string[] = [];
    for (const name of ['older', 'newer']) {
      const source = path.join(work, `source-${name}`);
      await fsp.mkdir(source);
      await fsp.writeFile(path.join(source, 'which.txt'), `${name}\n`);
      ids.push(json(await cli(['backup', source, '--name', name, '--json'])).id);
      clock.advance(31 * 60 * 1000); // pro plan: one backup per 30 minutes
    }
    [older, newer] = ids as [string, string];
  });

  afterAll(async () => {
    for (const proxy of proxies) await proxy.close();
    await server?.stop();
    if (work) await fsp.rm(work, { recursive: true, force: true });
  });

  async function cliBehind(relabel: boolean) {
    const proxy = await startSwappingProxy(server.url, { asked: newer, answered: older, relabel });
    proxies.push(proxy);
    return cliFor(proxy.url, apiKey, PASSPHRASE);
  }

  it('the proxy passes other backups through (control)', async () => {
    const target = path.join(work, 'control');
    const result = await (await cliBehind(false))(['restore', older, target]);
    expect(result.code, result.stderr).toBe(0);
    expect(await fsp.readFile(path.join(target, 'which.txt'), 'utf8')).toBe('older\n');
  });

  it('restore refuses a server that answers an older backup (its own id in the detail)', async () => {
    const target = path.join(work, 'swapped');
    const result = await (await cliBehind(false))(['restore', newer, target]);
    expect(result.code, result.stderr).toBe(4);
    expect(result.stderr).toContain(`the server answered with backup "${older}" when asked for "${newer}"`);
    expect(exists(target)).toBe(false);
  });

  it('restore refuses an older backup relabelled with the id asked for (keys sealed for another id)', async () => {
    const target = path.join(work, 'relabelled');
    const result = await (await cliBehind(true))(['restore', newer, target]);
    expect(result.code, result.stderr).toBe(4);
    expect(result.stderr).toMatch(/data key does not belong to this backup/);
    expect(exists(target)).toBe(false);
  });

  it('show --metadata refuses a server that answers an older backup', async () => {
    const result = await (await cliBehind(false))(['show', newer, '--metadata']);
    expect(result.code, result.stderr).toBe(4);
    expect(result.stderr).toContain(`the server answered with backup "${older}" when asked for "${newer}"`);
    expect(result.stdout).not.toMatch(/name: +older/);
  });

  it('show --metadata refuses an older backup relabelled with the id asked for', async () => {
    const result = await (await cliBehind(true))(['show', newer, '--metadata']);
    expect(result.code, result.stderr).toBe(4);
    expect(result.stderr).toMatch(/data key does not belong to this backup/);
    expect(result.stdout).not.toMatch(/name: +older/);
  });
});
