/**
 * The console sign-in limit across nodes: two real `coffer serve` processes on one PostgreSQL schema with
 * COFFER_SIGNIN_ATTEMPTS=4 count every attempt in the database, so attempts from one address split over both nodes
 * are refused from the fifth on, on either node (in memory, each node would have allowed four: eight in all). The
 * operator console's sign-in (/admin/api/session) counts the same way, apart from the owners'.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt } from '../helpers/built.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { exited, startServeNode, type ServeNode } from '../helpers/serve-node.js';

const MAX = 4;

/** One malformed sign-in attempt from loopback (it still counts); resolves to the status and Retry-After. */
async function attempt(node: ServeNode, realm: 'owner' | 'operator' = 'owner'): Promise<{ status: number; retryAfter: string | null }> {
  const response = await fetch(`${node.url}${realm === 'owner' ? '/console' : '/admin'}/api/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(realm === 'owner' ? { apiKey: `cfk_${'A'.repeat(43)}` } : { loginToken: `cfl_${'A'.repeat(43)}` }),
  });
  await response.arrayBuffer();
  return { status: response.status, retryAfter: response.headers.get('retry-after') };
}

describe.skipIf(skipPg)('console sign-in attempts on two Coffer nodes sharing one PostgreSQL', () => {
  let schema: TestSchema;
  const nodes: ServeNode[] = [];

  beforeAll(async () => {
    requirePg();
    assertBuilt();
    schema = await createTestSchema('coffer_signin');
    const env = { COFFER_DATABASE_URL: schema.url, COFFER_SIGNIN_ATTEMPTS: String(MAX), COFFER_SIGNIN_WINDOW: '10m' };
    // One after the other: the first start's bootstrap and migrations, then the second node.
    nodes.push(await startServeNode('a', env));
    nodes.push(await startServeNode('b', env));
  }, 60_000);

  afterAll(async () => {
    for (const node of nodes) node.child.kill('SIGKILL');
    await Promise.all(nodes.map((node) => exited(node.child)));
    await schema?.drop();
  });

  it(`${MAX} attempts split over both nodes use up the limit: the next is refused on either node`, async () => {
    const [a, b] = nodes as [ServeNode, ServeNode];
    const allowed = [await attempt(a), await attempt(b), await attempt(a), await attempt(b)];
    expect(allowed.map((r) => r.status)).toEqual([401, 401, 401, 401]);
    for (const node of [a, b]) {
      const refused = await attempt(node);
      expect(refused.status, node.name).toBe(429);
      expect(Number(refused.retryAfter)).toBeGreaterThan(500);
      expect(Number(refused.retryAfter)).toBeLessThanOrEqual(600);
    }
  });

  it(`the operator console's sign-in is limited the same way, on a count of its own`, async () => {
    const [a, b] = nodes as [ServeNode, ServeNode];
    // The owners' count of this address is used up (the test above); the operator's starts at zero.
    const allowed = [
      await attempt(a, 'operator'),
      await attempt(b, 'operator'),
      await attempt(a, 'operator'),
      await attempt(b, 'operator'),
    ];
    for (const response of allowed) expect(response.status).not.toBe(429);
    for (const node of [a, b]) {
      const refused = await attempt(node, 'operator');
      expect(refused.status, node.name).toBe(429);
      expect(Number(refused.retryAfter)).toBeGreaterThan(500);
      expect(Number(refused.retryAfter)).toBeLessThanOrEqual(600);
    }
  });
});
