/** API key lifecycle (docs/api-rules.md#api-keys): pure. */

/** An API key as issued: `cfk_` and 43 base64url characters (32 random bytes). */
export const API_KEY_PATTERN = /^cfk_[A-Za-z0-9_-]{43}$/;

/** The longest label a key may carry (characters; below the audit trail's 60-character run of base64 it refuses). */
export const KEY_LABEL_MAX = 48;
/** Letters and digits of any script, spaces, and . _ - @ : / ( ) # + , ' */
const KEY_LABEL = /^[\p{L}\p{N} ._@:/()#+,'-]+$/u;

/**
 * What is wrong with a key's label ("laptop", "db host (nightly)"), or null when it may be used. A label is the
 * owner's name for a key, shown in the key lists and the audit trail: short plain text, never a secret.
 */
export function keyLabelProblem(label: string): string | null {
  if (label.trim() !== label) return 'a label may not start or end with a space';
  if (label.length === 0) return 'a label may not be empty';
  if ([...label].length > KEY_LABEL_MAX) return `a label is at most ${KEY_LABEL_MAX} characters`;
  if (!KEY_LABEL.test(label)) return "a label holds letters, digits, spaces and . _ - @ : / ( ) # + , ' only";
  if (/cf[kls]_/i.test(label)) return 'a label may not hold an API key or a token (it is shown in lists and the audit trail)';
  return null;
}

export const KEY_STATUSES = ['active', 'revoked', 'expired'] as const;
export type KeyStatus = (typeof KEY_STATUSES)[number];

/** Revoked wins over expired; a key without an end never expires. */
export function keyStatus(key: { revokedAt: number | null; expiresAt: number | null }, now: number): KeyStatus {
  if (key.revokedAt !== null) return 'revoked';
  return key.expiresAt !== null && key.expiresAt <= now ? 'expired' : 'active';
}

/** A host account's label: short, printable, safe in a shell line and the audit trail (also checked in the console page). */
export const HOST_LABEL = /^[A-Za-z0-9][A-Za-z0-9._ -]{0,39}$/;
