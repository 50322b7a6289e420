/** The operator console's HTTP client: /admin/api with the operator cookie (httpOnly) and its CSRF token. */
import type { Static } from '@sinclair/typebox';
import type {
  AccountDetail,
  GraceBody,
  LabelBody,
  OperatorSessionBody,
  OperatorSignInBody,
  Overview,
  OwnerLink,
  PlanBody,
  QuotaBody,
} from '../../../src/contract/admin-schemas.js';
import { resolveRoute, type Call, type CallArguments } from '../route-map.js';

export type OverviewData = Static<typeof Overview>;
export type AccountData = Static<typeof AccountDetail>;
export type SessionData = Static<typeof OperatorSessionBody>;
export type OwnerLinkData = Static<typeof OwnerLink>;
export type Plan = Static<typeof PlanBody>['plan'];

/** Every route under /admin/api the operator console calls (route-map.ts), its bodies the server's own schemas. */
interface AdminRoutes {
  'POST /session': { request: Static<typeof OperatorSignInBody>; response: SessionData };
  'GET /session': { response: SessionData };
  'DELETE /session': { response: undefined };
  'GET /overview': { response: OverviewData };
  'GET /accounts/:id': { response: AccountData };
  'PUT /accounts/:id/plan': { request: Static<typeof PlanBody>; response: AccountData };
  'PUT /accounts/:id/deletion-grace': { request: Static<typeof GraceBody>; response: AccountData };
  'PUT /accounts/:id/quota': { request: Static<typeof QuotaBody>; response: AccountData };
  'PUT /accounts/:id/label': { request: Static<typeof LabelBody>; response: AccountData };
  'POST /accounts/:id/keys/:keyId/revoke': { response: AccountData };
  'POST /accounts/:id/login-link': { response: OwnerLinkData };
}

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

export async function call<R extends keyof AdminRoutes>(
  route: R,
  ...[options]: CallArguments<R, AdminRoutes[R], unknown>
): Promise<AdminRoutes[R]['response']> {
  const { params, body } = (options ?? {}) as Call<unknown>;
  const { method, path } = resolveRoute(route, params);
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
  const response = await fetch(`/admin/api${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
  });
  if (response.status === 204) return undefined as AdminRoutes[R]['response'];
  const data = (await response.json().catch(() => ({}))) as { code?: string; message?: string } & AdminRoutes[R]['response'];
  if (!response.ok) throw new AdminError(response.status, data.code ?? 'error', data.message ?? `HTTP ${response.status}`);
  return data;
}

export { formatBytes as bytes } from '../../../src/domain/words.js';
import { ageText } from '../../../src/domain/drills.js';

/**
 * An account's newest restore drill in words: "never", "3d ago", "3d ago, reported FAILED", "20d ago (stale)". The
 * result is what the drill reported; the server cannot check it.
 */
export function drillText(row: Pick<AccountData['account'], 'lastDrillAt' | 'lastDrillResult' | 'drillStale'>): string {
  if (!row.lastDrillAt) return 'never';
  const age = ageText(Date.parse(row.lastDrillAt), Date.now());
  return `${age}${row.lastDrillResult === 'failed' ? ', reported FAILED' : ''}${row.drillStale ? ' (stale)' : ''}`;
}

export function when(isoTime: string | null): string {
  if (!isoTime) return 'never';
  return isoTime.replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}
