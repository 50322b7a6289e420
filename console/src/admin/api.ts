/** The operator console's HTTP client: /admin/api with the operator cookie (httpOnly) and its CSRF token. */
import type { Static } from '@sinclair/typebox';
import type { AccountDetail, OperatorSessionBody, Overview, OwnerLink } from '../../../src/contract/admin-schemas.js';

export type OverviewData = Static<typeof Overview>;
export type AccountData = Static<typeof AccountDetail>;
export type SessionData = Static<typeof OperatorSessionBody>;
export type OwnerLinkData = Static<typeof OwnerLink>;

export class AdminError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

let csrf: string | undefined;
export const setCsrf = (token: string | undefined) => (csrf = token);

export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
  const response = await fetch(`/admin/api${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  if (response.status === 204) return undefined as T;
  const data = (await response.json().catch(() => ({}))) as { code?: string; message?: string } & T;
  if (!response.ok) throw new AdminError(response.status, data.code ?? 'error', data.message ?? `HTTP ${response.status}`);
  return data;
}

export { formatBytes as bytes } from '../../../src/domain/words.js';

export function when(isoTime: string | null): string {
  if (!isoTime) return 'never';
  return isoTime.replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}
