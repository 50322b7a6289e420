/**
 * Minting keys from a credential: a key made with a credential never holds a scope the credential lacks and
 * never outlives it. Every path that mints a key on behalf of a credential (today the console's
 * `POST /console/api/keys`) asks `mintWithin` first; operators (`coffer admin keys create`) are not bound by it.
 */
import type { Scope } from './scopes.js';

/** What a credential grants: its scopes, and when it ends (null: never). */
export interface Grant {
  scopes: readonly Scope[];
  expiresAt: number | null;
}

export type MintDecision =
  /** `capped`: the requested expiry was later than the credential's, so the key ends with the credential. */
  | { ok: true; grant: { scopes: Scope[]; expiresAt: number | null }; capped: boolean }
  /** A requested scope the credential does not hold: refused, never silently narrowed or widened. */
  | { ok: false; missing: Scope };

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
  const expiresAt = earlierEnd(requested.expiresAt, credential.expiresAt);
  return { ok: true, grant: { scopes: [...requested.scopes], expiresAt }, capped: expiresAt !== requested.expiresAt };
}
