/* global process, Buffer */
/**
 * P6 per stage: where the time of `coffer backup` and `coffer restore` goes on P6's 45 MiB tree, each stage of the
 * client pipeline timed alone, in this process, with the built client modules (dist/client): CLI start-up, the
 * passphrase key derivation, the scan, tar, compression, encryption, and on the way back decryption +
 * decompression, extraction into a staging directory and the move into the target. The network and the server are
 * left out (p6-client.js times the whole commands). The compression is the one this Node gives `coffer backup` by
 * default (zstd where node:zlib has it, gzip otherwise): run it with another Node to see the other
 * (`/path/to/node bench/p6-stages.js`).
 *
 * Beside the stages, the file system's own cost: creating the tree's 3,003 files and 61 directories with nothing
 * else (open O_CREAT|O_EXCL, write, close; one after another), which any restore pays.
 *
 *   node bench/p6-stages.js [--rounds 3]
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable, Writable } from 'node:stream';
import { DIST, MiB, commandLine, log, median, options, requireBuild, round, runWhenMain, tempDir } from './lib/common.js';
import { writeResult } from './lib/report.js';
import { generateTree, treeDigest } from './lib/tree.js';

const seconds = (started) => Number(process.hrtime.bigint() - started) / 1e9;

async function timeIt(fn) {
  const started = process.hrtime.bigint();
  const value = await fn();
  return { s: seconds(started), value };
}

const counter = () => {
  const sink = new Writable({
    write(chunk, _e, cb) {
      sink.bytes += chunk.length;
      cb();
    },
  });
  sink.bytes = 0;
  return sink;
};

const collector = () => {
  const sink = new Writable({
    write(chunk, _e, cb) {
      sink.chunks.push(chunk);
      cb();
    },
  });
  sink.chunks = [];
  return sink;
};

/** Creates every file and directory of `source` under `into` with nothing else (the file system's floor). */
function createFloor(source, into) {
  const walk = (from, to) => {
    fs.mkdirSync(to);
    for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
      if (entry.isDirectory()) walk(path.join(from, entry.name), path.join(to, entry.name));
      else {
        const fd = fs.openSync(path.join(to, entry.name), fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
        fs.writeSync(fd, Buffer.alloc(1));
        fs.closeSync(fd);
      }
    }
  };
  walk(source, into);
}

export async function main() {
  const opts = options({ rounds: 3 });
  requireBuild();
  const { packTree } = await import(path.join(DIST, 'client', 'archive.js'));
  const { scanTree } = await import(path.join(DIST, 'client', 'scan.js'));
  const { extractInto, placeTree } = await import(path.join(DIST, 'client', 'extract.js'));
  const { compressor, decompressor, defaultCompression } = await import(path.join(DIST, 'client', 'compression.js'));
  const { EncryptStream, DecryptStream } = await import(path.join(DIST, 'client', 'envelope.js'));
  const sodium = (await import('sodium-native')).default;
  const compression = defaultCompression();
  const started = Date.now();
  const work = tempDir('coffer-bench-p6-stages-');
  const tree = path.join(work, 'tree');
  const generated = generateTree(tree);
  const source = treeDigest(tree);
  const samples = [];
  try {
    for (let r = 0; r < opts.rounds; r++) {
      const s = {};
      s.startup = median(
        [0, 1, 2].map(() => {
          const t = process.hrtime.bigint();
          spawnSync(process.execPath, [path.join(DIST, 'cli', 'main.js'), 'backup', '--help']);
          return seconds(t);
        }),
      );
      s.kdf = (
        await timeIt(
          () =>
            new Promise((resolve, reject) => {
              const out = sodium.sodium_malloc(32);
              sodium.crypto_pwhash_async(
                out,
                Buffer.from('benchmark'),
                Buffer.alloc(16, 1),
                3,
                256 * MiB,
                sodium.crypto_pwhash_ALG_ARGON2ID13,
                (e) => (e ? reject(e) : resolve()),
              );
            }),
        )
      ).s;
      const scan = await timeIt(() => scanTree(tree));
      s.scan = scan.s;
      s.tar = (await timeIt(() => pipeline(Readable.from(packTree(scan.value)), counter()))).s;
      s.tarCompress = (await timeIt(() => pipeline(Readable.from(packTree(scan.value)), compressor(compression), counter()))).s;
      const key = Buffer.alloc(32, 7);
      const cipher = collector();
      s.tarCompressEncrypt = (
        await timeIt(() => pipeline(Readable.from(packTree(scan.value)), compressor(compression), new EncryptStream(key), cipher))
      ).s;
      const ciphertext = cipher.chunks;
      s.decryptDecompress = (
        await timeIt(() => pipeline(Readable.from(ciphertext), new DecryptStream(key), decompressor(compression), counter()))
      ).s;
      const target = path.join(work, `restore-${r}`);
      fs.mkdirSync(target);
      const staging = fs.mkdtempSync(path.join(target, '.coffer-restore-'));
      const sink = extractInto(staging);
      s.decryptDecompressExtract = (
        await timeIt(() => pipeline(Readable.from(ciphertext), new DecryptStream(key), decompressor(compression), sink))
      ).s;
      s.place = (await timeIt(() => placeTree(staging, target, false, sink.directories))).s;
      const got = treeDigest(target);
      if (got.digest !== source.digest) throw new Error('the extracted tree differs from the source');
      fs.rmSync(target, { recursive: true, force: true });
      const floor = path.join(work, `floor-${r}`);
      s.createFloor = (await timeIt(() => createFloor(tree, floor))).s;
      fs.rmSync(floor, { recursive: true, force: true });
      samples.push(s);
      log(
        `P6 stages round ${r + 1}: ${Object.entries(s)
          .map(([k, v]) => `${k} ${v.toFixed(3)}`)
          .join(', ')}`,
      );
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  const m = (k) => round(median(samples.map((s) => s[k])), 3);
  const rows = [
    ['CLI start-up (`coffer backup --help`: a client command, from the bundle)', 'both', m('startup'), ''],
    ['Argon2id moderate (3 passes, 256 MiB)', 'restore (and a passphrase backup)', m('kdf'), ''],
    ['scan (lstat, excludes, size bound)', 'backup', m('scan'), ''],
    ['tar', 'backup', m('tar'), ''],
    [`tar → ${compression}`, 'backup', m('tarCompress'), `${compression}: ${round(m('tarCompress') - m('tar'), 3)} s more`],
    [
      `tar → ${compression} → encrypt`,
      'backup',
      m('tarCompressEncrypt'),
      `encryption: ${round(m('tarCompressEncrypt') - m('tarCompress'), 3)} s more`,
    ],
    [`decrypt → ${compression === 'zstd' ? 'unzstd' : 'gunzip'}`, 'restore', m('decryptDecompress'), ''],
    [
      'decrypt → decompress → extract into staging',
      'restore',
      m('decryptDecompressExtract'),
      `extraction: ${round(m('decryptDecompressExtract') - m('decryptDecompress'), 3)} s more`,
    ],
    ['move staging into the target, directory attributes', 'restore', m('place'), ''],
    ['file system floor: create the 3,003 files and 61 directories, nothing else', 'reference', m('createFloor'), 'one after another'],
  ];
  return writeResult({
    // One result per Node major: the compression differs (zstd from Node 22.15, gzip before).
    id: `p6-stages-node${process.versions.node.split('.')[0]}`,
    name: `p6-stages-node${process.versions.node.split('.')[0]}`,
    title: `P6 — the client pipeline stage by stage, Node ${process.versions.node}`,
    target: 'explains P6: where the time of backup and restore goes',
    command: commandLine('p6-stages.js'),
    durationS: round((Date.now() - started) / 1000, 0),
    tables: [
      {
        title: `Seconds per stage, in process, ${generated.files} files, ${round(generated.bytes / MiB, 1)} MiB, ${compression}, median of ${opts.rounds} rounds (each row includes the rows it extends)`,
        columns: ['stage', 'in', 'seconds', 'note'],
        rows,
      },
    ],
    verdicts: [],
    notes: [],
    raw: { samples, tree: generated, compression },
  });
}

runWhenMain(import.meta.url, main);
