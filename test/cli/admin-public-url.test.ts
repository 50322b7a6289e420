/**
 * `coffer admin login-link` in a shell without the server's settings (only where the database is, as
 * docs/deploy.md runs it) links to the address the server really serves: each start records its public URL in the
 * database, and the admin command reads it there instead of guessing http://localhost:8080. COFFER_PUBLIC_URL given
 * to the command still wins; with no server started on the database yet, the command says that it guesses.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt } from '../helpers/built.js';
import { exited, startServeNode, type ServeNode } from '../helpers/serve-node.js';
import { tempDir } from '../helpers/tmp.js';
import { json, runCli } from '../client/helpers.js';

const nodes: ServeNode[] = [];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** Signs in to the console of the server at `base` with a link's token: 200 when the link belongs to that server. */
async function signInStatus(base: string, link: string, path: string): Promise<number> {
  const loginToken = new URL(link).hash.replace('#token=', '');
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: new URL(link).origin },
    body: JSON.stringify({ loginToken }),
  });
  return response.status;
}

beforeAll(() => assertBuilt());

afterAll(async () => {
  for (const node of nodes) node.child.kill('SIGKILL');
  await Promise.all(nodes.map((node) => exited(node.child)));
});

describe('coffer admin login-link with only the data directory', () => {
  it('links to the port the server listens on (PORT set, no COFFER_PUBLIC_URL anywhere)', { timeout: 60_000 }, async () => {
    const dataDir = tempDir('coffer-admin-url-');
    const port = await freePort();
    const node = await startServeNode('admin-url', { COFFER_DATA_DIR: dataDir, PORT: String(port) });
    nodes.push(node);
    const accountId = /coffer admin login-link (\S+)\)/.exec(node.output())![1]!;

    const owner = await runCli(['admin', 'login-link', accountId, '--json'], { COFFER_DATA_DIR: dataDir });
    expect(owner.stderr).toBe('');
    const link = json(owner).url as string;
    expect(link).toMatch(new RegExp(`^http://localhost:${port}/console/login#token=cfl_[A-Za-z0-9_-]{43}$`));
    expect(await signInStatus(`http://127.0.0.1:${port}`, link, '/console/api/session')).toBe(200);

    const operator = await runCli(['admin', 'login-link', '--operator', '--json'], { COFFER_DATA_DIR: dataDir });
    expect(json(operator).url).toMatch(new RegExp(`^http://localhost:${port}/admin/login#token=`));
  });

  it('links to the server’s COFFER_PUBLIC_URL; the command’s own COFFER_PUBLIC_URL wins over it', { timeout: 60_000 }, async () => {
    const dataDir = tempDir('coffer-admin-url-public-');
    const node = await startServeNode('admin-url-public', { COFFER_DATA_DIR: dataDir, COFFER_PUBLIC_URL: 'https://backup.example.test/' });
    nodes.push(node);
    const accountId = /coffer admin login-link (\S+)\)/.exec(node.output())![1]!;

    const recorded = await runCli(['admin', 'login-link', accountId, '--json'], { COFFER_DATA_DIR: dataDir });
    expect(json(recorded).url).toMatch(/^https:\/\/backup\.example\.test\/console\/login#token=/);
    const given = await runCli(['admin', 'login-link', accountId, '--json'], {
      COFFER_DATA_DIR: dataDir,
      COFFER_PUBLIC_URL: 'https://other.example.test',
    });
    expect(json(given).url).toMatch(/^https:\/\/other\.example\.test\/console\/login#token=/);
  });

  it('on a database no server has started on, says that the address is a guess', async () => {
    const dataDir = tempDir('coffer-admin-url-none-');
    const created = await runCli(['admin', 'accounts', 'create', '--plan', 'free', '--json'], { COFFER_DATA_DIR: dataDir });
    const { accountId } = json(created) as { accountId: string };
    const guessed = await runCli(['admin', 'login-link', accountId], { COFFER_DATA_DIR: dataDir });
    expect(guessed.code).toBe(0);
    expect(guessed.stdout).toMatch(/^http:\/\/localhost:8080\/console\/login#token=/m);
    expect(guessed.stderr).toBe(
      'coffer: no server has recorded its public URL in this database yet: the link assumes http://localhost:8080 (set COFFER_PUBLIC_URL)\n',
    );
  });
});
