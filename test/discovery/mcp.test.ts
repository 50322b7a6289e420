/**
 * /mcp with the SDK's own Client over StreamableHTTPClientTransport: lists and calls every tool, lists and reads every
 * resource, lists and gets every prompt. Plus the HTTP rules: stateless, public, read-only, bounded, rate limited.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { get } from './helpers.js';

let server: TestServer;
let client: Client;

async function connect(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const c = new Client({ name: 'coffer-discovery-test', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }));
  return c;
}

const rpc = (url: string, body: string, headers: Record<string, string> = {}) =>
  get(`${url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body,
  });

const BACKUP_WORDS =
  /backup_(create|delete|list|get|upload|finalize|restore)|create|delete|upload|finalize|restore|rotate|reset|bootstrap|download/;

beforeAll(async () => {
  server = await startTestServer();
  client = await connect(server.url);
});
afterAll(async () => {
  await client?.close();
  await server?.stop();
});

describe('MCP server over Streamable HTTP (SDK client)', () => {
  it('identifies itself exactly as its server card does', async () => {
    const card = JSON.parse((await get(`${server.url}/mcp/server-card`)).text);
    const info = client.getServerVersion()!;
    expect(info.name).toBe(card.name);
    expect(info.version).toBe(card.version);
    expect(info.title).toBe(card.title);
    expect(card.remotes[0].supportedProtocolVersions).toContain(
      (client as unknown as { _transport: { protocolVersion?: string } })._transport.protocolVersion ??
        card.remotes[0].supportedProtocolVersions[0],
    );
    expect(client.getInstructions()).toMatch(/read-only/);
  });

  it('lists read-only tools only, none of them a backup operation', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['get_api_docs', 'get_cli_install', 'get_overview', 'get_pricing', 'search_docs']);
    for (const tool of tools) {
      expect(tool.annotations?.readOnlyHint, tool.name).toBe(true);
      expect(tool.annotations?.destructiveHint, tool.name).toBe(false);
      expect(tool.name).not.toMatch(BACKUP_WORDS);
      expect(tool.description!.length).toBeGreaterThan(10);
    }
  });

  it('calls every tool and gets answers from the published docs', async () => {
    const pricingDoc = (await get(`${server.url}/docs/pricing.md`)).text;
    const calls: Record<string, Record<string, unknown>> = {
      get_overview: {},
      get_pricing: {},
      get_cli_install: {},
      get_api_docs: { section: 'auth' },
      search_docs: { query: 'restore passphrase' },
    };
    const { tools } = await client.listTools();
    for (const tool of tools) {
      const result = await client.callTool({ name: tool.name, arguments: calls[tool.name] });
      expect(result.isError, tool.name).toBeFalsy();
      const content = result.content as { type: string; text: string }[];
      expect(content[0]!.type, tool.name).toBe('text');
      expect(content[0]!.text.length, tool.name).toBeGreaterThan(50);
    }
    const pricing = await client.callTool({ name: 'get_pricing', arguments: { plan: 'pro' } });
    expect((pricing.content as { text: string }[])[0]!.text).toBe(pricingDoc);
    expect(pricing.structuredContent).toMatchObject({
      currency: 'USD',
      plans: [{ plan: 'pro', backupInterval: '30m', retentionDays: 90 }],
    });
    const install = await client.callTool({ name: 'get_cli_install', arguments: {} });
    expect((install.content as { text: string }[])[0]!.text).toContain(`export COFFER_URL=${server.url}`);
    const search = await client.callTool({ name: 'search_docs', arguments: { query: 'webhook reserved names' } });
    expect((search.content as { text: string }[])[0]!.text).toContain('backup.finalized');
  });

  it('rejects invalid tool arguments and unknown tools', async () => {
    const bad = await client.callTool({ name: 'search_docs', arguments: { query: '' } });
    expect(bad.isError).toBe(true);
    const unknown = await client.callTool({ name: 'create_backup', arguments: {} });
    expect(unknown.isError).toBe(true);
  });

  it('lists and reads every resource', async () => {
    const { resources } = await client.listResources();
    expect(resources.map((r) => r.uri).sort()).toEqual([
      'coffer://docs/api',
      'coffer://docs/auth',
      'coffer://docs/cli',
      'coffer://docs/overview',
      'coffer://docs/pricing',
      'coffer://docs/security',
      'coffer://docs/webhooks',
      'coffer://llms-full.txt',
      'coffer://openapi.json',
    ]);
    for (const resource of resources) {
      const { contents } = await client.readResource({ uri: resource.uri });
      expect(contents).toHaveLength(1);
      const [content] = contents as { uri: string; mimeType: string; text: string }[];
      expect(content!.uri).toBe(resource.uri);
      expect(content!.mimeType).toBe(resource.mimeType);
      expect(content!.text.length, resource.uri).toBeGreaterThan(100);
    }
    const { contents } = await client.readResource({ uri: 'coffer://openapi.json' });
    const openapi = JSON.parse((await get(`${server.url}/openapi.json`)).text);
    expect(JSON.parse((contents[0] as { text: string }).text)).toEqual(openapi);
    const auth = await client.readResource({ uri: 'coffer://docs/auth' });
    expect((auth.contents[0] as { text: string }).text).toBe((await get(`${server.url}/auth.md`)).text);
  });

  it('lists and gets every prompt', async () => {
    const { prompts } = await client.listPrompts();
    expect(prompts.map((p) => p.name)).toEqual(['setup_backups']);
    for (const prompt of prompts) {
      const result = await client.getPrompt({ name: prompt.name });
      expect(result.messages.length).toBeGreaterThan(0);
      expect(JSON.stringify(result.messages)).toContain('coffer backup');
    }
  });

  it('needs no credential and ignores one: an API key sent along changes nothing', async () => {
    const { apiKey } = await server.newKey();
    const withKey = await connect(server.url, { authorization: `Bearer ${apiKey}` });
    expect((await withKey.listTools()).tools).toHaveLength(5);
    await withKey.close();
  });

  it('serves concurrent independent clients (stateless: no session id)', async () => {
    const clients = await Promise.all([1, 2, 3].map(() => connect(server.url)));
    const results = await Promise.all(clients.map((c) => c.callTool({ name: 'get_pricing', arguments: {} })));
    for (const result of results) expect(result.isError).toBeFalsy();
    await Promise.all(clients.map((c) => c.close()));
    const raw = await rpc(server.url, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    expect(raw.status).toBe(200);
    expect(raw.headers.get('mcp-session-id')).toBeNull();
    expect(JSON.parse(raw.text).result.tools).toHaveLength(5);
  });
});

describe('/mcp HTTP rules', () => {
  it('GET and DELETE are 405 with Allow: POST, and no response asks for authentication', async () => {
    for (const method of ['GET', 'DELETE']) {
      const response = await get(`${server.url}/mcp`, { method, headers: { accept: 'text/event-stream' } });
      expect(response.status, method).toBe(405);
      expect(response.headers.get('allow')).toBe('POST');
      expect(response.headers.get('www-authenticate')).toBeNull();
      expect(JSON.parse(response.text).error.code).toBe(-32600);
    }
    const ok = await rpc(server.url, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }));
    expect(ok.status).toBe(200);
    expect(ok.headers.get('www-authenticate')).toBeNull();
    expect(ok.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('answers a CORS preflight', async () => {
    const response = await get(`${server.url}/mcp`, {
      method: 'OPTIONS',
      headers: { origin: 'https://example.org', 'access-control-request-method': 'POST' },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    expect(response.headers.get('access-control-allow-headers')).toMatch(/Mcp-Protocol-Version/);
  });

  it('bounds the request: over 64 KiB is 413, malformed JSON 400 (-32700), another type 415', async () => {
    const big = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'search_docs', arguments: { query: 'x'.repeat(70_000) } },
    });
    const tooLarge = await rpc(server.url, big);
    expect(tooLarge.status).toBe(413);
    expect(JSON.parse(tooLarge.text).error.code).toBe(-32600);
    const malformed = await rpc(server.url, '{"jsonrpc":');
    expect(malformed.status).toBe(400);
    expect(JSON.parse(malformed.text).error.code).toBe(-32700);
    const wrongType = await rpc(server.url, 'hello', { 'content-type': 'text/plain' });
    expect(wrongType.status).toBe(415);
  });
});

describe('per-address rate limit on /mcp and the A2A endpoint', () => {
  it('answers 429 with Retry-After once an address exceeds 120 requests a minute', async () => {
    const own = await startTestServer();
    try {
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
      const statuses: number[] = [];
      for (let i = 0; i < 60; i++) statuses.push((await rpc(own.url, body)).status);
      for (let i = 0; i < 60; i++) {
        const response = await get(`${own.url}/a2a`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tasks/get', params: { id: 'x' } }),
        });
        statuses.push(response.status);
      }
      expect(statuses.every((s) => s === 200)).toBe(true);
      const limited = await rpc(own.url, body);
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(JSON.parse(limited.text).error.message).toMatch(/Too many requests/);
      const a2a = await get(`${own.url}/a2a`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      expect(a2a.status).toBe(429);
      // The documents themselves are not rate limited.
      expect((await get(`${own.url}/llms.txt`)).status).toBe(200);
    } finally {
      await own.stop();
    }
  });

  const batch = (size: number, from = 0) =>
    JSON.stringify(Array.from({ length: size }, (_, i) => ({ jsonrpc: '2.0', id: from + i, method: 'ping' })));

  it('counts every message of a batch: 6 batches of 20 use up the 120 a minute', async () => {
    const own = await startTestServer();
    try {
      for (let i = 0; i < 6; i++) {
        const response = await rpc(own.url, batch(20, i * 20));
        expect(response.status).toBe(200);
        expect(JSON.parse(response.text)).toHaveLength(20);
      }
      const limited = await rpc(own.url, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }));
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await own.stop();
    }
  });

  it('refuses a batch over 20 messages with a JSON-RPC error, and still counts its messages', async () => {
    const own = await startTestServer();
    try {
      const tooBig = await rpc(own.url, batch(100));
      expect(tooBig.status).toBe(400);
      expect(JSON.parse(tooBig.text).error).toEqual({ code: -32600, message: expect.stringMatching(/at most 20 messages/) });
      // 100 counted: one batch of 20 more reaches the 120, and the request after it is over the limit.
      expect((await rpc(own.url, batch(20))).status).toBe(200);
      expect((await rpc(own.url, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }))).status).toBe(429);
    } finally {
      await own.stop();
    }
  });
});
