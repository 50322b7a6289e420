/**
 * Conditional rotate through HTTP on a real server, on SQLite and on PostgreSQL (docs/api-rules.md#account): the
 * account's ETag names the vault material; a rotate with If-Match replaces it only while it is still that material
 * (else 409 vault_changed, nothing changed); racing conditional rotates on one ETag: exactly one wins; a rotate
 * without If-Match stays unconditional, exactly as before.
 */
import { expect, it } from 'vitest';
import { describeEngines, type Engine } from '../backends/engine.js';
import { envelope } from '../helpers/api.js';
import { Conformance, conformantApi } from '../helpers/conformance.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface Backend {
  server: TestServer;
  account(): Promise<ReturnType<typeof conformantApi>>;
}

function engine(name: string, options: { pg: boolean }): Engine<Backend> {
  let server: TestServer | undefined;
  let schema: TestSchema | undefined;
  return {
    name,
    skip: options.pg && skipPg,
    async setUp() {
      let env: Record<string, string> = {};
      if (options.pg) {
        requirePg();
        schema = await createTestSchema('coffer_rotate');
        env = { COFFER_DATABASE_URL: schema.url };
      }
      const started = await startTestServer({ env });
      server = started;
      const conformance = await Conformance.load(started.url);
      return {
        server: started,
        async account() {
          const { apiKey } = await started.newKey({ plan: 'pro' });
          const call = conformantApi(started.url, conformance, apiKey);
          const response = await call('POST', '/api/backup-account/bootstrap', { json: envelope(1) });
          if (response.status !== 200) throw new Error(`bootstrap failed: ${response.text}`);
          return call;
        },
      };
    },
    async tearDown() {
      await server?.stop();
      await schema?.drop();
    },
  };
}

const ENTITY_TAG = /^"vault-[A-Za-z0-9_-]{43}"$/;

describeEngines(
  'conditional rotate (If-Match on the vault material ETag)',
  [engine('SQLite', { pg: false }), engine('PostgreSQL', { pg: true })],
  (_engine, backend) => {
    it('GET, bootstrap and rotate carry the ETag of the material; it changes with the material, not with reads', async () => {
      const call = await backend().account();
      const first = await call('GET', '/api/backup-account');
      const etag = first.headers.get('etag');
      expect(etag).toMatch(ENTITY_TAG);
      expect((await call('GET', '/api/backup-account')).headers.get('etag')).toBe(etag);
      const rotated = await call('POST', '/api/backup-account/rotate', { json: envelope(2), headers: { 'if-match': etag! } });
      expect(rotated.status).toBe(200);
      expect(rotated.body).toMatchObject({ rotated: true, ...envelope(2) });
      const next = rotated.headers.get('etag');
      expect(next).toMatch(ENTITY_TAG);
      expect(next).not.toBe(etag);
      expect((await call('GET', '/api/backup-account')).headers.get('etag')).toBe(next);
      // No vault, no material, no ETag.
      const { apiKey } = await backend().server.newKey({ plan: 'free' });
      const empty = await fetch(`${backend().server.url}/api/backup-account`, { headers: { authorization: `Bearer ${apiKey}` } });
      expect(empty.status).toBe(200);
      expect(empty.headers.get('etag')).toBeNull();
    });

    it('a stale If-Match is 409 vault_changed with the current ETag, and changes nothing', async () => {
      const call = await backend().account();
      const stale = (await call('GET', '/api/backup-account')).headers.get('etag')!;
      expect((await call('POST', '/api/backup-account/rotate', { json: envelope(2) })).status).toBe(200);
      const before = await call('GET', '/api/backup-account');
      const refused = await call('POST', '/api/backup-account/rotate', { json: envelope(3), headers: { 'if-match': stale } });
      expect(refused.status).toBe(409);
      expect(refused.body).toMatchObject({ code: 'vault_changed', details: { currentEtag: before.headers.get('etag') } });
      expect(refused.body.resolution).toMatch(/If-Match/);
      const after = await call('GET', '/api/backup-account');
      expect(after.body).toEqual(before.body);
      expect(after.body).toMatchObject(envelope(2));
    });

    it('If-Match lists, "*" and weak tags follow RFC 9110 (strong comparison)', async () => {
      const call = await backend().account();
      const etag = (await call('GET', '/api/backup-account')).headers.get('etag')!;
      const rotate = (n: number, ifMatch: string) =>
        call('POST', '/api/backup-account/rotate', { json: envelope(n), headers: { 'if-match': ifMatch } });
      // A weak tag never matches, even with the right opaque value.
      expect((await rotate(2, `W/${etag}`)).body.code).toBe('vault_changed');
      const listed = await rotate(3, `"vault-other", ${etag}`);
      expect(listed.status).toBe(200);
      expect((await rotate(4, '*')).status).toBe(200);
      expect((await call('GET', '/api/backup-account')).body).toMatchObject(envelope(4));
    });

    it.each([['unquoted'], [''], ['"a" "b"'], ['"a",,x']])(
      'a malformed If-Match %j is 400 validation_failed and changes nothing',
      async (value) => {
        const call = await backend().account();
        const before = await call('GET', '/api/backup-account');
        const refused = await call('POST', '/api/backup-account/rotate', { json: envelope(2), headers: { 'if-match': value } });
        expect(refused.status).toBe(400);
        expect(refused.body.code).toBe('validation_failed');
        expect(refused.body.details.issues.map((issue: { path: string }) => issue.path)).toContain('headers.if-match');
        expect((await call('GET', '/api/backup-account')).body).toEqual(before.body);
      },
    );

    it('conditional rotate without a vault is 409 vault_not_initialized, as without If-Match', async () => {
      const { apiKey } = await backend().server.newKey({ plan: 'free' });
      const response = await fetch(`${backend().server.url}/api/backup-account/rotate`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'if-match': '*' },
        body: JSON.stringify(envelope(2)),
      });
      expect(response.status).toBe(409);
      expect(((await response.json()) as { code: string }).code).toBe('vault_not_initialized');
    });

    it('8 conditional rotates racing on one ETag: exactly one wins, the others get 409 and the winner’s material stays', async () => {
      for (let round = 0; round < 3; round++) {
        const call = await backend().account();
        const etag = (await call('GET', '/api/backup-account')).headers.get('etag')!;
        const bodies = Array.from({ length: 8 }, (_, i) => envelope(10 + i));
        const responses = await Promise.all(
          bodies.map((json) => call('POST', '/api/backup-account/rotate', { json, headers: { 'if-match': etag } })),
        );
        const winners = responses.flatMap((response, i) => (response.status === 200 ? [i] : []));
        expect(winners, `round ${round}: ${responses.map((r) => r.status).join(',')}`).toHaveLength(1);
        const current = await call('GET', '/api/backup-account');
        expect(current.body).toMatchObject(bodies[winners[0]!]!);
        for (const loser of responses.filter((response) => response.status !== 200)) {
          expect(loser.status).toBe(409);
          expect(loser.body).toMatchObject({ code: 'vault_changed', details: { currentEtag: current.headers.get('etag') } });
        }
      }
    });

    it('without If-Match, racing rotates are unconditional as before: every one answers 200, one of them stays', async () => {
      const call = await backend().account();
      const bodies = Array.from({ length: 4 }, (_, i) => envelope(20 + i));
      const responses = await Promise.all(bodies.map((json) => call('POST', '/api/backup-account/rotate', { json })));
      expect(responses.map((response) => response.status)).toEqual([200, 200, 200, 200]);
      const current = (await call('GET', '/api/backup-account')).body;
      expect(bodies.some((body) => body.wrappedMasterKey === current.wrappedMasterKey)).toBe(true);
    });
  },
);
