/* global process */
/**
 * Start-up: how long `coffer serve` takes to print its "listening" line, and a client command and `coffer --help`
 * to run, each a whole process. Reported as CPU time (user + system, all threads) beside the wall time: on a shared
 * machine the wall time mostly measures the other load, the CPU time what the process itself does.
 *
 * - serve: `node dist/cli/main.js serve` on SQLite + fs in a fresh COFFER_DATA_DIR (a first start: migrations and
 *   the first account, as every test's server does), PORT=0; timed until "listening" appears on stderr, its CPU
 *   read from /proc at that moment, then killed.
 * - a client command: `coffer list --json` against that kind of server (started once, outside the timing), and
 *   `coffer --help` (the whole program); each under /usr/bin/time.
 *
 * --dists takes several builds (e.g. `dist,/tmp/before/dist`, each a dist/ beside a package.json and
 * node_modules): rounds run them interleaved, so a change of load hits every build alike.
 *
 *   node bench/startup.js [--rounds 7] [--dists dist] [--node /path/to/node]
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { DIST, ROOT, commandLine, cpuTimeOf, log, median, options, requireBuild, round, runWhenMain, tempDir } from './lib/common.js';
import { writeResult } from './lib/report.js';

const env = (dataDir) => ({
  ...process.env,
  PORT: '0',
  HOST: '127.0.0.1',
  COFFER_DATA_DIR: dataDir,
  COFFER_DATABASE_URL: '',
  COFFER_BLOB_STORE: '',
  // the first account's key, so the client command below has one
  COFFER_INITIAL_API_KEY: 'cfk_' + 'startupbench'.repeat(4).slice(0, 43),
});

/** Starts `coffer serve` from `dist`; resolves at its listening line with {wallS, cpuS, url, child}. */
function serve(node, dist, dataDir) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(node, [path.join(dist, 'cli', 'main.js'), 'serve'], { env: env(dataDir), stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.on('error', reject);
    child.on('exit', (code) => reject(new Error(`coffer serve exited (${code}) before listening:\n${stderr}`)));
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text) => {
      stderr += text;
      const match = /listening on (http:\/\/[^\s]+) only/.exec(stderr);
      if (!match) return;
      const cpuS = cpuTimeOf(child.pid);
      const wallS = Number(process.hrtime.bigint() - started) / 1e9;
      child.removeAllListeners('exit');
      child.stderr.removeAllListeners('data');
      child.stderr.resume();
      resolve({ wallS, cpuS, url: match[1], child });
    });
  });
}

function stop(child) {
  return new Promise((resolve) => {
    child.once('exit', resolve);
    child.kill('SIGKILL');
  });
}

/** Runs `coffer <args>` from `dist` under /usr/bin/time: {wallS, cpuS}. */
function command(node, dist, args, extraEnv) {
  const result = spawnSync('/usr/bin/time', ['-f', '%e %U %S', node, path.join(dist, 'cli', 'main.js'), ...args], {
    env: { ...process.env, ...extraEnv },
    encoding: 'utf8',
  });
  const lines = result.stderr.trim().split('\n');
  const [wall, user, sys] = lines.at(-1).split(' ').map(Number);
  if (result.status !== 0) throw new Error(`coffer ${args.join(' ')} failed (${result.status}):\n${result.stderr}`);
  return { wallS: wall, cpuS: user + sys };
}

async function main() {
  const opts = options({ rounds: 7, dists: DIST, node: process.execPath });
  requireBuild();
  const dists = opts.dists.split(',').map((d) => path.resolve(ROOT, d.trim()));
  const samples = new Map(dists.map((d) => [d, { serve: [], serveWall: [], list: [], listWall: [], help: [], helpWall: [] }]));
  const scratch = tempDir('coffer-startup-');
  try {
    // One server per build for the client command (its start-up is not what is timed there).
    const servers = new Map();
    for (const dist of dists) {
      const dataDir = path.join(scratch, `client-${servers.size}`);
      servers.set(dist, await serve(opts.node, dist, dataDir));
    }
    for (let round_ = -1; round_ < opts.rounds; round_++) {
      for (const dist of dists) {
        const s = samples.get(dist);
        const dataDir = path.join(scratch, `serve-${round_ + 1}-${dists.indexOf(dist)}`);
        const started = await serve(opts.node, dist, dataDir);
        await stop(started.child);
        fs.rmSync(dataDir, { recursive: true, force: true });
        const { url } = servers.get(dist);
        const list = command(opts.node, dist, ['list', '--json'], { COFFER_URL: url, COFFER_API_KEY: env('').COFFER_INITIAL_API_KEY });
        const help = command(opts.node, dist, ['--help'], {});
        if (round_ < 0) continue; // warm-up: the file system cache, not the program
        s.serve.push(started.cpuS);
        s.serveWall.push(started.wallS);
        s.list.push(list.cpuS);
        s.listWall.push(list.wallS);
        s.help.push(help.cpuS);
        s.helpWall.push(help.wallS);
        log(
          `round ${round_ + 1} ${path.relative(ROOT, dist) || dist}: serve ${round(started.cpuS)} s CPU (${round(started.wallS)} s wall), list ${round(list.cpuS)} s, --help ${round(help.cpuS)} s`,
        );
      }
    }
    for (const { child } of servers.values()) await stop(child);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  const rows = dists.map((dist) => {
    const s = samples.get(dist);
    return {
      dist: path.relative(ROOT, dist) || dist,
      serveCpuS: round(median(s.serve), 3),
      serveWallS: round(median(s.serveWall), 3),
      listCpuS: round(median(s.list), 3),
      listWallS: round(median(s.listWall), 3),
      helpCpuS: round(median(s.help), 3),
      helpWallS: round(median(s.helpWall), 3),
    };
  });
  for (const row of rows) {
    log(
      `${row.dist}: serve ${row.serveCpuS} s CPU / ${row.serveWallS} s wall; list ${row.listCpuS} / ${row.listWallS}; --help ${row.helpCpuS} / ${row.helpWallS} (medians of ${opts.rounds})`,
    );
  }
  writeResult({
    name: 'startup',
    id: 'startup',
    title: 'Start-up',
    command: commandLine('startup.js'),
    rounds: opts.rounds,
    rows,
    tables: [
      {
        title: `Medians of ${opts.rounds} rounds, seconds; CPU = user + system of the whole process`,
        columns: ['build', 'serve: CPU to "listening"', 'serve: wall', '`coffer list --json`: CPU', 'wall', '`coffer --help`: CPU', 'wall'],
        rows: rows.map((r) => [r.dist, r.serveCpuS, r.serveWallS, r.listCpuS, r.listWallS, r.helpCpuS, r.helpWallS]),
      },
    ],
  });
}

runWhenMain(import.meta.url, main);
