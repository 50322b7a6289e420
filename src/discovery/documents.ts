/**
 * Generates every public discovery document from the content source and the OpenAPI document, for one base URL
 * (COFFER_PUBLIC_URL). Pure: the same inputs give the same bytes, so ETags are stable across processes.
 */
import { createHash } from 'node:crypto';
import { RESOLUTION_OF, STATUS_OF } from '../domain/errors.js';
import { PLAN_RULES, PLANS } from '../domain/plans.js';
import { SCOPES } from '../domain/scopes.js';
import { type Content, DOC_IDS, type DocId, renderTemplate } from './content.js';

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

const MIB = 1024 * 1024;
const DAY_MS = 86_400_000;
const HTTP_METHODS = ['get', 'post', 'put', 'patch', 'delete'];

export function formatBytes(bytes: number): string {
  if (bytes % MIB === 0) return `${bytes / MIB} MiB`;
  if (bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

export function etagOf(body: Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"`;
}

export function sha256Hex(body: Buffer | string): string {
  return createHash('sha256').update(body).digest('hex');
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function firstHeading(markdown: string): string {
  const match = /^# (.+)$/m.exec(markdown);
  if (!match) throw new Error('discovery content: every Markdown doc starts with a "# Title"');
  return match[1]!.trim();
}

/** Drops the H1 line (and the blank lines after it). */
function body(markdown: string): string {
  return markdown.replace(/^# .+\n+/, '');
}

/** Moves every heading one level down (outside code fences), so a doc can sit under an H2. */
export function demoteHeadings(markdown: string): string {
  let fenced = false;
  return markdown
    .split('\n')
    .map((line) => {
      if (line.startsWith('```')) fenced = !fenced;
      return !fenced && /^#{1,5} /.test(line) ? `#${line}` : line;
    })
    .join('\n');
}

function pricingTable(content: Content): string {
  const { currency, billingPeriod, plans } = content.pricing;
  const money = new Intl.NumberFormat('en-US', { style: 'currency', currency, minimumFractionDigits: 0 });
  const rows = PLANS.map((plan) => {
    const rules = PLAN_RULES[plan];
    const pricing = plans[plan];
    return (
      `| ${pricing.title} (\`${plan}\`) | ${money.format(pricing.price)} / ${billingPeriod} | ` +
      `1 backup per ${rules.intervalWords} (\`${rules.interval}\`) | ${rules.retentionMs / DAY_MS} days | ${pricing.bestFor} |`
    );
  });
  return ['| Plan | Price | Backup cadence | Retention | Best for |', '|---|---|---|---|---|', ...rows].join('\n');
}

function operationsList(openapi: OpenApiLike): string {
  const lines: string[] = [];
  for (const [path, item] of Object.entries(openapi.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      const operation = item[method];
      if (!operation) continue;
      const statuses = Object.keys(operation.responses ?? {}).join(', ');
      const id = operation.operationId ? ` (\`${operation.operationId}\`)` : '';
      lines.push(`- \`${method.toUpperCase()} ${path}\`${id}: ${operation.summary ?? ''}. Responses: ${statuses}.`);
    }
  }
  return lines.join('\n');
}

function scopesTable(content: Content): string {
  const rows = SCOPES.map((scope) => `| \`${scope}\` | ${content.scopes[scope]} |`);
  return ['| Scope | Grants |', '|---|---|', ...rows].join('\n');
}

function authErrors(): string {
  const codes = ['authentication_required', 'insufficient_scope'] as const;
  const rows = codes.map((code) => `| ${STATUS_OF[code]} | \`${code}\` | ${RESOLUTION_OF[code]} |`);
  return ['| Status | Code | What to do |', '|---|---|---|', ...rows].join('\n');
}

function json(value: unknown): Buffer {
  return Buffer.from(`${JSON.stringify(value, null, 2)}\n`);
}

/** What every document is built from: the content with its placeholders filled, for one base URL. */
interface Parts {
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

function serverInfo({ content, url }: Parts): Site['serverInfo'] {
  const { product } = content;
  return { name: product.mcpName, title: product.title, version: content.version, websiteUrl: url('/') };
}

/** RFC 9727 api-catalog linkset. */
function apiCatalog({ url }: Parts): object {
  return {
    linkset: [
      {
        anchor: url('/'),
        'service-desc': [{ href: url('/openapi.json'), type: 'application/json' }],
        'service-doc': [{ href: url('/api-docs'), type: 'text/html' }],
        status: [{ href: url('/healthz'), type: 'application/json' }],
      },
    ],
  };
}

function oauthProtectedResource({ content, base, url }: Parts): object {
  return {
    resource: base,
    bearer_methods_supported: ['header'],
    resource_name: `${content.product.name} API`,
    resource_documentation: url('/auth.md'),
  };
}

/** A2A agent card. */
function agentCard({ content, url }: Parts): object {
  const { product } = content;
  return {
    protocolVersion: A2A_PROTOCOL_VERSION,
    name: product.name,
    description: product.summary,
    url: url(A2A_PATH),
    preferredTransport: 'JSONRPC',
    additionalInterfaces: [{ url: url(A2A_PATH), transport: 'JSONRPC' }],
    version: content.version,
    provider: { organization: product.organization, url: url('/') },
    iconUrl: url('/logo.svg'),
    documentationUrl: url('/llms-full.txt'),
    capabilities: { streaming: false, pushNotifications: false, stateTransitionHistory: false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain', 'text/markdown'],
    skills: content.topics.map((topic) => ({
      id: topic.id,
      name: topic.name,
      description: topic.description,
      tags: topic.tags,
      examples: topic.examples,
    })),
    supportsAuthenticatedExtendedCard: false,
  };
}

function aiPlugin({ content, url }: Parts): object {
  const { product } = content;
  return {
    schema_version: 'v1',
    name_for_human: product.name,
    name_for_model: product.modelName,
    description_for_human: product.pluginDescription,
    description_for_model: product.modelDescription,
    auth: { type: 'user_http', authorization_type: 'bearer' },
    api: { type: 'openapi', url: url('/openapi.json'), is_user_authenticated: false },
    logo_url: url('/logo.svg'),
    contact_email: product.contactEmail,
    legal_info_url: url('/legal.md'),
  };
}

/** MCP server card. */
function serverCard(parts: Parts, info: Site['serverInfo']): object {
  const { url } = parts;
  return {
    $schema: MCP_SERVER_CARD_SCHEMA,
    name: info.name,
    title: info.title,
    version: info.version,
    description: parts.content.product.tagline,
    websiteUrl: info.websiteUrl,
    icons: [{ src: url('/logo.svg'), mimeType: 'image/svg+xml', sizes: ['any'] }],
    remotes: [{ type: 'streamable-http', url: url(MCP_PATH), supportedProtocolVersions: parts.mcpProtocolVersions }],
  };
}

function aiCatalog({ content, base, url }: Parts): object {
  const { product } = content;
  const host = new URL(base).hostname;
  return {
    specVersion: 'draft',
    entries: [
      {
        identifier: `urn:air:${host}:${product.mcpName.split('/')[1]}`,
        displayName: product.title,
        type: MEDIA.serverCard,
        url: url('/mcp/server-card'),
      },
    ],
  };
}

function skillPath(content: Content): string {
  return `/.well-known/agent-skills/${content.product.skillName}/SKILL.md`;
}

function skillsIndex({ content }: Parts, skill: string): object {
  const { product } = content;
  return {
    $schema: AGENT_SKILLS_SCHEMA,
    skills: [
      {
        name: product.skillName,
        type: 'skill-md',
        description: product.agentSkillDescription,
        url: skillPath(content),
        digest: `sha256:${sha256Hex(skill)}`,
      },
    ],
  };
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

function landingHtml(
  name: string,
  summary: string,
  intro: string,
  sections: { title: string; links: { title: string; path: string; note: string }[] }[],
): string {
  // Relative links: the page works whichever host name it is reached by.
  const list = sections
    .map(
      (section) =>
        `<h2>${escapeHtml(section.title)}</h2>\n<ul>\n` +
        section.links.map((l) => `<li><a href=".${escapeHtml(l.path)}">${escapeHtml(l.title)}</a>: ${escapeHtml(l.note)}</li>`).join('\n') +
        '\n</ul>',
    )
    .join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(name)}</title>
<link rel="icon" href="./logo.svg" type="image/svg+xml">
<link rel="api-catalog" href="./.well-known/api-catalog">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#1f2933}a{color:#1f5fa8}</style>
</head>
<body>
<h1>${escapeHtml(name)}</h1>
<p>${escapeHtml(summary)}</p>
<p>${escapeHtml(intro)}</p>
${list}
</body>
</html>
`;
}

/** Path of the Scalar browser bundle, served by Coffer itself (no CDN). */
export const SCALAR_ASSET_PATH = '/api-docs/scalar.js';

/**
 * The API reference page: Scalar renders /openapi.json. URLs are relative to the page, so it works behind a proxy
 * and under any host name; fonts, telemetry, the hosted agent and the MCP generator are off, so the page makes no
 * request elsewhere and offers no hosted Scalar service.
 */
export function apiDocsPage(title: string): { html: string; csp: string } {
  const configuration = {
    url: './openapi.json',
    withDefaultFonts: false,
    telemetry: false,
    agent: { disabled: true },
    mcp: { disabled: true },
    defaultOpenAllTags: true,
    showDeveloperTools: 'never',
    documentDownloadType: 'json',
  };
  const boot = `Scalar.createApiReference('#app', ${JSON.stringify(configuration)});`;
  // Only our bundle and this one inline script may run; Scalar injects its styles, and talks only to us.
  const csp = [
    "default-src 'self'",
    `script-src 'self' 'sha256-${createHash('sha256').update(boot).digest('base64')}'`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "worker-src 'self' blob:",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}: API reference</title>
<link rel="icon" href="./logo.svg" type="image/svg+xml">
</head>
<body>
<noscript>This reference needs JavaScript. The API description itself is at <a href="./openapi.json">openapi.json</a>.</noscript>
<p><a href="./docs/sdk/">SDK reference</a>: the coffer-sdk package for Node and browser applications (<a href="./downloads/coffer-sdk.tgz">coffer-sdk.tgz</a>).</p>
<div id="app"></div>
<script src=".${SCALAR_ASSET_PATH}"></script>
<script>${boot}</script>
</body>
</html>
`;
  return { html, csp };
}
