/* global process, console, setTimeout, clearTimeout, setInterval, clearInterval */
/**
 * Shared pieces of the benchmark harness: options, statistics, child processes, RSS sampling, machine facts.
 * Plain ESM JavaScript: the scripts import the built server from dist/ (`npm run build` first; run.js does it).
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

export const BENCH_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const ROOT = path.resolve(BENCH_DIR, '..');
export const DIST = path.join(ROOT, 'dist');
export const MiB = 1024 * 1024;
export { sleep };

/**
 * Every benchmark (and every process and command it starts: servers, load generators, `coffer init`, `backup`,
 * `restore`, restic) gets a HOME and XDG directories of its own, removed when the benchmark exits: a client command
 * keeps state there (the vault keys it has seen, profiles, caches), and a benchmark must never write into the user's
 * own. A process started by a benchmark inherits them (COFFER_BENCH_HOME) and makes none, so one that is stopped
 * by a signal leaves nothing behind.
 */
if (process.env.COFFER_BENCH_HOME === undefined) {
  const benchHome = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-bench-home-'));
  process.env.COFFER_BENCH_HOME = benchHome;
  for (const [name, dir] of [
    ['HOME', ''],
    ['XDG_CONFIG_HOME', '.config'],
    ['XDG_STATE_HOME', '.local/state'],
    ['XDG_CACHE_HOME', '.cache'],
    ['XDG_DATA_HOME', '.local/share'],
  ]) {
    process.env[name] = path.join(benchHome, dir);
    fs.mkdirSync(process.env[name], { recursive: true, mode: 0o700 });
  }
  process.on('exit', () => fs.rmSync(benchHome, { recursive: true, force: true }));
}

/** `--name value` / `--name=value` / `--flag` options, with BENCH_<NAME> environment fallbacks. */
export function options(defaults) {
  const result = { ...defaults };
  const argv = process.argv.slice(2);
  for (const [name, value] of Object.entries(defaults)) {
    const env = process.env[`BENCH_${name.toUpperCase().replace(/-/g, '_')}`];
    if (env !== undefined) result[name] = coerce(env, value);
  }
  for (let i = 0; i < argv.length; i++) {
    const match = /^--([^=]+)(?:=(.*))?$/.exec(argv[i]);
    if (!match) continue;
    const name = match[1];
    if (!(name in defaults)) throw new Error(`unknown option --${name} (known: ${Object.keys(defaults).join(', ')})`);
    let value = match[2];
    if (value === undefined) value = typeof defaults[name] === 'boolean' ? 'true' : argv[++i];
    result[name] = coerce(value, defaults[name]);
  }
  return result;
}

function coerce(text, example) {
  if (typeof example === 'number') return Number(text);
  if (typeof example === 'boolean') return text === 'true' || text === '1';
  return text;
}

/** Runs `main` when the script is started directly (not imported by run.js), exiting 1 on failure. */
export function runWhenMain(moduleUrl, main) {
  if (moduleUrl !== `file://${process.argv[1]}`) return;
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}

export const list = (text) =>
  String(text)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Nearest-rank percentile (p in 0..100) of an array of numbers. */
export function percentile(values, p) {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

export const round = (value, digits = 2) => (Number.isFinite(value) ? Number(value.toFixed(digits)) : value);

/** Runs `fn(round)` `rounds` times and returns the list of results (after `warmup` discarded runs). */
export async function rounds(count, fn, { warmup = 0 } = {}) {
  for (let i = 0; i < warmup; i++) await fn(-1 - i);
  const results = [];
  for (let i = 0; i < count; i++) results.push(await fn(i));
  return results;
}

export function log(...parts) {
  console.error(`[${new Date().toISOString().slice(11, 23)}]`, ...parts);
}

/** Server logs of the last run stay here (not in the work directories, which are removed). */
export const LOG_DIR = path.join(os.tmpdir(), 'coffer-bench-logs');

export function logFile(name) {
  fs.mkdirSync(LOG_DIR, { recursive: true });
  const file = path.join(LOG_DIR, name);
  fs.rmSync(file, { force: true });
  return file;
}

export function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Resident set size of a process in bytes, from /proc (null once it has exited). */
export function rssOf(pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /VmRSS:\s+(\d+) kB/.exec(status);
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Samples a process's RSS every `everyMs` until stop(); returns {peak, samples}. */
export function sampleRss(pid, everyMs = 50) {
  const samples = [];
  let peak = rssOf(pid) ?? 0;
  const timer = setInterval(() => {
    const rss = rssOf(pid);
    if (rss === null) return;
    samples.push(rss);
    if (rss > peak) peak = rss;
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      const rss = rssOf(pid);
      if (rss !== null && rss > peak) peak = rss;
      return { peak, samples };
    },
  };
}

/** CPU time (user+system) a process has used so far, in seconds. */
export function cpuSecondsOf(pid) {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // utime and stime, in clock ticks (USER_HZ, 100 on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

/**
 * CPU time a process has used so far, in seconds, to the nanosecond: the sum of its threads' scheduler run time
 * (/proc/<pid>/task/<tid>/schedstat; Node's libuv pool threads included). cpuSecondsOf counts in 10 ms ticks, too
 * coarse for a request that costs well under a millisecond. Threads that already exited are not counted.
 */
export function cpuTimeOf(pid) {
  try {
    let ns = 0;
    for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(fs.readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // the thread exited meanwhile
      }
    }
    return ns / 1e9;
  } catch {
    return cpuSecondsOf(pid);
  }
}

/**
 * Scheduler accounting of a process's main thread (/proc/<pid>/schedstat): seconds on a CPU, and seconds it was
 * runnable but waiting for a CPU (what other load on a shared machine costs it).
 */
export function schedOf(pid) {
  try {
    const [run, wait] = fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(/\s+/).map(Number);
    return { run: run / 1e9, wait: wait / 1e9 };
  } catch {
    return null;
  }
}

/** The open-file limit for children: as high as this process may set it (10,000 streams need > 10,000). */
export const NOFILE_PREFIX = 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"';

/**
 * Starts `node <script> …args` as a child with an IPC channel, a raised open-file limit and stdout/stderr
 * sent to a log file; resolves once the child sends {ready: …}. request(msg) sends a message and resolves
 * with the reply carrying the same id.
 */
export async function startChild(script, args = [], { env = {}, nodeArgs = [], logFile, readyTimeoutMs = 60_000 } = {}) {
  const out = logFile ? fs.openSync(logFile, 'a') : 'ignore';
  const child = spawn('sh', ['-c', NOFILE_PREFIX, 'sh', process.execPath, ...nodeArgs, script, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', out, out, 'ipc'],
  });
  if (typeof out === 'number') fs.closeSync(out);
  let nextId = 1;
  const pending = new Map();
  let exited = false;
  child.on('message', (message) => {
    if (message && message.id && pending.has(message.id)) {
      const { resolve, reject } = pending.get(message.id);
      pending.delete(message.id);
      if (message.error) reject(new Error(`${path.basename(script)}: ${message.error}`));
      else resolve(message.result);
    }
  });
  const exit = new Promise((resolve) =>
    child.on('exit', (code, signal) => {
      exited = true;
      for (const { reject } of pending.values()) reject(new Error(`${path.basename(script)} exited (${code ?? signal})`));
      pending.clear();
      resolve({ code, signal });
    }),
  );
  const ready = await new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${path.basename(script)} did not start in time${logFile ? ` (see ${logFile})` : ''}`)),
      readyTimeoutMs,
    );
    child.on('message', (message) => {
      if (message && message.ready) {
        clearTimeout(timer);
        resolve(message.ready);
      }
    });
    exit.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`${path.basename(script)} exited before it was ready (${code ?? signal})${logFile ? `; see ${logFile}` : ''}`));
    });
  });
  return {
    // `sh … exec` replaces the shell, so the child's pid is node's pid.
    pid: child.pid,
    ready,
    request(message, timeoutMs = 120_000) {
      if (exited) return Promise.reject(new Error(`${path.basename(script)} has exited`));
      const id = nextId++;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`${path.basename(script)}: no answer to ${message.type} in ${timeoutMs} ms`));
        }, timeoutMs);
        pending.set(id, {
          resolve: (value) => (clearTimeout(timer), resolve(value)),
          reject: (error) => (clearTimeout(timer), reject(error)),
        });
        child.send({ ...message, id });
      });
    },
    /** Sends a message without waiting for an answer. */
    send(message) {
      if (!exited) child.send(message);
    },
    on(event, listener) {
      child.on(event, listener);
    },
    async stop(signal = 'SIGTERM', graceMs = 15_000) {
      if (exited) return exit;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const result = await exit;
      clearTimeout(timer);
      return result;
    },
    exit,
  };
}

/** Child side of startChild: answers {id, type, …} messages with handlers[type](message). */
export function serveParent(handlers) {
  process.on('message', async (message) => {
    if (!message || !message.id) return;
    const handler = handlers[message.type];
    try {
      if (!handler) throw new Error(`unknown request ${message.type}`);
      process.send({ id: message.id, result: await handler(message) });
    } catch (error) {
      process.send({ id: message.id, error: error?.stack ?? String(error) });
    }
  });
  process.on('disconnect', () => process.exit(0));
}

export function run(command, args, opts = {}) {
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}

export function commandExists(command) {
  try {
    run('sh', ['-c', `command -v ${command}`]);
    return true;
  } catch {
    return false;
  }
}

/** Installs a Debian package when its command is missing (the baselines nginx and restic). */
export function ensureDebian(command, pkg) {
  if (commandExists(command)) return;
  log(`${command} is missing: apt-get install -y ${pkg}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  try {
    run('apt-get', ['install', '-y', '-q', pkg], { env, stdio: 'inherit' });
  } catch {
    run('apt-get', ['update', '-q'], { env, stdio: 'inherit' });
    run('apt-get', ['install', '-y', '-q', pkg], { env, stdio: 'inherit' });
  }
  if (!commandExists(command)) throw new Error(`${pkg} did not provide ${command}`);
}

/** Fails early with a clear message when dist/ is missing (the scripts import the built server). */
export function requireBuild() {
  if (!fs.existsSync(path.join(DIST, 'server', 'compose.js'))) {
    throw new Error('dist/ is missing: run `npm run build` first (npm run bench does it)');
  }
}

export function machine() {
  const cpus = os.cpus();
  const load = os.loadavg().map((l) => round(l, 2));
  return {
    cores: cpus.length,
    cpu: cpus[0]?.model ?? 'unknown',
    memoryGiB: round(os.totalmem() / 1024 ** 3, 1),
    node: process.version,
    os: `${os.type()} ${os.release()}`,
    loadAverage: load,
  };
}

/** Shell-quotes a command line for the report. */
export function commandLine(script) {
  const args = process.argv.slice(2).map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`));
  return ['node', `bench/${script}`, ...args].join(' ');
}
