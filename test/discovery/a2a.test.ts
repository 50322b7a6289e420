/**
 * The agent card's A2A endpoint with the A2A project's own JS client (@a2a-js/sdk 0.3.x): the client reads the card,
 * then sends `message/send` to the card's url. Answers are deterministic and come from the same content as MCP.
 */
import { randomUUID } from 'node:crypto';
import { A2AClient } from '@a2a-js/sdk/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { get } from './helpers.js';

let server: TestServer;
let a2a: A2AClient;

const ask = (text: string, messageId: string = randomUUID()) =>
  a2a.sendMessage({ message: { kind: 'message', messageId, role: 'user', parts: [{ kind: 'text', text }] } });

function answerText(response: Awaited<ReturnType<typeof ask>>): string {
  if ('error' in response) throw new Error(`A2A error ${JSON.stringify(response.error)}`);
  const result = response.result;
  expect(result.kind).toBe('message');
  if (result.kind !== 'message') throw new Error('expected a message');
  expect(result.role).toBe('agent');
  return result.parts.map((part) => (part.kind === 'text' ? part.text : '')).join('');
}

const post = (body: unknown) =>
  get(`${server.url}/a2a`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

beforeAll(async () => {
  server = await startTestServer();
  a2a = await A2AClient.fromCardUrl(`${server.url}/.well-known/agent-card.json`);
});
afterAll(() => server?.stop());

describe('A2A message/send round trip (@a2a-js/sdk client)', () => {
  it('answers pricing from the same content as the MCP get_pricing tool', async () => {
    const text = answerText(await ask('How much does the pro plan cost?'));
    const pricingDoc = (await get(`${server.url}/docs/pricing.md`)).text;
    expect(text).toContain(pricingDoc.trimEnd());
    expect(text).toContain(`Source: ${server.url}/docs/pricing.md`);

    const mcp = new Client({ name: 'a2a-cross-check', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
    const tool = await mcp.callTool({ name: 'get_pricing', arguments: {} });
    await mcp.close();
    expect(text).toContain((tool.content as { text: string }[])[0]!.text.trimEnd());
  });

  it('routes CLI-install, product and docs questions to their skills', async () => {
    const card = JSON.parse((await get(`${server.url}/.well-known/agent-card.json`)).text);
    const cases: [string, string, string][] = [
      ['How do I install the coffer CLI?', 'cli-install', 'npm link'],
      ['What does the server never see? Is it zero-knowledge?', 'product-overview', 'What the server never sees'],
      ['Where is the API reference and how do I authenticate?', 'api-docs', 'Authorization: Bearer'],
    ];
    for (const [question, skill, expected] of cases) {
      const response = await ask(question);
      expect(answerText(response), question).toContain(expected);
      expect('result' in response && response.result.kind === 'message' && response.result.metadata?.skill).toBe(skill);
      expect(card.skills.map((s: { id: string }) => s.id)).toContain(skill);
    }
    const fallback = answerText(await ask('hello there'));
    expect(fallback).toContain('I answer questions about');
  });

  it('is deterministic: the same question gets the same reply, id included', async () => {
    const first = await ask('pricing?', 'm-1');
    const second = await ask('pricing?', 'm-1');
    expect('result' in second && second.result).toEqual('result' in first && first.result);
    expect('result' in first && first.result).toBeTruthy();
  });

  it('keeps no tasks: tasks/get is TaskNotFoundError', async () => {
    const response = await a2a.getTask({ id: 'anything' });
    expect('error' in response && response.error.code).toBe(-32001);
  });
});

describe('A2A JSON-RPC errors', () => {
  it('answers the JSON-RPC error codes of A2A 0.3.0', async () => {
    const message = { kind: 'message', messageId: 'm', role: 'user', parts: [{ kind: 'text', text: 'hi' }] };
    const cases: [unknown, number, number][] = [
      ['{"jsonrpc":', 400, -32700],
      [[{ jsonrpc: '2.0', id: 1, method: 'message/send' }], 400, -32600],
      [{ jsonrpc: '2.0', method: 'message/send', params: { message } }, 400, -32600],
      [{ jsonrpc: '2.0', id: 1, method: 'backups/delete', params: {} }, 200, -32601],
      [{ jsonrpc: '2.0', id: 1, method: 'message/send', params: {} }, 200, -32602],
      [
        { jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { ...message, parts: [{ kind: 'data', data: {} }] } } },
        200,
        -32005,
      ],
      [{ jsonrpc: '2.0', id: 1, method: 'message/stream', params: { message } }, 200, -32004],
      [{ jsonrpc: '2.0', id: 1, method: 'tasks/pushNotificationConfig/set', params: {} }, 200, -32003],
    ];
    for (const [body, status, code] of cases) {
      const response = await post(body);
      expect(response.status, JSON.stringify(body)).toBe(status);
      expect(JSON.parse(response.text).error.code, JSON.stringify(body)).toBe(code);
    }
  });
});
