/**
 * The single source of product facts for the discovery surface: Markdown and JSON under ./content,
 * plus the domain rules (plans, scopes, error codes) and package.json (version, Node engine: lib/version.ts).
 * Every public document is generated from this and from the OpenAPI document; nothing here is repeated elsewhere.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Plan, PLANS } from '../domain/plans.js';
import { SCOPES, type Scope } from '../domain/scopes.js';
import { NODE_ENGINE, VERSION } from '../lib/version.js';

export const DOC_IDS = ['overview', 'security', 'pricing', 'cli', 'api', 'auth', 'webhooks'] as const;
export type DocId = (typeof DOC_IDS)[number];

export interface ProductFacts {
  name: string;
  title: string;
  mcpName: string;
  modelName: string;
  skillName: string;
  tagline: string;
  summary: string;
  pluginDescription: string;
  modelDescription: string;
  organization: string;
  contactEmail: string;
  license: string;
  agentSkillDescription: string;
}

export interface PlanPricing {
  title: string;
  price: number;
  bestFor: string;
}

export interface Topic {
  id: string;
  name: string;
  description: string;
  docs: DocId[];
  tags: string[];
  keywords: string[];
  examples: string[];
}

export interface PageLink {
  /** A content doc (its H1 is the link title), or an explicit title. */
  doc?: DocId;
  title?: string;
  path: string;
  note: string;
}

export interface Pages {
  intro: string;
  sections: { title: string; links: PageLink[] }[];
}

export interface Content {
  product: ProductFacts;
  pages: Pages;
  /** Software version (package.json), used wherever a document names Coffer's version. */
  version: string;
  nodeEngine: string;
  pricing: { currency: string; billingPeriod: string; plans: Record<Plan, PlanPricing> };
  scopes: Record<Scope, string>;
  topics: Topic[];
  /** Markdown templates (with {{placeholders}}), by id. */
  docs: Record<DocId | 'legal', string>;
  logoSvg: Buffer;
}

const here = path.dirname(fileURLToPath(import.meta.url));

/** ./content next to this module (src/ in development); from dist/discovery the sources are at ../../src. */
export function contentDir(): string {
  const candidates = [path.join(here, 'content'), path.resolve(here, '../../src/discovery/content')];
  const found = candidates.find((dir) => fs.existsSync(path.join(dir, 'product.json')));
  if (!found) throw new Error(`discovery content not found (looked in ${candidates.join(', ')})`);
  return found;
}

function sameKeys(what: string, actual: object, expected: readonly string[]): void {
  const keys = Object.keys(actual).sort();
  if (keys.join() !== [...expected].sort().join()) {
    throw new Error(`discovery content: ${what} must cover exactly ${expected.join(', ')} (has ${keys.join(', ')})`);
  }
}

let cached: Content | null = null;

export function loadContent(): Content {
  if (cached) return cached;
  const dir = contentDir();
  const read = (file: string) => fs.readFileSync(path.join(dir, file), 'utf8');
  const json = <T>(file: string) => JSON.parse(read(file)) as T;
  const pricing = json<Content['pricing']>('plans.json');
  const scopes = json<Content['scopes']>('scopes.json');
  const topics = json<Topic[]>('topics.json');
  sameKeys('plans.json', pricing.plans, PLANS);
  sameKeys('scopes.json', scopes, SCOPES);
  for (const topic of topics) {
    for (const doc of topic.docs) {
      if (!(DOC_IDS as readonly string[]).includes(doc)) throw new Error(`topics.json: unknown doc ${doc}`);
    }
  }
  const docs = Object.fromEntries([...DOC_IDS, 'legal'].map((id) => [id, read(`${id}.md`)])) as Content['docs'];
  cached = {
    product: json<ProductFacts>('product.json'),
    pages: json<Pages>('pages.json'),
    version: VERSION,
    nodeEngine: NODE_ENGINE,
    pricing,
    scopes,
    topics,
    docs,
    logoSvg: fs.readFileSync(path.join(dir, 'logo.svg')),
  };
  return cached;
}

/** Replaces `{{name}}` placeholders; an unknown placeholder is a bug in the content, so it throws. */
export function renderTemplate(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (_match, key: string) => {
    const value = values[key];
    if (value === undefined) throw new Error(`discovery content: unknown placeholder {{${key}}}`);
    return value;
  });
}
