/* global process, console */
/**
 * Summarizes a V8 .cpuprofile (from `node --cpu-prof`): the functions with the most self time and the most
 * total (inclusive) time, with file:line, so a benchmark miss can be traced to code.
 *
 *   node bench/profile-top.js <file.cpuprofile> [--top 25] [--filter dist/] [--timeline 250]
 *
 * --timeline <ms> also prints, per time slice, how busy the main thread was and its busiest functions
 * (a thread that is mostly idle is waiting: for the thread pool, the disk, the network or a child).
 */
import fs from 'node:fs';
import { options } from './lib/common.js';

const file = process.argv[2];
if (!file || file.startsWith('--')) {
  console.error('usage: node bench/profile-top.js <file.cpuprofile> [--top 25] [--filter text]');
  process.exit(2);
}
process.argv.splice(2, 1);
const opts = options({ top: 25, filter: '', timeline: 0 });
const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

// Sample counts → self time per node (timeDeltas are per sample, in microseconds).
const selfUs = new Map();
profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);

const keyOf = (node) => {
  const f = node.callFrame;
  const where = f.url ? `${f.url.replace(/^file:\/\//, '').replace(process.cwd() + '/', '')}:${f.lineNumber + 1}` : '(native)';
  return `${f.functionName || '(anonymous)'} ${where}`;
};

const self = new Map();
const inclusive = new Map();
for (const [id, us] of selfUs) {
  const node = byId.get(id);
  self.set(keyOf(node), (self.get(keyOf(node)) ?? 0) + us);
  // Inclusive: credit each distinct function on the stack once.
  const seen = new Set();
  for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
    const key = keyOf(byId.get(cur));
    if (seen.has(key)) continue;
    seen.add(key);
    inclusive.set(key, (inclusive.get(key) ?? 0) + us);
  }
}

const show = (title, map) => {
  console.log(`\n${title} (of ${(totalUs / 1000).toFixed(0)} ms sampled)`);
  [...map.entries()]
    .filter(([key]) => key.includes(opts.filter))
    .sort((a, b) => b[1] - a[1])
    .slice(0, opts.top)
    .forEach(([key, us]) =>
      console.log(`${((100 * us) / totalUs).toFixed(1).padStart(6)}%  ${(us / 1000).toFixed(0).padStart(7)} ms  ${key}`),
    );
};
show('Self time', self);
show('Total time', inclusive);

if (opts.timeline > 0) {
  console.log(`\nTimeline (${opts.timeline} ms slices: busy % of the main thread, top self functions)`);
  let t = 0;
  const slices = [];
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i] ?? 0;
    const slice = Math.floor(t / 1000 / opts.timeline);
    const entry = (slices[slice] ??= { idle: 0, total: 0, fns: new Map() });
    const us = profile.timeDeltas[i] ?? 0;
    const key = keyOf(byId.get(id));
    entry.total += us;
    if (key.startsWith('(idle)')) entry.idle += us;
    else entry.fns.set(key, (entry.fns.get(key) ?? 0) + us);
  });
  slices.forEach((entry, i) => {
    if (!entry) return;
    const busy = entry.total ? 100 - (100 * entry.idle) / entry.total : 0;
    const top = [...entry.fns.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 3)
      .map(([k, us]) => `${k.split(' ')[0]} ${(us / 1000).toFixed(0)}ms`);
    console.log(`${String(i * opts.timeline).padStart(6)} ms  busy ${busy.toFixed(0).padStart(3)}%  ${top.join(', ')}`);
  });
}
