/**
 * The break thresholds of mutation testing, one per target (test/mutation/targets.mjs): reads Stryker's JSON report
 * (reports/mutation/mutation.json) and prints each target's score (killed and timed out, of those killed, timed out,
 * survived or not covered) with the commit; exits 1 when one is under its floor or has no mutants in the report.
 * `npm run test:mutation` and `npm run test:mutation:ci` (.ci/run) end with it; `--table` prints the README's rows.
 */
/* global process, console */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { TARGETS, targetLines } from './targets.mjs';

const REPORT = process.argv.slice(2).find((arg) => !arg.startsWith('--')) ?? 'reports/mutation/mutation.json';
/** `--table`: also the rows of test/helpers/README.md's table of scores. */
const TABLE = process.argv.includes('--table');
const DETECTED = new Set(['Killed', 'Timeout']);
const UNDETECTED = new Set(['Survived', 'NoCoverage']);

const report = JSON.parse(fs.readFileSync(REPORT, 'utf8'));
const files = Object.fromEntries(Object.entries(report.files).map(([file, entry]) => [path.relative('.', path.resolve(file)), entry]));
let commit = 'unknown';
try {
  commit = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { encoding: 'utf8' }).trim();
} catch {
  // not a git checkout
}

let failed = false;
const rows = ['| Target | Mutated | Score | Detected | Commit |', '| --- | --- | --- | --- | --- |'];
console.log(`mutation scores at ${commit} (${REPORT}):`);
for (const target of TARGETS) {
  const lines = targetLines(target);
  const mutants = (files[target.file]?.mutants ?? []).filter(
    (mutant) => !lines || (mutant.location.start.line >= lines.start && mutant.location.end.line <= lines.end),
  );
  const detected = mutants.filter((mutant) => DETECTED.has(mutant.status)).length;
  const undetected = mutants.filter((mutant) => UNDETECTED.has(mutant.status)).length;
  const where = lines ? `${target.file}:${lines.start}-${lines.end}` : target.file;
  if (detected + undetected === 0) {
    console.log(`  ${target.name} (${where}): no mutants in the report`);
    failed = true;
    continue;
  }
  const score = (100 * detected) / (detected + undetected);
  const ok = score >= target.floor;
  const span = lines ? `${target.file} ${target.from}${target.through ? `…${target.through}` : ''}` : target.file;
  rows.push(`| ${target.name} | ${span} | ${score.toFixed(1)} % | ${detected} of ${detected + undetected} | ${commit} |`);
  if (!ok) failed = true;
  console.log(
    `  ${target.name} (${where}): ${score.toFixed(1)} % (${detected} of ${detected + undetected} detected), floor ${target.floor} %${ok ? '' : ': UNDER THE FLOOR'}`,
  );
}
if (TABLE) console.log(`\n${rows.join('\n')}`);
if (failed) {
  console.error('mutation testing: a target is under its floor or was not mutated (test/mutation/targets.mjs)');
  process.exit(1);
}
