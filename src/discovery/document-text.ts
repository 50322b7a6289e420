/**
 * The text pieces of the discovery documents: sizes, digests, headings, and the tables generated from the domain
 * (plans, API operations, scopes, auth errors) that the documentation's placeholders are filled with.
 */
import { createHash } from 'node:crypto';
import { RESOLUTION_OF, STATUS_OF } from '../domain/errors.js';
import { PLAN_RULES, PLANS } from '../domain/plans.js';
import { SCOPES } from '../domain/scopes.js';
import { type Content } from './content.js';
import type { OpenApiLike } from './documents.js';

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

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export function firstHeading(markdown: string): string {
  const match = /^# (.+)$/m.exec(markdown);
  if (!match) throw new Error('discovery content: every Markdown doc starts with a "# Title"');
  return match[1]!.trim();
}

/** Drops the H1 line (and the blank lines after it). */
export function body(markdown: string): string {
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

export function pricingTable(content: Content): string {
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

export function operationsList(openapi: OpenApiLike): string {
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

export function scopesTable(content: Content): string {
  const rows = SCOPES.map((scope) => `| \`${scope}\` | ${content.scopes[scope]} |`);
  return ['| Scope | Grants |', '|---|---|', ...rows].join('\n');
}

export function authErrors(): string {
  const codes = ['authentication_required', 'insufficient_scope'] as const;
  const rows = codes.map((code) => `| ${STATUS_OF[code]} | \`${code}\` | ${RESOLUTION_OF[code]} |`);
  return ['| Status | Code | What to do |', '|---|---|---|', ...rows].join('\n');
}
