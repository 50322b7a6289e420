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
