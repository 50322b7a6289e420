/* global process, Buffer */
/**
 * P6 extraction alone: the plaintext tar of P6's 45 MiB tree (held in memory) written into a staging directory
 * by extractInto(), then checked against the source. Wall time and this process's CPU time (user, system) per
 * round, so a change of the extractor can be judged on a busy machine. Also the tar parsers alone (every entry
 * read, nothing written): node-tar's Parser and, when installed, tar-stream's extract.
 *
 *   node bench/p6-extract.js [--rounds 3] [--parsers 1] [--module extract.js] [--workers N] [--aheadBytes N] [--aheadEntries N]
 *
 * --profile <file.cpuprofile>: a CPU profile of each round's extraction alone (<file>-<round>.cpuprofile);
 * summarize it with bench/profile-top.js.
 * Every round's tree stays until the end: on ext4 without a journal (this machine) an inode freed in the last
 * minute is skipped, one by one, by every create in its block group, so a removal right before a round would make
 * its creates pay for the removal (0.5 ms per create instead of 0.04 ms after 3,000 removals). Run it with TMPDIR
 * on a directory other tests do not churn.
 * --poison <n>: before each round, create and remove n files next to it, to time a restore right after removals.
 * --module: the compiled module(s) (under dist/client, comma-separated) that export extractInto and placeTree, to
 * compare with an earlier build copied there; they take turns within each round, in the same directory.
 */
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable, Writable } from 'node:stream';
import { DIST, log, median, options, requireBuild, round, runWhenMain, tempDir } from './lib/common.js';
import { generateTree, treeDigest } from './lib/tree.js';

const cpu = () => {
  const u = process.cpuUsage();
  return { user: u.user / 1e6, system: u.system / 1e6, t: process.hrtime.bigint() };
};
const since = (a) => {
  const b = cpu();
  return { wall: Number(b.t - a.t) / 1e9, user: b.user - a.user, system: b.system - a.system };
};
const show = (x) => `wall ${x.wall.toFixed(3)} user ${x.user.toFixed(3)} sys ${x.system.toFixed(3)}`;

export async function main() {
  const opts = options({ rounds: 3, parsers: 1, module: 'extract.js', profile: '', workers: 0, aheadBytes: 0, aheadEntries: 0, poison: 0 });
  requireBuild();
  const { packTree } = await import(path.join(DIST, 'client', 'archive.js'));
  const { scanTree } = await import(path.join(DIST, 'client', 'scan.js'));
  // Several modules (comma-separated) take turns within each round, in the same directory: the same file-system state.
  const modules = await Promise.all(
    opts.module.split(',').map(async (name) => ({ name, ...(await import(path.join(DIST, 'client', name))) })),
  );
  const work = tempDir('coffer-bench-p6-extract-');
  const tree = path.join(work, 'tree');
  generateTree(tree);
  const source = treeDigest(tree);
  const chunks = [];
  await pipeline(
    Readable.from(packTree(await scanTree(tree))),
    new Writable({
      write(chunk, _e, cb) {
        chunks.push(chunk);
        cb();
      },
    }),
  );
  // The decompressor hands on 64 KiB chunks (zstd, gunzip): the same here.
  const whole = Buffer.concat(chunks);
  const tarChunks = [];
  for (let i = 0; i < whole.length; i += 65536) tarChunks.push(whole.subarray(i, i + 65536));
  const samples = [];
  try {
    if (opts.parsers) {
      const tar = await import('tar');
      const t = cpu();
      await new Promise((resolve, reject) => {
        const parser = new tar.Parser({ strict: true });
        parser.on('entry', (entry) => entry.resume());
        parser.on('end', resolve);
        parser.on('error', reject);
        for (const c of tarChunks) parser.write(c);
        parser.end();
      });
      log(`node-tar Parser alone: ${show(since(t))}`);
      const ts = await import('tar-stream').catch(() => undefined);
      if (ts) {
        const t2 = cpu();
        const extract = ts.default.extract();
        extract.on('entry', (_header, stream, next) => {
          stream.on('end', next);
          stream.resume();
        });
        await pipeline(Readable.from(tarChunks), extract);
        log(`tar-stream extract alone: ${show(since(t2))}`);
      }
    }
    const session = opts.profile ? new Session() : undefined;
    if (session) {
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 500 });
    }
    for (let r = 0; r < opts.rounds; r++) {
      if (opts.poison) {
        // The state a benchmark that removes its trees leaves: `poison` inodes freed just now in this block group.
        const junk = path.join(work, `junk-${r}`);
        fs.mkdirSync(junk);
        for (let i = 0; i < opts.poison; i++) fs.closeSync(fs.openSync(path.join(junk, String(i)), 'w'));
        fs.rmSync(junk, { recursive: true });
      }
      for (const [m, { name, extractInto, placeTree }] of (r % 2 === 0 ? modules : [...modules].reverse()).entries()) {
        const target = path.join(work, `restore-${r}-${m}`);
        fs.mkdirSync(target);
        const staging = fs.mkdtempSync(path.join(target, '.coffer-restore-'));
        const limits = {};
        for (const k of ['workers', 'aheadBytes', 'aheadEntries']) if (opts[k]) limits[k] = Number(opts[k]);
        const sink = extractInto(staging, { limits });
        if (session) await session.post('Profiler.start');
        const t = cpu();
        await pipeline(Readable.from(tarChunks), sink);
        const s = since(t);
        if (session) {
          const { profile } = await session.post('Profiler.stop');
          fs.writeFileSync(opts.profile.replace(/(\.cpuprofile)?$/, `-${r + 1}-${name}.cpuprofile`), JSON.stringify(profile));
        }
        await placeTree(staging, target, false, sink.directories);
        const got = treeDigest(target);
        if (got.digest !== source.digest) throw new Error('the extracted tree differs from the source');
        samples.push({ ...s, name });
        log(
          `extract round ${r + 1} ${name}: ${show(s)} (load ${os
            .loadavg()
            .map((l) => l.toFixed(2))
            .join(' ')})`,
        );
      }
    }
    session?.disconnect();
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  for (const { name } of modules) {
    const m = (k) => round(median(samples.filter((s) => s.name === name).map((s) => s[k])), 3);
    log(`extract median ${name}: wall ${m('wall')} user ${m('user')} sys ${m('system')}`);
  }
}

runWhenMain(import.meta.url, main);
