/* global process */
/**
 * `npm run bench`: builds the server (npm run build), runs every benchmark script in its own process, one after
 * another (each can also run alone: node bench/p1-upload.js …), then writes the machine and summary sections
 * of BENCHMARKS.md from bench/results/*.json.
 *
 *   node bench/run.js [--only p1,p2,p3,p4,p5,p6,p6-stages,p7,p8,compression,startup,sdk] [--quick] [--no-build]
 *
 * --only takes ids (p4-nodes) or their group (p4: p4 and p4-nodes). --quick runs each target with fewer rounds
 * and shorter windows (each under about a minute): a harness check, not a result to publish, so its results go
 * to a temp directory and BENCHMARKS.md, docs/bench and bench/results stay as they are.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BENCH_DIR, ROOT, commandExists, commandLine, list, log, machine, options, round, run } from './lib/common.js';
import { fetchNode, findZstdNode } from './lib/nodes.js';
import { updateSection, writeSummary } from './lib/report.js';

/** `args` always, then `quick` with --quick; `group` is what --only also selects it by; `node` runs it on another Node. */
const TARGETS = [
  {
    id: 'p1',
    script: 'p1-upload.js',
    quick: ['--rounds', '2', '--backends', 'sqlite+fs,postgres+fs', '--s3-backends', 'postgres+ceph', '--part-mib', '0'],
  },
  { id: 'p2', script: 'p2-download.js', quick: ['--rounds', '2', '--per-round', '2', '--backends', 'sqlite+fs,postgres+fs'] },
  { id: 'p3', script: 'p3-metadata.js', quick: ['--rounds', '1', '--duration', '2'] },
  { id: 'p4', script: 'p4-events.js', quick: ['--rounds', '1', '--streams', '2000', '--backups', '20', '--window', '2'] },
  {
    id: 'p4-nodes',
    group: 'p4',
    script: 'p4-events.js',
    args: ['--backends', 'postgres+fs', '--nodes', '2'],
    quick: ['--rounds', '1', '--streams', '2000', '--backups', '20', '--window', '2', '--baseline=false'],
  },
  { id: 'p5', script: 'p5-memory.js', quick: ['--rounds', '1', '--backends', 'sqlite+fs'] },
  { id: 'p6', script: 'p6-client.js', quick: ['--rounds', '1', '--trees', 'usr'] },
  { id: 'p6-stages', group: 'p6', script: 'p6-stages.js', quick: ['--rounds', '1'] },
  { id: 'p7', script: 'p7-recipient.js', quick: ['--rounds', '1'] },
  { id: 'p8', script: 'p8-fleet.js', quick: ['--rounds', '1', '--hosts', '16', '--duration', '5', '--warmup', '2'] },
  { id: 'compression', script: 'compression.js', quick: ['--rounds', '1'] },
  { id: 'startup', script: 'startup.js', quick: ['--rounds', '1'] },
  { id: 'sdk', script: 'sdk.js', quick: ['--rounds', '1'] },
];

// P6 runs the CLI on Node 20, 22 and 24 itself (bench/p6-client.js --nodes, Nodes from the npm registry), on bench's
// tree and a /usr-like one. The stage breakdown once more on a Node that compresses with zstd (22.15+): one installed
// beside this one, else Node 24 from the registry (fetched only when p6 runs); this Node's `coffer` uses gzip.
TARGETS.push({
  id: 'p6-stages-zstd',
  group: 'p6',
  node: () => {
    const found = findZstdNode(process.env.COFFER_BENCH_ZSTD_NODE);
    if (found) return found.node;
    try {
      return fetchNode(24);
    } catch (error) {
      log(`p6-stages-zstd skipped: no Node with zstd (${error.message})`);
      return null;
    }
  },
  script: 'p6-stages.js',
  quick: ['--rounds', '1'],
});

const opts = options({ only: TARGETS.map((t) => t.id).join(','), quick: false, 'no-build': false });
const chosen = new Set(list(opts.only));
const unknown = [...chosen].filter((name) => !TARGETS.some((t) => t.id === name || t.group === name));
if (unknown.length) {
  log(`unknown target ${unknown.join(', ')} (known: ${TARGETS.map((t) => t.id).join(', ')})`);
  process.exit(2);
}
const started = Date.now();

if (!opts['no-build']) {
  log('npm run build');
  const build = spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' });
  // tsc still emits when another part of the tree has a type error; the scripts only need dist/.
  if (build.status !== 0 && !fs.existsSync(path.join(ROOT, 'dist', 'server', 'compose.js'))) process.exit(build.status ?? 1);
}

const failed = [];
for (const target of TARGETS.filter((t) => chosen.has(t.id) || chosen.has(t.group))) {
  const extra = [...(target.args ?? []), ...(opts.quick ? target.quick : [])];
  const args = [path.join(BENCH_DIR, target.script), ...extra];
  log(`── ${target.id}: node bench/${target.script} ${extra.join(' ')}`);
  // Each script makes a HOME of its own (bench/lib/common.js), as when it runs alone; an undefined variable is not passed.
  const env = { ...process.env, COFFER_BENCH_HOME: undefined, ...(opts.quick ? { BENCH_SCRATCH: '1' } : {}) };
  const node = typeof target.node === 'function' ? target.node() : (target.node ?? process.execPath);
  if (node === null) continue;
  if (node === process.execPath && target.id === 'p6-stages-zstd') continue; // this Node has zstd: p6-stages measured it
  const result = spawnSync(node, args, { cwd: ROOT, stdio: 'inherit', env });
  if (result.status !== 0) failed.push(target.id);
}

if (opts.quick) {
  log(
    `quick check done in ${round((Date.now() - started) / 1000, 0)} s${failed.length ? `; failed: ${failed.join(', ')}` : ''} (results in the temp directory, BENCHMARKS.md untouched)`,
  );
  process.exit(failed.length ? 1 : 0);
}

// Machine facts and the summary of every saved result (including targets not run this time).
const m = machine();
const tools = [
  `curl ${run('curl', ['--version']).split(' ')[1]}`,
  commandExists('nginx') ? spawnSync('nginx', ['-v'], { encoding: 'utf8' }).stderr.trim().replace('nginx version: ', '') : null,
  commandExists('restic') ? run('restic', ['version']).split(' ').slice(0, 2).join(' ') : null,
  commandExists('psql')
    ? run('psql', ['--version'])
        .trim()
        .replace(/^psql \(PostgreSQL\) /, 'PostgreSQL ')
    : null,
].filter(Boolean);
updateSection(
  'machine',
  [
    `- CPU: ${m.cores} cores, ${m.cpu}`,
    `- Memory: ${m.memoryGiB} GiB`,
    `- Node ${m.node}, ${m.os}`,
    `- Baselines and tools: ${tools.join(', ')}`,
    `- Load average when \`npm run bench\` finished: ${m.loadAverage.join(' / ')} (anything near or above the core count means the numbers are noisy)`,
    `- Last run of the harness: \`${process.argv.length > 2 ? commandLine('run.js') : 'npm run bench'}\` (${[...chosen].join(', ')}), ${round((Date.now() - started) / 1000, 0)} s`,
  ].join('\n'),
  'Machine',
);
writeSummary();
log(`done in ${round((Date.now() - started) / 1000, 0)} s${failed.length ? `; failed: ${failed.join(', ')}` : ''}`);
process.exit(failed.length ? 1 : 0);
