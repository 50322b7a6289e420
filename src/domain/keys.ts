/** API key lifecycle (docs/api-rules.md#api-keys): pure. */

/** An API key as issued: `cfk_` and 43 base64url characters (32 random bytes). */
export const API_KEY_PATTERN = /^cfk_[A-Za-z0-9_-]{43}$/;

export const KEY_STATUSES = ['active', 'revoked', 'expired'] as const;
export type KeyStatus = (typeof KEY_STATUSES)[number];

/** Revoked wins over expired; a key without an end never expires. */
export function keyStatus(key: { revokedAt: number | null; expiresAt: number | null }, now: number): KeyStatus {
  if (key.revokedAt !== null) return 'revoked';
  return key.expiresAt !== null && key.expiresAt <= now ? 'expired' : 'active';
}
