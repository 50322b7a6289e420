/**
 * Notifications of an agent run (docs/client.md#notifications): a healthchecks.io-style ping URL (`<url>/start`
 * before, `<url>` on success, `<url>/fail` on failure) and URLs that receive a POST of a JSON summary on success,
 * failure or an overdue backup (ntfy and chat webhooks take it: `text` and `content` carry one line).
 *
 * What is sent is built here and only here, from counts, sizes, ids, times and a failure category: never the API
 * key, a passphrase, a recipient, a file name, a path or an error message (those can name local files).
 */
import { plural } from '../../domain/words.js';
import os from 'node:os';
import type { Profile } from './profiles.js';

export type NotifyEvent = 'start' | 'success' | 'failure' | 'overdue' | 'drill-failed';

/** Why a run failed, as a category (an error message could name files, so it is never sent). */
export type FailureKind = 'hook' | 'source' | 'too-large' | 'server' | 'network' | 'integrity' | 'configuration' | 'interrupted' | 'other';

export interface RunFacts {
  profile: string;
  backupId?: string;
  fileCount?: number;
  plaintextBytes?: number;
  ciphertextBytes?: number;
  durationSeconds?: number;
  failure?: FailureKind;
  exitCode?: number;
  lastSuccessAt?: string | null;
  nextDueAt?: string | null;
}

export interface Summary extends RunFacts {
  source: 'coffer';
  event: NotifyEvent;
  host: string;
  at: string;
  /** One line for humans (ntfy, Slack/Mattermost `text`, Discord `content`). */
  text: string;
  content: string;
}

export interface Delivery {
  /** The target without path and query (those often hold the webhook's secret). */
  target: string;
  ok: boolean;
  detail: string;
}

const NOTIFY_TIMEOUT_MS = 10_000;

function line(event: NotifyEvent, facts: RunFacts, host: string): string {
  const who = `coffer: profile ${facts.profile} on ${host}`;
  switch (event) {
    case 'start':
      return `${who}: backup started`;
    case 'success':
      return `${who}: backup ${facts.backupId ?? ''} READY (${plural(facts.fileCount ?? 0, 'file')}, ${plural(facts.ciphertextBytes ?? 0, 'byte')} encrypted)`;
    case 'failure':
      return `${who}: backup FAILED (${facts.failure ?? 'other'}, exit ${facts.exitCode ?? 1})`;
    case 'overdue':
      return `${who}: backup OVERDUE (last success ${facts.lastSuccessAt ?? 'never'})`;
    case 'drill-failed':
      return `${who}: restore drill FAILED for backup ${facts.backupId ?? ''} (${facts.failure ?? 'integrity'})`;
  }
}

/** The JSON summary of an event: the only thing that leaves the host. */
export function summary(event: NotifyEvent, facts: RunFacts, now = new Date()): Summary {
  const host = os.hostname();
  const text = line(event, facts, host);
  const pick: RunFacts = {
    profile: facts.profile,
    ...(facts.backupId !== undefined ? { backupId: facts.backupId } : {}),
    ...(facts.fileCount !== undefined ? { fileCount: facts.fileCount } : {}),
    ...(facts.plaintextBytes !== undefined ? { plaintextBytes: facts.plaintextBytes } : {}),
    ...(facts.ciphertextBytes !== undefined ? { ciphertextBytes: facts.ciphertextBytes } : {}),
    ...(facts.durationSeconds !== undefined ? { durationSeconds: facts.durationSeconds } : {}),
    ...(facts.failure !== undefined ? { failure: facts.failure } : {}),
    ...(facts.exitCode !== undefined ? { exitCode: facts.exitCode } : {}),
    ...(facts.lastSuccessAt !== undefined ? { lastSuccessAt: facts.lastSuccessAt } : {}),
    ...(facts.nextDueAt !== undefined ? { nextDueAt: facts.nextDueAt } : {}),
  };
  return { source: 'coffer', event, host, at: now.toISOString(), ...pick, text, content: text };
}

const origin = (url: string) => new URL(url).origin;

/**
 * ntfy shows a posted JSON body as raw text unless the request says how to read it: with these headers ntfy (2.10
 * and later, message templating) shows the summary's `text` under a title, with a priority and an emoji tag. Other
 * targets ignore them; Slack and Mattermost read `text`, Discord `content` (docs/client.md#notifications).
 */
export function ntfyHeaders(event: NotifyEvent): Record<string, string> {
  const title = {
    start: 'backup started',
    success: 'backup done',
    failure: 'backup FAILED',
    overdue: 'backup overdue',
    'drill-failed': 'restore drill FAILED',
  }[event];
  return {
    'x-template': 'yes',
    'x-title': `Coffer: ${title}`,
    'x-message': '{{.text}}',
    'x-priority': event === 'failure' || event === 'overdue' || event === 'drill-failed' ? '4' : '3',
    'x-tags': event === 'success' ? 'white_check_mark' : event === 'start' ? 'hourglass' : 'warning',
  };
}

/**
 * The URLs an event goes to: the healthchecks ping (start, success, failure) and the profile's targets. A failed
 * restore drill goes to the failure targets (the healthchecks check follows the backups, which may be fine).
 */
export function targetsFor(notify: Profile['notify'], event: NotifyEvent): string[] {
  if (event === 'drill-failed') return [...notify.failure];
  const urls: string[] = [];
  if (notify.healthchecks && event !== 'overdue') {
    const base = notify.healthchecks.replace(/\/+$/, '');
    urls.push(event === 'start' ? `${base}/start` : event === 'failure' ? `${base}/fail` : base);
  }
  if (event !== 'start') urls.push(...notify[event]);
  return urls;
}

/**
 * POSTs the summary to every target of the event, at once, each bounded by a timeout. A target that fails is
 * reported (never thrown): a notification never changes the outcome of the backup. Redirects are not followed: a
 * 3xx answer is a failed delivery.
 */
export async function notify(
  notifyConfig: Profile['notify'],
  event: NotifyEvent,
  facts: RunFacts,
  signal?: AbortSignal,
): Promise<Delivery[]> {
  const urls = targetsFor(notifyConfig, event);
  if (urls.length === 0) return [];
  const body = JSON.stringify(summary(event, facts));
  return Promise.all(
    urls.map(async (url): Promise<Delivery> => {
      const timeout = AbortSignal.timeout(NOTIFY_TIMEOUT_MS);
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'user-agent': 'coffer-notify', ...ntfyHeaders(event) },
          body,
          // Never followed: a 307/308 would re-send the summary to wherever the target points (another origin,
          // this host's loopback). A redirect is a failed delivery, reported like any other.
          redirect: 'manual',
          signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        });
        await response.body?.cancel();
        if (response.status >= 300 && response.status < 400) {
          return { target: origin(url), ok: false, detail: `HTTP ${response.status}: a redirect, not followed` };
        }
        return { target: origin(url), ok: response.ok, detail: `HTTP ${response.status}` };
      } catch (error) {
        return {
          target: origin(url),
          ok: false,
          detail: timeout.aborted
            ? 'no answer within 10 s'
            : (((error as Error).cause as Error | undefined)?.message ?? (error as Error).message),
        };
      }
    }),
  );
}
