/**
 * Generates every public discovery document from the content source and the OpenAPI document, for one base URL
 * (COFFER_PUBLIC_URL). Pure: the same inputs give the same bytes, so ETags are stable across processes.
 */
import { type Content, DOC_IDS, type DocId, renderTemplate } from './content.js';
import {
  authErrors,
  body,
  demoteHeadings,
  etagOf,
  firstHeading,
  formatBytes,
  operationsList,
  pricingTable,
  scopesTable,
} from './document-text.js';
import { apiDocsPage, landingHtml } from './html-pages.js';
import {
  agentCard,
  aiCatalog,
  aiPlugin,
  apiCatalog,
  oauthProtectedResource,
  serverCard,
  serverInfo,
  skillPath,
  skillsIndex,
} from './well-known.js';

export interface OpenApiOperation {
  operationId?: string;
  summary?: string;
  responses?: Record<string, unknown>;
}

export interface OpenApiLike {
  info: { title: string; version: string };
  paths?: Record<string, Record<string, OpenApiOperation>>;
}

export interface SiteInput {
  /** COFFER_PUBLIC_URL, without a trailing slash. */
  base: string;
  openapi: OpenApiLike;
  maxArchiveBytes: number;
  /**
   * The MCP protocol versions /mcp speaks (the SDK's SUPPORTED_PROTOCOL_VERSIONS), for the server card. Passed in so
   * that this module does not load the MCP SDK (and zod) at the server's start: ./routes.ts loads it on first use.
   */
  mcpProtocolVersions: readonly string[];
}

export interface Resource {
  type: string;
  body: Buffer;
  etag: string;
  headers: Record<string, string>;
}

export const MEDIA = {
  markdown: 'text/markdown; charset=utf-8',
  json: 'application/json; charset=utf-8',
  html: 'text/html; charset=utf-8',
  svg: 'image/svg+xml',
  linkset: 'application/linkset+json; profile="https://www.rfc-editor.org/info/rfc9727"',
  serverCard: 'application/mcp-server-card+json',
} as const;

export const A2A_PATH = '/a2a';
export const MCP_PATH = '/mcp';
export const A2A_PROTOCOL_VERSION = '0.3.0';
export const MCP_SERVER_CARD_SCHEMA = 'https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json';
export const AGENT_SKILLS_SCHEMA = 'https://schemas.agentskills.io/discovery/0.2.0/schema.json';

export interface Site {
  base: string;
  version: string;
  /** Rendered Markdown of each content doc (placeholders filled). */
  docs: Record<DocId | 'legal', string>;
  /** The H1 of each doc. */
  titles: Record<DocId | 'legal', string>;
  pricingTable: string;
  serverInfo: { name: string; title: string; version: string; websiteUrl: string };
  llmsTxt: string;
  llmsFullTxt: string;
  skillMd: string;
  json: {
    apiCatalog: object;
    oauthProtectedResource: object;
    agentCard: object;
    aiPlugin: object;
    serverCard: object;
    aiCatalog: object;
    skillsIndex: object;
  };
  /** Every static discovery resource by path. */
  resources: Map<string, Resource>;
}

function json(value: unknown): Buffer {
  return Buffer.from(`${JSON.stringify(value, null, 2)}\n`);
}

/** What every document is built from: the content with its placeholders filled, for one base URL. */
export interface Parts {
  content: Content;
  base: string;
  openapi: OpenApiLike;
  docs: Site['docs'];
  titles: Site['titles'];
  pricingTable: string;
  sections: Section[];
  url: (path: string) => string;
  mcpProtocolVersions: readonly string[];
}

interface Section {
  title: string;
  links: { title: string; url: string; path: string; note: string; doc?: DocId }[];
}

function siteParts(content: Content, input: SiteInput): Parts {
  const { base, openapi } = input;
  const { product } = content;
  const table = pricingTable(content);
  const values: Record<string, string> = {
    base,
    version: content.version,
    max_archive: formatBytes(input.maxArchiveBytes),
    currency: content.pricing.currency,
    billing_period: content.pricing.billingPeriod,
    pricing_table: table,
    node_engine: content.nodeEngine,
    operations: operationsList(openapi),
    scopes_table: scopesTable(content),
    auth_errors: authErrors(),
    license: product.license,
    contact_email: product.contactEmail,
  };
  const ids = [...DOC_IDS, 'legal'] as const;
  const docs = Object.fromEntries(ids.map((id) => [id, renderTemplate(content.docs[id], values)])) as Site['docs'];
  const titles = Object.fromEntries(ids.map((id) => [id, firstHeading(docs[id])])) as Site['titles'];
  const url = (path: string) => `${base}${path}`;
  const sections = content.pages.sections.map((section) => ({
    title: section.title,
    links: section.links.map((link) => ({
      title: link.title ?? titles[link.doc!],
      url: url(link.path),
      path: link.path,
      note: link.note,
      doc: link.doc,
    })),
  }));
  return { content, base, openapi, docs, titles, pricingTable: table, sections, url, mcpProtocolVersions: input.mcpProtocolVersions };
}

/** llms.txt: H1, summary, intro prose, then H2 sections of links only (llmstxt.org). */
function llmsTxt({ content, sections }: Parts): string {
  const { product } = content;
  return [
    `# ${product.name}`,
    '',
    `> ${product.summary}`,
    '',
    content.pages.intro,
    '',
    ...sections.flatMap((section) => [
      `## ${section.title}`,
      '',
      ...section.links.map((link) => `- [${link.title}](${link.url}): ${link.note}`),
      '',
    ]),
  ].join('\n');
}

function llmsFullTxt({ content, base, openapi, docs, sections, url }: Parts): string {
  const { product } = content;
  const discoveryLines = sections
    .flatMap((section) => section.links)
    .map((link) => `- ${link.title}: ${link.url}`)
    .concat([
      `- MCP endpoint (Streamable HTTP, POST, no credential): ${url(MCP_PATH)}`,
      `- A2A endpoint (JSON-RPC message/send): ${url(A2A_PATH)}`,
      `- Health: ${url('/healthz')}`,
    ]);
  const fullOrder: (DocId | 'legal')[] = ['overview', 'security', 'pricing', 'cli', 'api', 'auth', 'webhooks'];
  return [
    `# ${product.name}`,
    '',
    `> ${product.summary}`,
    '',
    `This file holds all of Coffer's documentation in one place: product, security model, pricing, CLI, API, ` +
      `authentication and webhooks. Version ${content.version}; API description "${openapi.info.title}" ` +
      `version ${openapi.info.version}; base URL ${base}.`,
    '',
    ...fullOrder.flatMap((id) => [demoteHeadings(docs[id]).trimEnd(), '']),
    '## Discovery and agent endpoints',
    '',
    ...discoveryLines,
    '',
  ].join('\n');
}

function skillMd({ content, docs, titles, pricingTable, url }: Parts): string {
  const { product } = content;
  return [
    '---',
    `name: ${product.skillName}`,
    `description: ${product.agentSkillDescription}`,
    '---',
    '',
    `# ${product.name} backup`,
    '',
    product.summary,
    '',
    body(docs.cli).trimEnd(),
    '',
    `## ${titles.pricing}`,
    '',
    pricingTable,
    '',
    `## ${titles.security}`,
    '',
    body(demoteHeadings(docs.security)).replace(/^## /gm, '### ').trimEnd(),
    '',
    `More: ${url('/llms-full.txt')} (all docs), ${url('/api-docs')} (API reference).`,
    '',
  ].join('\n');
}

/** Every static discovery resource by path. */
function resources(parts: Parts, texts: Pick<Site, 'llmsTxt' | 'llmsFullTxt' | 'skillMd'>, docs: Site['json']) {
  const { content, sections, url } = parts;
  const { product } = content;
  const landing = landingHtml(product.name, product.summary, content.pages.intro, sections);
  const resources = new Map<string, Resource>();
  const add = (path: string, type: string, bytes: Buffer | string, headers: Record<string, string> = {}) => {
    const buffer = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
    resources.set(path, { type, body: buffer, etag: etagOf(buffer), headers });
  };
  add('/', MEDIA.html, landing);
  add('/llms.txt', MEDIA.markdown, texts.llmsTxt);
  add('/.well-known/llms.txt', MEDIA.markdown, texts.llmsTxt);
  add('/llms-full.txt', MEDIA.markdown, texts.llmsFullTxt);
  for (const link of sections.flatMap((section) => section.links)) {
    if (link.doc) add(link.path, MEDIA.markdown, parts.docs[link.doc]);
  }
  add('/legal.md', MEDIA.markdown, parts.docs.legal);
  add('/logo.svg', MEDIA.svg, content.logoSvg);
  add('/.well-known/api-catalog', MEDIA.linkset, json(docs.apiCatalog), {
    link: `<${url('/.well-known/api-catalog')}>; rel="api-catalog"`,
  });
  add('/.well-known/oauth-protected-resource', MEDIA.json, json(docs.oauthProtectedResource));
  add('/.well-known/agent-card.json', MEDIA.json, json(docs.agentCard));
  add('/.well-known/agent.json', MEDIA.json, json(docs.agentCard));
  add('/.well-known/ai-plugin.json', MEDIA.json, json(docs.aiPlugin));
  const card = json(docs.serverCard);
  add('/.well-known/mcp', MEDIA.json, card);
  add('/.well-known/mcp/server-card.json', MEDIA.json, card);
  add('/mcp/server-card', MEDIA.serverCard, card);
  add('/.well-known/mcp/catalog.json', MEDIA.json, json(docs.aiCatalog));
  add('/.well-known/ai-catalog.json', MEDIA.json, json(docs.aiCatalog));
  add('/.well-known/agent-skills/index.json', MEDIA.json, json(docs.skillsIndex));
  add(skillPath(content), MEDIA.markdown, texts.skillMd);
  const apiDocs = apiDocsPage(parts.openapi.info.title);
  add('/api-docs', MEDIA.html, apiDocs.html, { 'content-security-policy': apiDocs.csp });
  return resources;
}

export function buildSite(content: Content, input: SiteInput): Site {
  const parts = siteParts(content, input);
  const texts = { llmsTxt: llmsTxt(parts), llmsFullTxt: llmsFullTxt(parts), skillMd: skillMd(parts) };
  const info = serverInfo(parts);
  const documents = {
    apiCatalog: apiCatalog(parts),
    oauthProtectedResource: oauthProtectedResource(parts),
    agentCard: agentCard(parts),
    aiPlugin: aiPlugin(parts),
    serverCard: serverCard(parts, info),
    aiCatalog: aiCatalog(parts),
    skillsIndex: skillsIndex(parts, texts.skillMd),
  };
  return {
    base: parts.base,
    version: content.version,
    docs: parts.docs,
    titles: parts.titles,
    pricingTable: parts.pricingTable,
    serverInfo: info,
    ...texts,
    json: documents,
    resources: resources(parts, texts, documents),
  };
}
