/**
 * Every /.well-known document (and the other discovery files) against its own convention, served by a real server
 * whose COFFER_PUBLIC_URL is not its listening address: every absolute URL must use the public URL.
 */
import { createHash } from 'node:crypto';
import { OAuthProtectedResourceMetadataSchema } from '@modelcontextprotocol/sdk/shared/auth.js';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { agentCardValidator, DOCUMENT_PATHS, type Fetched, get, serverCardValidator } from './helpers.js';

const BASE = 'https://coffer.example.test:8443';
/** External identifiers that documents name on purpose (schemas, profiles); everything else must be under BASE. */
const EXTERNAL = new Set([
  'https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json',
  'https://schemas.agentskills.io/discovery/0.2.0/schema.json',
  'https://www.rfc-editor.org/info/rfc9727',
]);

let server: TestServer;
const docs = new Map<string, Fetched>();

/** The running server stands in for the public host: BASE + path is fetched at server.url + path. */
const local = (url: string) => {
  expect(url.startsWith(`${BASE}/`) || url === BASE).toBe(true);
  return server.url + (url.slice(BASE.length) || '/');
};

beforeAll(async () => {
  server = await startTestServer({ env: { COFFER_PUBLIC_URL: BASE } });
  for (const path of DOCUMENT_PATHS) docs.set(path, await get(server.url + path));
});
afterAll(() => server?.stop());

const json = (path: string) => JSON.parse(docs.get(path)!.text);

describe('every discovery file', () => {
  it('answers 200 with CORS *, an ETag and Cache-Control, and 304 to If-None-Match', async () => {
    for (const path of DOCUMENT_PATHS) {
      const doc = docs.get(path)!;
      expect(doc.status, path).toBe(200);
      expect(doc.headers.get('access-control-allow-origin'), path).toBe('*');
      expect(doc.headers.get('cache-control'), path).toMatch(/^public, max-age=\d+$/);
      const etag = doc.headers.get('etag');
      expect(etag, path).toMatch(/^"[\w-]+"$/);
      const again = await get(server.url + path, { headers: { 'if-none-match': etag! } });
      expect(again.status, path).toBe(304);
      expect(again.bytes.length, path).toBe(0);
    }
  });

  it('answers HEAD with the same headers and no body', async () => {
    for (const path of DOCUMENT_PATHS) {
      const head = await get(server.url + path, { method: 'HEAD' });
      expect(head.status, path).toBe(200);
      expect(head.bytes.length, path).toBe(0);
      expect(head.headers.get('content-type'), path).toBe(docs.get(path)!.headers.get('content-type'));
      expect(head.headers.get('etag'), path).toBe(docs.get(path)!.headers.get('etag'));
    }
  });

  it('uses COFFER_PUBLIC_URL for every absolute URL, and every one of them resolves on the running server', async () => {
    const urls = new Set<string>();
    for (const [path, doc] of docs) {
      if (path === '/logo.svg') continue;
      expect(doc.text, `${path} leaks the listening address`).not.toContain(server.url);
      expect(doc.text).not.toContain('localhost');
      for (const match of doc.text.matchAll(/https?:\/\/[^\s"'<>`)\]]+/g)) urls.add(match[0].replace(/[.,:;]+$/, ''));
    }
    const endpoints = [`${BASE}/mcp`, `${BASE}/a2a`];
    const checked: string[] = [];
    for (const url of urls) {
      if (EXTERNAL.has(url)) continue;
      expect(url.startsWith(BASE), `${url} is not under COFFER_PUBLIC_URL`).toBe(true);
      if (endpoints.includes(url)) continue; // JSON-RPC endpoints: checked with a POST below
      const response = await get(local(url));
      expect(response.status, url).toBe(200);
      checked.push(url);
    }
    for (const url of endpoints) {
      const response = await get(local(url), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: url.endsWith('/mcp') ? 'ping' : 'tasks/get', params: { id: 'x' } }),
      });
      expect(response.status, url).toBe(200);
      expect(JSON.parse(response.text).jsonrpc).toBe('2.0');
    }
    expect(checked.length).toBeGreaterThan(15);
  });

  it('is hidden from the API description', async () => {
    const openapi = JSON.parse((await get(`${server.url}/openapi.json`)).text);
    for (const path of Object.keys(openapi.paths)) expect(path.startsWith('/api/')).toBe(true);
  });

  it('/healthz says the process is up, uncached', async () => {
    const health = await get(`${server.url}/healthz`);
    expect(health.status).toBe(200);
    expect(health.headers.get('content-type')).toMatch(/^application\/json/);
    expect(health.headers.get('cache-control')).toBe('no-store');
    expect(JSON.parse(health.text)).toMatchObject({ status: 'ok' });
  });
});

describe('/.well-known/agent-card.json (A2A v0.3.0)', () => {
  it('validates against the AgentCard schema and promises the A2A endpoint under the public URL', () => {
    const card = json('/.well-known/agent-card.json');
    const validate = agentCardValidator();
    expect(validate(card), JSON.stringify(validate.errors)).toBe(true);
    expect(card.protocolVersion).toBe('0.3.0');
    expect(card.url).toBe(`${BASE}/a2a`);
    expect(card.preferredTransport).toBe('JSONRPC');
    expect(card.capabilities.streaming).toBe(false);
    expect(card.skills.map((s: { id: string }) => s.id)).toEqual(['product-overview', 'pricing', 'cli-install', 'api-docs']);
    expect(card.securitySchemes).toBeUndefined();
    expect(docs.get('/.well-known/agent-card.json')!.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('is served byte-identical at the legacy /.well-known/agent.json', () => {
    expect(docs.get('/.well-known/agent.json')!.bytes.equals(docs.get('/.well-known/agent-card.json')!.bytes)).toBe(true);
  });

  it('a card missing a required field fails the same validator (the schema is really applied)', () => {
    const { skills: _skills, ...broken } = json('/.well-known/agent-card.json');
    expect(agentCardValidator()(broken)).toBe(false);
  });
});

describe('MCP server card', () => {
  it('validates against $defs/ServerCard and uses only v1 properties', () => {
    const card = json('/mcp/server-card');
    const { validate, properties } = serverCardValidator();
    expect(validate(card), JSON.stringify(validate.errors)).toBe(true);
    for (const key of Object.keys(card)) expect(properties).toContain(key);
    expect(card.$schema).toBe('https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json');
    expect(card.name).toBe('dev.coffer/coffer');
    expect(card.remotes).toEqual([{ type: 'streamable-http', url: `${BASE}/mcp`, supportedProtocolVersions: SUPPORTED_PROTOCOL_VERSIONS }]);
  });

  it('has identical bytes at /.well-known/mcp, /.well-known/mcp/server-card.json and /mcp/server-card', () => {
    const card = docs.get('/mcp/server-card')!;
    expect(card.headers.get('content-type')).toBe('application/mcp-server-card+json');
    for (const path of ['/.well-known/mcp', '/.well-known/mcp/server-card.json']) {
      expect(docs.get(path)!.bytes.equals(card.bytes), path).toBe(true);
      expect(docs.get(path)!.headers.get('content-type'), path).toMatch(/^application\/json/);
    }
  });

  it('is listed by the AI catalog (and the MCP catalog)', () => {
    const catalog = json('/.well-known/ai-catalog.json');
    expect(catalog).toEqual({
      specVersion: 'draft',
      entries: [
        {
          identifier: 'urn:air:coffer.example.test:coffer',
          displayName: 'Coffer',
          type: 'application/mcp-server-card+json',
          url: `${BASE}/mcp/server-card`,
        },
      ],
    });
    expect(json('/.well-known/mcp/catalog.json')).toEqual(catalog);
  });
});

describe('/.well-known/oauth-protected-resource (RFC 9728)', () => {
  it('parses with the SDK schema, names no authorization server, and matches docs/api-rules.md exactly', () => {
    const metadata = json('/.well-known/oauth-protected-resource');
    expect(OAuthProtectedResourceMetadataSchema.safeParse(metadata).success).toBe(true);
    expect(metadata).toEqual({
      resource: BASE,
      bearer_methods_supported: ['header'],
      resource_name: 'Coffer API',
      resource_documentation: `${BASE}/auth.md`,
    });
    expect('authorization_servers' in metadata).toBe(false);
  });
});

describe('/.well-known/api-catalog (RFC 9727)', () => {
  it('is a linkset with the RFC 9727 profile, an anchor and registered relations', () => {
    const doc = docs.get('/.well-known/api-catalog')!;
    const contentType = doc.headers.get('content-type')!;
    expect(contentType.split(';')[0]).toBe('application/linkset+json');
    expect(contentType).toContain('profile="https://www.rfc-editor.org/info/rfc9727"');
    const catalog = JSON.parse(doc.text);
    expect(Object.keys(catalog)).toEqual(['linkset']);
    expect(catalog.linkset).toEqual([
      {
        anchor: `${BASE}/`,
        'service-desc': [{ href: `${BASE}/openapi.json`, type: 'application/json' }],
        'service-doc': [{ href: `${BASE}/api-docs`, type: 'text/html' }],
        status: [{ href: `${BASE}/healthz`, type: 'application/json' }],
      },
    ]);
  });

  it('every href resolves with the media type it announces', async () => {
    const [context] = json('/.well-known/api-catalog').linkset;
    for (const relation of ['service-desc', 'service-doc', 'status']) {
      for (const target of context[relation]) {
        const response = await get(local(target.href));
        expect(response.status, target.href).toBe(200);
        expect(response.headers.get('content-type')!.split(';')[0], target.href).toBe(target.type);
      }
    }
  });

  it('HEAD answers Link: <…/.well-known/api-catalog>; rel="api-catalog"', async () => {
    const head = await get(`${server.url}/.well-known/api-catalog`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('link')).toBe(`<${BASE}/.well-known/api-catalog>; rel="api-catalog"`);
  });
});

describe('/.well-known/ai-plugin.json (OpenAI plugin manifest v1)', () => {
  it('follows the field rules', () => {
    const plugin = json('/.well-known/ai-plugin.json');
    expect(plugin.schema_version).toBe('v1');
    expect(plugin.name_for_human.length).toBeLessThanOrEqual(20);
    expect(plugin.name_for_model).toMatch(/^[A-Za-z0-9_]{1,50}$/);
    expect(plugin.description_for_human.length).toBeLessThanOrEqual(100);
    expect(plugin.description_for_model.length).toBeGreaterThan(0);
    expect(plugin.auth).toEqual({ type: 'user_http', authorization_type: 'bearer' });
    expect(plugin.api).toEqual({ type: 'openapi', url: `${BASE}/openapi.json`, is_user_authenticated: false });
    expect(plugin.contact_email).toMatch(/^[^@\s]+@[^@\s]+\.[a-z]+$/);
    expect(plugin.logo_url).toBe(`${BASE}/logo.svg`);
    expect(plugin.legal_info_url).toBe(`${BASE}/legal.md`);
  });
});

describe('/.well-known/agent-skills (discovery draft v0.2.0)', () => {
  it('lists coffer-backup with a digest that matches the served SKILL.md bytes', () => {
    const index = json('/.well-known/agent-skills/index.json');
    expect(index.$schema).toBe('https://schemas.agentskills.io/discovery/0.2.0/schema.json');
    expect(index.skills).toHaveLength(1);
    const [skill] = index.skills;
    expect(skill).toMatchObject({
      name: 'coffer-backup',
      type: 'skill-md',
      url: '/.well-known/agent-skills/coffer-backup/SKILL.md',
    });
    expect(skill.name).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
    const skillMd = docs.get(skill.url)!;
    expect(skillMd.headers.get('content-type')).toMatch(/^text\/markdown/);
    expect(skill.digest).toBe(`sha256:${createHash('sha256').update(skillMd.bytes).digest('hex')}`);
  });

  it('SKILL.md carries name and description front matter that agree with the index', () => {
    const [skill] = json('/.well-known/agent-skills/index.json').skills;
    const text = docs.get(skill.url)!.text;
    const front = /^---\n([\s\S]*?)\n---\n/.exec(text);
    expect(front).not.toBeNull();
    const fields = Object.fromEntries(front![1]!.split('\n').map((line) => [line.split(':')[0], line.slice(line.indexOf(':') + 1).trim()]));
    expect(fields.name).toBe(skill.name);
    expect(fields.description).toBe(skill.description);
    expect(fields.description.length).toBeLessThanOrEqual(1024);
    expect(text).toContain('coffer backup');
  });
});
