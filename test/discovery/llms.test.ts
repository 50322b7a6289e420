/**
 * llms.txt against the llmstxt.org structure (a faithful port of the reference parser, AnswerDotAI/llms-txt
 * `parse_llms_file`), llms-full.txt, auth.md and webhooks.md content, and one-source consistency of the facts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLAN_RULES, PLANS } from '../../src/domain/plans.js';
import { SCOPES } from '../../src/domain/scopes.js';
import { loadContent } from '../../src/discovery/content.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { get } from './helpers.js';

interface LlmsLink {
  title: string;
  url: string;
  desc: string | undefined;
}

/** Port of llms_txt.core.parse_llms_file: split on H2, then H1 / optional "> summary" / info; links only under H2. */
function parseLlmsFile(txt: string) {
  const [start, ...rest] = txt.split(/^##\s*(.*?$)/m);
  const sections: Record<string, LlmsLink[]> = {};
  for (let i = 0; i < rest.length; i += 2) {
    const lines = rest[i + 1]!.trim()
      .split(/\n+/)
      .filter((line) => line.trim());
    sections[rest[i]!] = lines.map((line) => {
      const match = /-\s*\[(?<title>[^\]]+)\]\((?<url>[^)]+)\)(?::\s*(?<desc>.*))?/.exec(line);
      if (!match) throw new Error(`not a link line under "## ${rest[i]}": ${line}`);
      return match.groups as unknown as LlmsLink;
    });
  }
  const head = /^#\s*(?<title>.+?$)\n+(?:^>\s*(?<summary>.+?$))?\n+(?<info>.*)/ms.exec(start!.trim());
  if (!head) throw new Error('no "# Title" at the top');
  return { ...(head.groups as { title: string; summary?: string; info: string }), sections };
}

let server: TestServer;
const text: Record<string, string> = {};
const types: Record<string, string> = {};

beforeAll(async () => {
  server = await startTestServer();
  for (const path of [
    '/llms.txt',
    '/.well-known/llms.txt',
    '/llms-full.txt',
    '/auth.md',
    '/webhooks.md',
    '/docs/pricing.md',
    '/openapi.json',
  ]) {
    const response = await get(server.url + path);
    expect(response.status, path).toBe(200);
    text[path] = response.text;
    types[path] = response.headers.get('content-type')!;
  }
});
afterAll(() => server?.stop());

describe('/llms.txt (llmstxt.org)', () => {
  it('parses with the reference rules: H1, summary, prose, then H2 lists of links only', () => {
    const parsed = parseLlmsFile(text['/llms.txt']!);
    expect(parsed.title).toBe('Coffer');
    expect(parsed.summary).toMatch(/zero-knowledge encrypted backup service/);
    expect(parsed.info.trim().length).toBeGreaterThan(0);
    expect(Object.keys(parsed.sections)).toEqual(['Docs', 'API', 'Agents', 'Optional']);
    for (const [section, links] of Object.entries(parsed.sections)) {
      expect(links.length, section).toBeGreaterThan(0);
      for (const link of links) {
        expect(link.url.startsWith(`${server.url}/`), link.url).toBe(true);
        expect(link.desc, link.title).toBeTruthy();
      }
    }
    expect(types['/llms.txt']).toBe('text/markdown; charset=utf-8');
  });

  it('has no non-link line under any H2 and is not H1-only', () => {
    const lines = text['/llms.txt']!.split('\n');
    const firstH2 = lines.findIndex((line) => line.startsWith('## '));
    expect(firstH2).toBeGreaterThan(2);
    for (const line of lines.slice(firstH2)) {
      if (line.trim() === '' || line.startsWith('## ')) continue;
      expect(line).toMatch(/^- \[[^\]]+\]\([^)]+\): \S/);
    }
  });

  it('links every doc it promises, and every link answers 200', async () => {
    const parsed = parseLlmsFile(text['/llms.txt']!);
    const urls = Object.values(parsed.sections)
      .flat()
      .map((link) => link.url);
    for (const path of ['/openapi.json', '/api-docs', '/auth.md', '/webhooks.md', '/llms-full.txt', '/mcp/server-card']) {
      expect(urls).toContain(server.url + path);
    }
    for (const url of urls) expect((await get(url)).status, url).toBe(200);
  });

  it('is served identically at /.well-known/llms.txt', () => {
    expect(text['/.well-known/llms.txt']).toBe(text['/llms.txt']);
  });
});

describe('/llms-full.txt', () => {
  it('starts with the H1 and holds every section: product, security, pricing, CLI, API, auth, webhooks', () => {
    const full = text['/llms-full.txt']!;
    expect(full.startsWith('# Coffer\n')).toBe(true);
    expect(types['/llms-full.txt']).toMatch(/^text\/markdown/);
    const h2 = full.split('\n').filter((line) => line.startsWith('## '));
    for (const heading of [
      'Product overview',
      'Security model',
      'Plans and pricing',
      'CLI install and quick start',
      'API guide',
      'Authentication',
      'Webhooks',
      'Discovery and agent endpoints',
    ]) {
      expect(h2).toContain(`## ${heading}`);
    }
    expect(full.split('\n').filter((line) => /^# /.test(line))).toEqual(['# Coffer']);
  });

  it('lists every API operation of /openapi.json', () => {
    const openapi = JSON.parse(text['/openapi.json']!);
    for (const [path, item] of Object.entries<Record<string, { operationId: string }>>(openapi.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        expect(text['/llms-full.txt']).toContain(`\`${method.toUpperCase()} ${path}\` (\`${operation.operationId}\`)`);
      }
    }
  });
});

describe('/auth.md', () => {
  it('names both headers, every scope, and the 401/403 codes', () => {
    const auth = text['/auth.md']!;
    expect(types['/auth.md']).toMatch(/^text\/markdown/);
    expect(auth).toContain('Authorization: Bearer');
    expect(auth).toContain('x-api-key:');
    for (const scope of SCOPES) expect(auth).toContain(`\`${scope}\``);
    expect(auth).toMatch(/\| 401 \| `authentication_required` \|/);
    expect(auth).toMatch(/\| 403 \| `insufficient_scope` \|/);
    expect(auth).toContain('details.requiredPermission');
  });
});

describe('/webhooks.md', () => {
  it('says none are emitted, lists the six reserved names and the no-secrets rule', () => {
    const webhooks = text['/webhooks.md']!;
    expect(webhooks).toMatch(/emits \*\*no outbound webhooks\*\*/);
    const reserved = [...webhooks.matchAll(/^- `(backup\.[a-z]+)`$/gm)].map((m) => m[1]);
    expect(reserved).toEqual([
      'backup.created',
      'backup.uploaded',
      'backup.finalized',
      'backup.failed',
      'backup.expired',
      'backup.deleted',
    ]);
    expect(webhooks).toMatch(/must never contain passphrases, plaintext archive contents or\s+unwrapped keys/);
  });
});

describe('one source of facts', () => {
  it('prices come from plans.json and cadence/retention from the domain rules, the same in every document', () => {
    const { pricing } = loadContent();
    const rows = text['/docs/pricing.md']!.split('\n').filter((line) => /^\| \w+ \(`/.test(line));
    expect(rows).toHaveLength(PLANS.length);
    PLANS.forEach((plan, i) => {
      const row = rows[i]!;
      expect(row).toContain(`(\`${plan}\`)`);
      expect(row).toContain(`$${pricing.plans[plan].price} / month`);
      expect(row).toContain(`(\`${PLAN_RULES[plan].interval}\`)`);
      expect(row).toContain(`| ${PLAN_RULES[plan].retentionMs / 86_400_000} days |`);
      expect(text['/llms-full.txt']).toContain(row);
    });
  });
});
