/** Words shown to people, one rule for the console and the CLI: a count with its noun ("1 file", "2 files"). */
export const plural = (count: number, one: string, many = `${one}s`): string => `${count} ${count === 1 ? one : many}`;

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/**
 * A byte count in binary units ("812 B", "4.2 KiB", "37 MiB"), one rule for the console, the admin page and the
 * CLI. `fixed` keeps one decimal at every size: the CLI's progress line and tables keep their width as numbers grow.
 * Absent or not finite: `empty`.
 */
export function formatBytes(
  n: number | null | undefined,
  { empty = '—', fixed = false }: { empty?: string; fixed?: boolean } = {},
): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return empty;
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) return `${Math.round(value)} B`;
  return `${fixed || value < 10 ? value.toFixed(1) : Math.round(value)} ${BYTE_UNITS[unit]}`;
}
