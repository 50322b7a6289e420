/** Instants travel as ISO 8601 UTC strings with milliseconds (docs/api-rules.md#encoding). */
export const iso = (ms: number): string => new Date(ms).toISOString();

/** `iso` of an instant that may be absent (no expiry, not revoked): null then. */
export const isoOrNull = (ms: number | null | undefined): string | null => (ms === null || ms === undefined ? null : iso(ms));
