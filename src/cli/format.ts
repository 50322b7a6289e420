/** Human formatting of the client commands' output: byte counts, local times, durations. */
import { formatBytes } from '../domain/words.js';

/** Byte counts in the terminal: binary units, one decimal at every size, '-' when unknown. */
export const bytes = (n: number | null | undefined): string => formatBytes(n, { empty: '-', fixed: true });

export function localTime(iso: string | Date): string {
  const date = typeof iso === 'string' ? new Date(iso) : iso;
  return date.toLocaleString(undefined, {
    weekday: 'short',
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    timeZoneName: 'short',
  });
}

/** "3 hours 12 minutes", "45 seconds". */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const parts: string[] = [];
  const units: [number, string][] = [
    [86_400, 'day'],
    [3_600, 'hour'],
    [60, 'minute'],
  ];
  let rest = s;
  for (const [size, name] of units) {
    const count = Math.floor(rest / size);
    if (count > 0) parts.push(`${count} ${name}${count === 1 ? '' : 's'}`);
    rest -= count * size;
  }
  if (parts.length === 0) return `${rest} second${rest === 1 ? '' : 's'}`;
  return parts.slice(0, 2).join(' ');
}
