/* global process */
/**
 * Redraws docs/bench/*.svg, the generated target sections and the summary of BENCHMARKS.md from the saved
 * bench/results/*.json,
 * without measuring anything (after a change to the chart or table code).
 *
 *   node bench/render.js
 */
import fs from 'node:fs';
import path from 'node:path';
import { RESULTS_DIR, render, writeSummary } from './lib/report.js';

for (const name of fs
  .readdirSync(RESULTS_DIR)
  .filter((n) => n.endsWith('.json'))
  .sort()) {
  const result = JSON.parse(fs.readFileSync(path.join(RESULTS_DIR, name), 'utf8'));
  if (result.id && result.name) render(result);
}
writeSummary();
process.exitCode = 0;
