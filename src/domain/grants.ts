/**
 * Minting keys from a credential: a key made with a credential never holds a scope the credential lacks, never
 * outlives it, and is append-only when the credential is. Every path that mints a key on behalf of a credential
 * (today the console's `POST /console/api/keys`) asks `mintWithin` first; operators (`coffer admin keys create`)
 * are not bound by it.
 */
import { SCOPES, type Scope } from './scopes.js';

/** What a credential grants: its scopes, when it ends (null: never), and whether it is append-only (domain/append-only.ts). */
export interface Grant {
  scopes: readonly Scope[];
  expiresAt: number | null;
  appendOnly?: boolean;
}

export type MintDecision =
  /** `capped`: the requested expiry was later than the credential's, so the key ends with the credential. */
  | { ok: true; grant: { scopes: Scope[]; expiresAt: number | null; appendOnly: boolean }; capped: boolean }
  /** A requested scope the credential does not hold: refused, never silently narrowed or widened. */
  | { ok: false; missing: Scope }
  /** A key without the append-only restriction, asked for with an append-only credential: refused likewise. */
  | { ok: false; missing: null; appendOnly: true };

/** The earlier of two ends, where null means never. */
function earlierEnd(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.min(a, b);
}

/** What a key requested as `requested` may be, when minted with a credential that grants `credential`. */
export function mintWithin(requested: Grant, credential: Grant): MintDecision {
  const missing = requested.scopes.find((scope) => !credential.scopes.includes(scope));
  if (missing) return { ok: false, missing };
  if (credential.appendOnly === true && requested.appendOnly !== true) return { ok: false, missing: null, appendOnly: true };
  const expiresAt = earlierEnd(requested.expiresAt, credential.expiresAt);
  return {
    ok: true,
    grant: { scopes: [...requested.scopes], expiresAt, appendOnly: requested.appendOnly === true },
    capped: expiresAt !== requested.expiresAt,
  };
}

/**
 * Whether a key with this grant can open a console session (every scope, not append-only): such a key is as strong
 * as a session, so a session mints one only while its sign-in is fresh (services/keys.ts).
 */
export const opensConsole = (grant: Pick<Grant, 'scopes' | 'appendOnly'>): boolean =>
  SCOPES.every((scope) => grant.scopes.includes(scope)) && grant.appendOnly !== true;
