/* global Buffer */
/**
 * The P6 input: a deterministic 45 MiB directory tree, "many small files plus a few large ones" —
 * 3,000 small text-like files (0.5–8 KiB, compressible) in 30 directories, and three 11 MiB files: two of
 * random bytes (incompressible, like already-compressed media) and one of log-like text.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const WORDS = (
  'backup archive coffer cipher stream vault secret nonce salt chunk gzip tar restore upload server ' +
  'client metadata record status ready pending failed deleted event account plan cadence blob store sqlite ' +
  'postgres bucket object part range header request response error token scope key rotate reset'
).split(' ');

/** Deterministic pseudo-random bytes: AES-128-CTR over zeros, keyed by `seed`. */
function randomStream(seed) {
  const key = crypto.createHash('sha256').update(seed).digest().subarray(0, 16);
  const cipher = crypto.createCipheriv('aes-128-ctr', key, Buffer.alloc(16));
  return (n) => cipher.update(Buffer.alloc(n));
}

function text(random, size) {
  const bytes = random(size);
  const parts = [];
  let length = 0;
  for (let i = 0; length < size; i++) {
    const word = WORDS[bytes[i % size] % WORDS.length];
    const sep = bytes[(i * 7) % size] % 11 === 0 ? '\n' : ' ';
    parts.push(word, sep);
    length += word.length + 1;
  }
  return Buffer.from(parts.join('')).subarray(0, size);
}

/** Writes the tree under `root` (created); returns {files, bytes}. */
export function generateTree(root, { smallFiles = 3000, dirs = 30, largeMiB = 11 } = {}) {
  const random = randomStream('coffer-bench-p6');
  let bytes = 0;
  for (let d = 0; d < dirs; d++) fs.mkdirSync(path.join(root, `dir-${String(d).padStart(2, '0')}`, 'nested'), { recursive: true });
  for (let i = 0; i < smallFiles; i++) {
    const size = 512 + (random(2).readUInt16LE(0) % (7.5 * 1024));
    const dir = path.join(root, `dir-${String(i % dirs).padStart(2, '0')}`, i % 3 === 0 ? 'nested' : '');
    const data = text(random, size);
    fs.writeFileSync(path.join(dir, `file-${i}.txt`), data);
    bytes += data.length;
  }
  fs.mkdirSync(path.join(root, 'large'), { recursive: true });
  const large = largeMiB * 1024 * 1024;
  for (const [name, make] of [
    ['media-1.bin', () => random(large)],
    ['media-2.bin', () => random(large)],
    ['server.log', () => text(random, large)],
  ]) {
    const data = make();
    fs.writeFileSync(path.join(root, 'large', name), data);
    bytes += data.length;
  }
  return { files: smallFiles + 3, bytes };
}

/** SHA-256 over every file's relative path and contents, in sorted order (to check a restore). */
export function treeDigest(root) {
  const hash = crypto.createHash('sha256');
  const files = fs
    .readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(root, path.join(e.parentPath, e.name)))
    .sort();
  for (const file of files)
    hash
      .update(file)
      .update('\0')
      .update(fs.readFileSync(path.join(root, file)));
  return { files: files.length, digest: hash.digest('hex') };
}

/** Normal deviate from two uniform 16-bit draws (Box–Muller), deterministic with the stream. */
function normal(random) {
  const b = random(4);
  const u1 = (b.readUInt16LE(0) + 1) / 65537;
  const u2 = b.readUInt16LE(2) / 65536;
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}

const SOURCE_WORDS = (
  'the of and to a in is it that for on with as be by this are or from at an not which if can when use file ' +
  'return static int void const char struct include define endif ifdef else while break case switch default ' +
  'function var let new true false null undefined self def class import export module package license copyright ' +
  'free software foundation version general public warranty merchantability fitness particular purpose see ' +
  'option value config path directory user system error warning debug info message string number list table'
).split(' ');

/** Text that reads like documentation and source (a larger vocabulary, indented lines). */
function sourceText(random, size) {
  const bytes = random(size);
  const parts = [];
  let length = 0;
  for (let i = 0; length < size; i++) {
    const b = bytes[i % size];
    const word = SOURCE_WORDS[(b * 31 + bytes[(i * 13) % size]) % SOURCE_WORDS.length];
    const sep = b % 9 === 0 ? (b % 2 ? '\n    ' : ';\n') : b % 17 === 0 ? ', ' : ' ';
    parts.push(word, sep);
    length += word.length + sep.length;
  }
  return Buffer.from(parts.join('')).subarray(0, size);
}

/** Binary-like content (an object file, an image): runs of zeros and repeated tables between random stretches. */
function binaryLike(random, size) {
  const data = random(size);
  for (let at = 0; at < size; at += 4096) {
    const kind = data[at] % 4;
    if (kind === 0) data.fill(0, at + 512, Math.min(size, at + 4096));
    else if (kind === 1) data.copyWithin(at + 256, at, Math.min(size, at + 4096) - 256);
  }
  return data;
}

/**
 * The second P6 input: a deterministic tree shaped like a copy of a part of Debian's /usr (documentation, scripts,
 * headers, locale data) — about 2,800 files, about 40 MiB, mostly small text files in a deep hierarchy of about 250
 * directories: sizes log-normal around a 3 KiB median (a few files of a few MiB carry most of the bytes), 90 %
 * text, 10 % binary-like, plus a few dozen symlinks. Generated (not copied from this machine's /usr) so that it is
 * the same on every machine. Returns {files, bytes}.
 */
export function generateUsrTree(root, { files = 2800, dirs = 250, medianBytes = 3072, sigma = 1.75, maxBytes = 3 * 1024 * 1024 } = {}) {
  const random = randomStream('coffer-bench-p6-usr');
  const dirPaths = [];
  for (let d = 0; d < dirs; d++) {
    // Depth 1–4: each directory below an earlier one (or the root), as package trees nest.
    const parent = d < 8 ? '' : dirPaths[random(2).readUInt16LE(0) % dirPaths.length];
    const depth = parent === '' ? 0 : parent.split('/').length;
    const dir = depth >= 4 ? dirPaths[d % 8] + `/pkg-${d}` : parent ? `${parent}/pkg-${d}` : `share-${d}`;
    fs.mkdirSync(path.join(root, dir), { recursive: true });
    dirPaths.push(dir);
  }
  let bytes = 0;
  const names = [];
  for (let i = 0; i < files; i++) {
    const size = Math.max(0, Math.min(maxBytes, Math.round(medianBytes * Math.exp(sigma * normal(random)))));
    const binary = random(1)[0] % 10 === 0;
    const dir = dirPaths[random(2).readUInt16LE(0) % dirPaths.length];
    const name = path.join(dir, `${binary ? 'data' : 'text'}-${i}.${binary ? 'bin' : ['txt', 'h', 'py', 'pm', 'html'][i % 5]}`);
    const data = binary ? binaryLike(random, size) : sourceText(random, size);
    fs.writeFileSync(path.join(root, name), data);
    names.push(name);
    bytes += data.length;
  }
  // A few dozen symlinks to files in other directories (relative, as packages ship them).
  for (let i = 0; i < 40; i++) {
    const from = dirPaths[(i * 7) % dirPaths.length];
    const to = names[(i * 67) % names.length];
    fs.symlinkSync(path.relative(path.join(root, from), path.join(root, to)), path.join(root, from, `link-${i}`));
  }
  return { files, bytes };
}
