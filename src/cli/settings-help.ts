/** A settings table of src/config.ts as `--help` text: name, default, meaning (and the values of a choice). */
import type { Setting } from '../config.js';

export function settingsHelp(title: string, table: Readonly<Record<string, Setting>>): string {
  const rows = [
    ['VARIABLE', 'DEFAULT', 'MEANING'],
    ...Object.values(table).map((s) => [s.name, s.default ?? '(unset)', s.values ? `${s.about}: ${s.values.join(' | ')}` : s.about]),
  ];
  const width = (column: number) => Math.max(...rows.map((row) => row[column]!.length));
  const [name, value] = [width(0), width(1)];
  const lines = rows.map(([n, d, about]) => `  ${n!.padEnd(name)}  ${d!.padEnd(value)}  ${about}`);
  return `\n${title} (an empty value counts as unset; an invalid one stops with a line naming it):\n${lines.join('\n')}`;
}
