/**
 * The Node versions Coffer runs on (package.json `engines`, docs/runtime.md). `coffer` checks them before anything
 * else loads, so an unsupported Node gets one line, not a stack trace. No imports and nothing recent in the syntax:
 * this has to run on the Nodes it turns away. scripts/check-node.mjs is the same check for `npm start`, before the
 * build (test/cli/node-check.test.ts keeps the two and package.json in step).
 */
export const SUPPORTED_NODE = '^20.19.0 || ^22.16.0 || >=24';

function parts(version: string): number[] {
  return version
    .replace(/^v/, '')
    .split('.')
    .map((part) => parseInt(part, 10) || 0);
}

function atLeast(version: number[], floor: number[]): boolean {
  for (let i = 0; i < 3; i++) {
    const a = version[i] || 0;
    const b = floor[i] || 0;
    if (a !== b) return a > b;
  }
  return true;
}

/** Whether `version` (e.g. `22.16.0`) satisfies `range`, written as `^x.y.z` and `>=x.y.z` joined by `||`. */
export function nodeSupported(version: string, range: string = SUPPORTED_NODE): boolean {
  const v = parts(version);
  return range.split('||').some((alternative) => {
    const text = alternative.trim();
    if (text.indexOf('^') === 0) {
      const floor = parts(text.slice(1));
      return v[0] === floor[0] && atLeast(v, floor);
    }
    return text.indexOf('>=') === 0 && atLeast(v, parts(text.slice(2)));
  });
}
