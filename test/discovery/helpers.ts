/** Shared helpers for the discovery tests: fetch a document, validators built from the vendored schemas. */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures');

export function fixture(name: string): any {
  return JSON.parse(fs.readFileSync(path.join(fixtures, name), 'utf8'));
}

/** ajv (draft-07) against the vendored A2A v0.3.0 schema, `#/definitions/AgentCard`. */
export function agentCardValidator() {
  const ajv = new Ajv({ strict: false, allErrors: true });
  const schema = fixture('a2a-agent-card.v0.3.0.schema.json');
  ajv.addSchema(schema);
  return ajv.compile({ $ref: `${schema.$id}#/definitions/AgentCard` });
}

/** ajv (2020-12, with formats) against the vendored MCP server-card schema, `$defs/ServerCard`. */
export function serverCardValidator() {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as { default: (a: Ajv2020) => void }).default(ajv);
  const schema = fixture('mcp-server-card.schema.json');
  ajv.addSchema({ ...schema, $id: 'https://coffer.test/server-card.schema.json' });
  return {
    validate: ajv.compile({ $ref: 'https://coffer.test/server-card.schema.json#/$defs/ServerCard' }),
    properties: Object.keys(schema.$defs.ServerCard.properties as object),
  };
}

export interface Fetched {
  status: number;
  headers: Headers;
  text: string;
  bytes: Buffer;
}

export async function get(url: string, init: RequestInit = {}): Promise<Fetched> {
  const response = await fetch(url, init);
  const bytes = Buffer.from(await response.arrayBuffer());
  return { status: response.status, headers: response.headers, text: bytes.toString('utf8'), bytes };
}

/** Every path the discovery surface serves as a static document (GET and HEAD). */
export const DOCUMENT_PATHS = [
  '/',
  '/llms.txt',
  '/llms-full.txt',
  '/.well-known/llms.txt',
  '/auth.md',
  '/webhooks.md',
  '/legal.md',
  '/docs/overview.md',
  '/docs/pricing.md',
  '/docs/cli.md',
  '/docs/security.md',
  '/docs/api.md',
  '/api-docs',
  '/logo.svg',
  '/.well-known/api-catalog',
  '/.well-known/oauth-protected-resource',
  '/.well-known/agent-card.json',
  '/.well-known/agent.json',
  '/.well-known/ai-plugin.json',
  '/.well-known/mcp',
  '/.well-known/mcp/server-card.json',
  '/mcp/server-card',
  '/.well-known/mcp/catalog.json',
  '/.well-known/ai-catalog.json',
  '/.well-known/agent-skills/index.json',
  '/.well-known/agent-skills/coffer-backup/SKILL.md',
];
