/** What every row mapper shares. */

// PostgreSQL bigint columns can arrive as strings; SQLite returns numbers. Normalise once here.
export const num = (value: number | string): number => Number(value);
export const numOrNull = (value: number | string | null): number | null => (value === null ? null : Number(value));
