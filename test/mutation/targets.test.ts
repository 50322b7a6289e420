/**
 * Mutation testing cannot drift (test/mutation/targets.mjs): Stryker mutates exactly the targets named there, each
 * named span still covers its declarations, and test/helpers/README.md publishes a score, with the commit it was
 * measured on, for every target, above the target's break threshold.
 */
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';

interface Target {
  name: string;
  file: string;
  from?: string;
  through?: string;
  floor: number;
}
// JavaScript modules (Stryker loads them), typed here.
const stryker = (await import('../../stryker.config.mjs' as string)).default as { mutate: string[] };
const { TARGETS, mutatePatterns, targetLines } = (await import('./targets.mjs' as string)) as {
  TARGETS: Target[];
  mutatePatterns: () => string[];
  targetLines: (target: Target) => { start: number; end: number } | null;
};

const README = fs.readFileSync('test/helpers/README.md', 'utf8');

describe('mutation targets', () => {
  it('Stryker mutates the named targets, their lines found in the sources as they are now', () => {
    expect(stryker.mutate).toEqual(mutatePatterns());
    expect(new Set(TARGETS.map((target) => target.name)).size).toBe(TARGETS.length);
  });

  it('a named span starts at its first declaration and ends with its last', () => {
    for (const target of TARGETS.filter((t) => t.from)) {
      const source = fs.readFileSync(target.file, 'utf8').split('\n');
      const { start, end } = targetLines(target)!;
      const declares = (name: string) => new RegExp(`\\b(function|const|let|class|interface|type)\\s+${name}\\b`);
      expect(source[start - 1], target.name).toMatch(declares(target.from!));
      const last = source.findIndex((line, i) => i >= start - 1 && declares(target.through ?? target.from!).test(line));
      expect(last + 1, target.name).toBeLessThanOrEqual(end);
      expect(source[end - 1]!.trim(), target.name).toMatch(/^[}\]);]+;?$/);
    }
  });

  it('a name missing from its file stops the run, naming it', () => {
    expect(() => targetLines({ name: 'x', file: 'src/client/chain.ts', from: 'noSuchDeclaration', floor: 0 })).toThrow(
      'src/client/chain.ts declares no "noSuchDeclaration"',
    );
  });

  it('test/helpers/README.md publishes each score with its commit, above the break threshold', () => {
    for (const target of TARGETS) {
      const row = README.split('\n').find((line) => line.startsWith(`| ${target.name} |`));
      expect(row, `a row for "${target.name}" in the README's table of scores`).toBeDefined();
      const [, , , score, , commit] = row!.split('|').map((cell) => cell.trim());
      expect(commit, target.name).toMatch(/^[0-9a-f]{7,40}$/);
      expect(Number.parseFloat(score!), target.name).toBeGreaterThan(target.floor);
    }
  });
});
