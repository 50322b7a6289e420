/**
 * The public, read-only MCP server: resources, tools and a prompt over the generated documentation.
 * A new McpServer is built for every HTTP request (stateless Streamable HTTP); nothing here can reach a backup,
 * a key or the database.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import * as z from 'zod';
import { PLANS } from '../domain/plans.js';
import type { DocId } from './content.js';
import type { Knowledge } from './knowledge.js';

const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

export const RESOURCE_SCHEME = 'coffer://';

export function docResourceUri(doc: DocId): string {
  return `${RESOURCE_SCHEME}docs/${doc}`;
}

export const OPENAPI_RESOURCE_URI = `${RESOURCE_SCHEME}openapi.json`;

function text(value: string) {
  return { content: [{ type: 'text' as const, text: value }] };
}

export function buildMcpServer(knowledge: Knowledge, openapi: () => unknown): McpServer {
  const { site, content } = knowledge;
  const server = new McpServer(
    { name: site.serverInfo.name, title: site.serverInfo.title, version: site.serverInfo.version, websiteUrl: site.serverInfo.websiteUrl },
    {
      instructions:
        `${content.product.summary} This server is read-only documentation: it answers product, pricing, ` +
        'CLI install and API questions. It cannot list, create, read or delete backups and needs no credential.',
    },
  );

  registerResources(server, knowledge, openapi);
  registerTools(server, knowledge);
  registerPrompts(server, knowledge);
  return server;
}

/** The documents as resources: each doc, the OpenAPI document, all of them in one. */
function registerResources(server: McpServer, knowledge: Knowledge, openapi: () => unknown): void {
  const { site } = knowledge;
  const docs = Object.keys(site.titles).filter((id) => id !== 'legal') as DocId[];
  for (const doc of docs) {
    const uri = docResourceUri(doc);
    server.registerResource(
      `doc-${doc}`,
      uri,
      { title: site.titles[doc], description: `${site.titles[doc]} (${knowledge.docUrl(doc)})`, mimeType: 'text/markdown' },
      async () => ({ contents: [{ uri, mimeType: 'text/markdown', text: knowledge.doc(doc) }] }),
    );
  }
  server.registerResource(
    'openapi',
    OPENAPI_RESOURCE_URI,
    { title: 'OpenAPI 3.1 document', description: `The API contract (${site.base}/openapi.json)`, mimeType: 'application/json' },
    async () => ({
      contents: [{ uri: OPENAPI_RESOURCE_URI, mimeType: 'application/json', text: JSON.stringify(openapi(), null, 2) }],
    }),
  );
  server.registerResource(
    'llms-full',
    `${RESOURCE_SCHEME}llms-full.txt`,
    { title: 'All documentation', description: `Every doc in one file (${site.base}/llms-full.txt)`, mimeType: 'text/markdown' },
    async () => ({ contents: [{ uri: `${RESOURCE_SCHEME}llms-full.txt`, mimeType: 'text/markdown', text: site.llmsFullTxt }] }),
  );
}

/** The read-only tools: overview, pricing, CLI install, API docs, search. */
function registerTools(server: McpServer, knowledge: Knowledge): void {
  const { site } = knowledge;
  server.registerTool(
    'get_overview',
    {
      title: 'Product overview',
      description: 'What Coffer is, what it stores, and what the server never sees (zero-knowledge security model).',
      annotations: { title: 'Product overview', ...READ_ONLY },
    },
    async () => text(`${knowledge.doc('overview')}\n---\n\n${knowledge.doc('security')}`),
  );

  const planEntry = z.object({
    plan: z.enum(PLANS),
    title: z.string(),
    price: z.number(),
    backupInterval: z.string(),
    retentionDays: z.number(),
    bestFor: z.string(),
  });
  server.registerTool(
    'get_pricing',
    {
      title: 'Plans and pricing',
      description: 'Price per month, backup cadence and retention of each Coffer plan (free, plus, pro).',
      inputSchema: { plan: z.enum(PLANS).optional().describe('Only this plan') },
      outputSchema: { currency: z.string(), billingPeriod: z.string(), plans: z.array(planEntry) },
      annotations: { title: 'Plans and pricing', ...READ_ONLY },
    },
    async ({ plan }) => {
      const pricing = knowledge.pricing();
      const selected = { ...pricing, plans: pricing.plans.filter((p) => plan === undefined || p.plan === plan) };
      return { ...text(knowledge.doc('pricing')), structuredContent: selected };
    },
  );

  server.registerTool(
    'get_cli_install',
    {
      title: 'CLI install and quick start',
      description: 'How to install the coffer CLI, self-host a server, and run a first encrypted backup and restore.',
      annotations: { title: 'CLI install and quick start', ...READ_ONLY },
    },
    async () => text(knowledge.doc('cli')),
  );

  const apiDocs = ['api', 'auth', 'webhooks'] as const;
  server.registerTool(
    'get_api_docs',
    {
      title: 'API documentation',
      description: 'The API guide (operations, backup flow, errors), authentication (API keys, scopes, 401/403) or webhooks policy.',
      inputSchema: { section: z.enum(apiDocs).optional().describe('api (default), auth or webhooks') },
      annotations: { title: 'API documentation', ...READ_ONLY },
    },
    async ({ section }) => {
      const doc = section ?? 'api';
      return text(
        `${knowledge.doc(doc)}\nOpenAPI document: ${site.base}/openapi.json\nInteractive reference: ${site.base}/api-docs\n` +
          `SDK (coffer-sdk, Node and browsers): npm install ${site.base}/downloads/coffer-sdk.tgz; reference ${site.base}/docs/sdk/\n`,
      );
    },
  );

  server.registerTool(
    'search_docs',
    {
      title: 'Search the documentation',
      description: 'Full-text search over all Coffer documentation; returns the best matching sections with their URLs.',
      inputSchema: {
        query: z.string().min(1).max(200).describe('Words to look for, e.g. "restore passphrase"'),
        limit: z.number().int().min(1).max(10).optional().describe('At most this many sections (default 5)'),
      },
      annotations: { title: 'Search the documentation', ...READ_ONLY },
    },
    async ({ query, limit }) => {
      const hits = knowledge.search(query, limit ?? 5);
      if (hits.length === 0) return text(`No section matches "${query}". All documentation: ${site.base}/llms-full.txt`);
      return text(hits.map((hit) => `## ${hit.title}\nSource: ${hit.url}\n\n${hit.text}`).join('\n\n'));
    },
  );
}

/** The prompt that walks a user through a first backup. */
function registerPrompts(server: McpServer, knowledge: Knowledge): void {
  const { site } = knowledge;
  server.registerPrompt(
    'setup_backups',
    {
      title: 'Set up Coffer backups',
      description: 'Walks a user through installing the coffer CLI and making a first encrypted backup.',
    },
    () => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'text',
            text:
              'Help me set up encrypted backups with Coffer. Use only this documentation, and never ask me to share ' +
              `my passphrase or API key with you.\n\n${knowledge.doc('cli')}\n${site.pricingTable}\n`,
          },
        },
      ],
    }),
  );
}
