#!/usr/bin/env node
/* global process, console */
/**
 * `npm start`'s build (prestart), only when the build is missing or older than a source (build-stamp.mjs): a start
 * with nothing changed goes straight to the server. It says on stderr that it builds and why, then runs
 * `npm run build` with its output in build.log instead of the terminal, so a first start shows the one-time API key
 * and where the server listens with nothing of the build above them (tsc, vite and the bundlers print progress and,
 * for dependencies, warnings a newcomer reads as failures). A failed build prints its whole log on stderr and fails
 * `npm start`. `npm run build` itself still prints everything.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, staleBuild } from './build-stamp.mjs';

const stale = staleBuild();
if (stale === null) process.exit(0);
console.error(`coffer: building (${stale}; about a minute, longer the first time; its output goes to build.log)…`);
const logFile = path.join(ROOT, 'build.log');
const log = fs.openSync(logFile, 'w');
// npm sets npm_execpath when it runs a script: the same npm runs the build.
const [command, args] = process.env.npm_execpath
  ? [process.execPath, [process.env.npm_execpath, 'run', 'build']]
  : ['npm', ['run', 'build']];
const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', log, log] });
child.on('error', (error) => {
  console.error(`coffer: cannot run the build: ${error.message}`);
  process.exit(1);
});
child.on('exit', (code, signal) => {
  fs.closeSync(log);
  if (code === 0) return;
  process.stderr.write(fs.readFileSync(logFile, 'utf8'));
  console.error(`coffer: the build failed (${signal ?? `exit ${code}`}); its output is above and in build.log`);
  process.exit(code || 1);
});
