/* global process */
/**
 * Where results go: bench/results/<name>.json (everything measured, with the raw rounds), docs/bench/<name>.svg
 * (the chart), and the generated part of BENCHMARKS.md between `<!-- bench:<id>:begin -->` and
 * `<!-- bench:<id>:end -->` (the hand-written analysis around it is left alone).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, log, machine } from './common.js';
import { barChart } from './svg.js';

/**
 * BENCH_SCRATCH=1 (set by `run.js --quick`): results go to a temp directory and BENCHMARKS.md, docs/bench and
 * bench/results are left alone, so a harness check never overwrites the published tables.
 */
export const SCRATCH = process.env.BENCH_SCRATCH === '1';
export const RESULTS_DIR = SCRATCH ? path.join(os.tmpdir(), 'coffer-bench-scratch') : path.join(ROOT, 'bench', 'results');
export const CHART_DIR = path.join(ROOT, 'docs', 'bench');
export const BENCHMARKS = path.join(ROOT, 'BENCHMARKS.md');
/** Each script runs in its own process and imports this first: the load average when the script started. */
const LOAD_AT_START = machine().loadAverage;

const cell = (value) => (value === null || value === undefined ? '' : String(value).replace(/\|/g, '\\|'));

export function markdownTable({ columns, rows }) {
  const lines = [`| ${columns.map(cell).join(' | ')} |`, `|${columns.map(() => '---').join('|')}|`];
  for (const row of rows) lines.push(`| ${row.map(cell).join(' | ')} |`);
  return lines.join('\n');
}

/** Replaces (or appends) the generated block `id` of BENCHMARKS.md. */
export function updateSection(id, body, heading) {
  if (SCRATCH) return;
  const begin = `<!-- bench:${id}:begin -->`;
  const end = `<!-- bench:${id}:end -->`;
  let text = fs.existsSync(BENCHMARKS) ? fs.readFileSync(BENCHMARKS, 'utf8') : '# Benchmarks\n';
  const block = `${begin}\n${body.trim()}\n${end}`;
  const from = text.indexOf(begin);
  const to = text.indexOf(end);
  if (from >= 0 && to > from) text = text.slice(0, from) + block + text.slice(to + end.length);
  else text = `${text.trimEnd()}\n\n## ${heading ?? id}\n\n${block}\n`;
  fs.writeFileSync(BENCHMARKS, text);
}

/**
 * result = { id, name, title, target, command, tables: [{title?, columns, rows}], verdicts: [{what, value,
 * target, met}], chart, notes?: [string], raw }
 */
export function writeResult(result) {
  const full = {
    ...result,
    machine: result.machine ?? { ...machine(), loadAverageAtStart: LOAD_AT_START },
    finishedAt: new Date().toISOString(),
  };
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const jsonPath = path.join(RESULTS_DIR, `${result.name}.json`);
  fs.writeFileSync(jsonPath, JSON.stringify(full, null, 2) + '\n');
  log(`wrote ${SCRATCH ? jsonPath : path.relative(ROOT, jsonPath)}`);
  if (!SCRATCH) render(full);
  return full;
}

/** Writes the chart and the BENCHMARKS.md section of a saved result (bench/render.js redoes all of them). */
export function render(full) {
  const result = full;
  fs.mkdirSync(CHART_DIR, { recursive: true });
  const svgPath = path.join(CHART_DIR, `${result.name}.svg`);
  if (result.chart) fs.writeFileSync(svgPath, barChart(result.chart));

  const m = full.machine;
  const parts = [
    `Command: \`${result.command}\` — ${full.finishedAt.slice(0, 16).replace('T', ' ')} UTC, ` +
      `${m.cores} cores, Node ${m.node}, ` +
      // Results written before loadAverageAtStart existed took the load average when the script finished.
      (m.loadAverageAtStart
        ? `load average at start ${m.loadAverageAtStart.join(' / ')}, at the end ${m.loadAverage.join(' / ')}`
        : `load average ${m.loadAverage.join(' / ')}`) +
      (result.durationS ? `, took ${result.durationS} s` : ''),
  ];
  for (const table of result.tables) {
    if (table.title) parts.push(`**${table.title}**`);
    parts.push(markdownTable(table));
  }
  if (result.verdicts?.length) {
    parts.push(
      markdownTable({
        columns: ['target', 'measured', 'required', 'met'],
        rows: result.verdicts.map((v) => [v.what, v.value, v.target, v.met === null ? 'n/a' : v.met ? 'yes' : '**no**']),
      }),
    );
  }
  for (const note of result.notes ?? []) parts.push(`- ${note}`);
  if (result.chart) parts.push(`![${result.title}](docs/bench/${result.name}.svg)`);
  updateSection(result.id, parts.join('\n\n'), result.title);
  log(`wrote ${result.chart ? path.relative(ROOT, svgPath) + ', ' : ''}BENCHMARKS.md section ${result.id}`);
}

export const ratio = (a, b) => (b > 0 ? a / b : NaN);
export const fmtRatio = (r) => (Number.isFinite(r) ? `${r.toFixed(2)}×` : 'n/a');

/** The summary table of BENCHMARKS.md: every verdict of every saved result. */
export function writeSummary() {
  if (SCRATCH) return;
  const rows = [];
  for (const name of fs.existsSync(RESULTS_DIR) ? fs.readdirSync(RESULTS_DIR).sort() : []) {
    if (!name.endsWith('.json')) continue;
    const result = JSON.parse(fs.readFileSync(path.join(RESULTS_DIR, name), 'utf8'));
    for (const v of result.verdicts ?? []) {
      rows.push([v.what, v.value, v.target, v.met === null ? 'n/a' : v.met ? 'yes' : '**no**', `[${result.id}](#${result.id})`]);
    }
  }
  updateSection('summary', markdownTable({ columns: ['target', 'measured', 'required', 'met', 'details'], rows }), 'Summary');
}
