import { describe, expect, it } from 'vitest';
import { formatBytes } from '../../src/domain/words.js';

describe('formatBytes', () => {
  it('the console style: binary units, one decimal below 10, a dash when unknown', () => {
    const cases: Array<[number | null | undefined, string]> = [
      [null, '—'],
      [undefined, '—'],
      [Number.NaN, '—'],
      [0, '0 B'],
      [1023, '1023 B'],
      [1024, '1.0 KiB'],
      [1536, '1.5 KiB'],
      [10 * 1024, '10 KiB'],
      [123_456, '121 KiB'],
      [64 * 1024 * 1024, '64 MiB'],
      [5 * 1024 ** 5, '5120 TiB'],
    ];
    for (const [n, text] of cases) expect(formatBytes(n), String(n)).toBe(text);
  });

  it("the CLI style: one decimal at every size, '-' when unknown", () => {
    const cli = (n: number | null | undefined) => formatBytes(n, { empty: '-', fixed: true });
    expect([null, Infinity, 0, 999.6, 1024, 123_456, 256 * 1024 ** 2, 3 * 1024 ** 4].map(cli)).toEqual([
      '-',
      '-',
      '0 B',
      '1000 B',
      '1.0 KiB',
      '120.6 KiB',
      '256.0 MiB',
      '3.0 TiB',
    ]);
  });
});
