/**
 * What an https public URL changes, over real HTTP (docs/console.md#the-session-cookie, docs/operations.md#https):
 * - every response carries Strict-Transport-Security (and none does on an http public URL);
 * - the console session cookie is `__Host-coffer_session` (Secure, Path=/, no Domain) at the root of an https origin,
 *   `__Secure-coffer_session` scoped to the base path under one, and plain `coffer_session` over http; only the
 *   cookie of that name opens the session, and sign-out clears that one;
 * - the operator console's cookie follows the same rules under its own name (`__Host-coffer_operator`, …);
 * - sign-in sets one cookie only: there is no CSRF cookie (the CSRF token comes in the body).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

const cases = [
  {
    label: 'https at the root of the origin',
    publicUrl: 'https://backup.example.test',
    name: '__Host-coffer_session',
    path: '/',
    secure: true,
  },
  {
    label: 'https under a base path',
    publicUrl: 'https://example.test/coffer',
    name: '__Secure-coffer_session',
    path: '/coffer',
    secure: true,
  },
  { label: 'http', publicUrl: null, name: 'coffer_session', path: '/', secure: false },
] as const;

for (const expected of cases) {
  describe(`public URL: ${expected.label}`, () => {
    let server: TestServer;
    let origin: string;

    beforeAll(async () => {
      server = await startTestServer(expected.publicUrl ? { env: { COFFER_PUBLIC_URL: expected.publicUrl } } : {});
      origin = new URL(expected.publicUrl ?? server.url).origin;
    });
    afterAll(() => server?.stop());

    it(expected.secure ? 'every response carries Strict-Transport-Security' : 'no response carries Strict-Transport-Security', async () => {
      const { apiKey } = await server.newKey();
      const responses = [
        await fetch(`${server.url}/healthz`),
        await fetch(`${server.url}/api/backups`, { headers: { authorization: `Bearer ${apiKey}` } }),
        await fetch(`${server.url}/api/backups`),
        await fetch(`${server.url}/console`),
        await fetch(`${server.url}/no-such-path`),
      ];
      expect(responses.map((r) => r.status)).toEqual([200, 200, 401, 200, 404]);
      for (const response of responses) {
        expect(response.headers.get('strict-transport-security'), response.url).toBe(expected.secure ? 'max-age=31536000' : null);
      }
    });

    it(`the session cookie is ${expected.name} (Path=${expected.path}${expected.secure ? ', Secure' : ''}, no Domain), and only it opens the session`, async () => {
      const { apiKey } = await server.newKey();
      const signedIn = await fetch(`${server.url}/console/api/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin },
        body: JSON.stringify({ apiKey }),
      });
      expect(signedIn.status).toBe(200);
      const cookies = signedIn.headers.getSetCookie();
      expect(cookies).toHaveLength(1); // no CSRF cookie: the token is in the body
      const { csrfToken } = (await signedIn.json()) as { csrfToken: string };
      expect(csrfToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const [pair, ...attributes] = cookies[0]!.split('; ');
      const [name, secret] = pair!.split('=') as [string, string];
      expect(name).toBe(expected.name);
      expect(attributes).toEqual([
        `Path=${expected.path}`,
        'Max-Age=43200',
        'HttpOnly',
        'SameSite=Strict',
        ...(expected.secure ? ['Secure'] : []),
      ]);

      const session = (cookie: string) => fetch(`${server.url}/console/api/session`, { headers: { cookie } });
      expect((await session(`${expected.name}=${secret}`)).status).toBe(200);
      for (const other of cases.filter((c) => c.name !== expected.name)) {
        expect((await session(`${other.name}=${secret}`)).status, other.name).toBe(401);
      }

      const out = await fetch(`${server.url}/console/api/session`, {
        method: 'DELETE',
        headers: { cookie: `${expected.name}=${secret}`, origin, 'x-csrf-token': csrfToken },
      });
      expect(out.status).toBe(204);
      expect(out.headers.getSetCookie()).toEqual([
        [
          `${expected.name}=`,
          `Path=${expected.path}`,
          'Max-Age=0',
          'HttpOnly',
          'SameSite=Strict',
          ...(expected.secure ? ['Secure'] : []),
        ].join('; '),
      ]);
    });

    const operatorName = expected.name.replace('coffer_session', 'coffer_operator');
    it(`the operator console's cookie follows the same rules: ${operatorName} (Path=${expected.path}${expected.secure ? ', Secure' : ''})`, async () => {
      const { token } = await server.parts.sessions.createOperatorLink(null);
      const signedIn = await fetch(`${server.url}/admin/api/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin },
        body: JSON.stringify({ loginToken: token }),
      });
      expect(signedIn.status).toBe(200);
      const cookies = signedIn.headers.getSetCookie();
      expect(cookies).toHaveLength(1);
      const { csrfToken } = (await signedIn.json()) as { csrfToken: string };
      const [pair, ...attributes] = cookies[0]!.split('; ');
      const [name, secret] = pair!.split('=') as [string, string];
      expect(name).toBe(operatorName);
      expect(attributes).toEqual([
        `Path=${expected.path}`,
        'Max-Age=43200',
        'HttpOnly',
        'SameSite=Strict',
        ...(expected.secure ? ['Secure'] : []),
      ]);

      // Only that name opens the operator session; the owners' name for the same secret opens nothing on /admin.
      const session = (cookie: string) => fetch(`${server.url}/admin/api/session`, { headers: { cookie } });
      expect((await session(`${operatorName}=${secret}`)).status).toBe(200);
      for (const other of [...cases.map((c) => c.name.replace('coffer_session', 'coffer_operator')), expected.name].filter(
        (n) => n !== operatorName,
      )) {
        expect((await session(`${other}=${secret}`)).status, other).toBe(401);
      }
      const out = await fetch(`${server.url}/admin/api/session`, {
        method: 'DELETE',
        headers: { cookie: `${operatorName}=${secret}`, origin, 'x-csrf-token': csrfToken },
      });
      expect(out.status).toBe(204);
      expect(out.headers.getSetCookie()).toEqual([
        [
          `${operatorName}=`,
          `Path=${expected.path}`,
          'Max-Age=0',
          'HttpOnly',
          'SameSite=Strict',
          ...(expected.secure ? ['Secure'] : []),
        ].join('; '),
      ]);
    });

    it('the OpenAPI document names that cookie', async () => {
      const document = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
        components: { securitySchemes: { sessionCookie: { name: string } } };
      };
      expect(document.components.securitySchemes.sessionCookie.name).toBe(expected.name);
    });
  });
}
