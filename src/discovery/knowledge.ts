/**
 * Read-only answers over the generated documentation, shared by the MCP server and the A2A agent so both say the
 * same thing. Deterministic: the same question always gets the same answer.
 */
import { PLAN_RULES, PLANS, type Plan } from '../domain/plans.js';
import type { Content, DocId, Topic } from './content.js';
import type { Site } from './documents.js';

export interface DocSection {
  doc: DocId;
  /** "Doc title" or "Doc title > Section heading". */
  title: string;
  text: string;
  url: string;
}

export interface SearchHit extends DocSection {
  score: number;
}

export interface Answer {
  topic: Topic | null;
  text: string;
}

const DAY_MS = 86_400_000;

function words(text: string): string[] {
  return text.toLowerCase().match(/[a-z0-9][a-z0-9:_-]*/g) ?? [];
}

export class Knowledge {
  readonly sections: DocSection[];
  private readonly docUrls: Record<DocId, string>;

  constructor(
    readonly content: Content,
    readonly site: Site,
  ) {
    const links = content.pages.sections.flatMap((section) => section.links);
    this.docUrls = Object.fromEntries(links.filter((link) => link.doc).map((link) => [link.doc, `${site.base}${link.path}`])) as Record<
      DocId,
      string
    >;
    this.sections = Object.keys(this.docUrls).flatMap((doc) => this.split(doc as DocId));
  }

  docUrl(doc: DocId): string {
    return this.docUrls[doc];
  }

  doc(doc: DocId): string {
    return this.site.docs[doc];
  }

  private split(doc: DocId): DocSection[] {
    const markdown = this.site.docs[doc];
    const docTitle = this.site.titles[doc];
    const parts = markdown.split(/^## /m);
    const url = this.docUrls[doc];
    const out: DocSection[] = [{ doc, title: docTitle, text: parts[0]!.replace(/^# .+\n+/, '').trim(), url }];
    for (const part of parts.slice(1)) {
      const newline = part.indexOf('\n');
      const heading = part.slice(0, newline === -1 ? undefined : newline).trim();
      out.push({ doc, title: `${docTitle} > ${heading}`, text: part.slice(newline + 1).trim(), url });
    }
    return out.filter((section) => section.text !== '');
  }

  /** Sections ranked by how often the query's words occur (title words count triple). */
  search(query: string, limit = 5): SearchHit[] {
    const terms = [...new Set(words(query).filter((w) => w.length >= 2))];
    if (terms.length === 0) return [];
    const hits = this.sections.map((section, index) => {
      const titleWords = words(section.title);
      const textWords = words(section.text);
      let score = 0;
      for (const term of terms) {
        score += 3 * titleWords.filter((w) => w.startsWith(term)).length;
        score += textWords.filter((w) => w.startsWith(term)).length;
      }
      return { ...section, score, index };
    });
    return hits
      .filter((hit) => hit.score > 0)
      .sort((a, b) => b.score - a.score || a.index - b.index)
      .slice(0, limit)
      .map(({ index: _index, ...hit }) => hit);
  }

  /** The topic whose keywords the question mentions most; ties go to the earlier topic. */
  topicFor(question: string): Topic | null {
    const asked = words(question);
    let best: Topic | null = null;
    let bestScore = 0;
    for (const topic of this.content.topics) {
      const score = asked.filter((w) => topic.keywords.includes(w)).length;
      if (score > bestScore) {
        best = topic;
        bestScore = score;
      }
    }
    return best;
  }

  topicText(topic: Topic): string {
    const parts = topic.docs.map((doc) => `${this.doc(doc).trimEnd()}\n\nSource: ${this.docUrl(doc)}`);
    return parts.join('\n\n---\n\n');
  }

  answer(question: string): Answer {
    const topic = this.topicFor(question);
    if (topic) return { topic, text: this.topicText(topic) };
    const menu = this.content.topics.map((t) => `- ${t.name}: ${t.description} For example: "${t.examples[0]}"`).join('\n');
    return {
      topic: null,
      text:
        `${this.content.product.summary}\n\nI answer questions about:\n${menu}\n\n` + `All documentation: ${this.site.base}/llms-full.txt`,
    };
  }

  pricing(): {
    currency: string;
    billingPeriod: string;
    plans: { plan: Plan; title: string; price: number; backupInterval: string; retentionDays: number; bestFor: string }[];
  } {
    const { currency, billingPeriod, plans } = this.content.pricing;
    return {
      currency,
      billingPeriod,
      plans: PLANS.map((plan) => ({
        plan,
        title: plans[plan].title,
        price: plans[plan].price,
        backupInterval: PLAN_RULES[plan].interval,
        retentionDays: PLAN_RULES[plan].retentionMs / DAY_MS,
        bestFor: plans[plan].bestFor,
      })),
    };
  }
}
