/**
 * Decompression under the rules of docs/crypto.md §4 (src/client/compression-core.ts): exactly one zstd frame or
 * gzip member, nothing after it, never more than the sealed plaintext size, and bounded memory on the way there.
 * In-process on every decoder this runtime has (fzstd, node:zlib's zstd where present, gzip), and through the real
 * CLI against a real server, on this Node and on every other Node found (the ones .ci/node24 installs, or
 * COFFER_TEST_NODES), so the verdict is the same on Node 20, 22 and 24.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { buffer } from 'node:stream/consumers';
import zlib from 'node:zlib';
import * as tar from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decompressor } from '../../src/client/compression.js';
import { IntegrityError } from '../../src/client/envelope-core.js';
import { CHUNK_BYTES, EncryptStream, newKey, sealMetadata, wipe, wrapDek, type BackupMetadata } from '../../src/client/envelope.js';
import { CofferClient } from '../../src/client/sdk.js';
import { uploadDirect } from '../../src/client/sdk-node-upload.js';
import { unlockVault } from '../../src/client/vault.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { lacking } from '../helpers/required.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, canZstd, cliFor, startCli, zstdCompress } from './helpers.js';

const PASSPHRASE = 'decompression passphrase';
const GiB = 1024 ** 3;
const hasNativeZstd = typeof (zlib as unknown as { createZstdDecompress?: unknown }).createZstdDecompress === 'function';

/** A zstd frame of `blocks` RLE blocks of 128 KiB of `byte` (4 bytes each): 8,192 of them are 1 GiB in 32 KiB. */
function zstdBomb(blocks: number, byte = 0x61, prefix?: Buffer): Buffer {
  const header = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, (17 - 10) << 3]); // no content size, 128 KiB window
  // A raw block of `prefix` first (a tar header, say).
  const raw = prefix ? Buffer.concat([Buffer.from([(prefix.length << 3) & 0xff, (prefix.length << 3) >> 8, 0]), prefix]) : Buffer.alloc(0);
  const body = Buffer.alloc(blocks * 4);
  for (let i = 0; i < blocks; i++) {
    body.writeUIntLE(((128 * 1024) << 3) | (1 << 1) | (i === blocks - 1 ? 1 : 0), i * 4, 3);
    body[i * 4 + 3] = byte;
  }
  return Buffer.concat([header, raw, body]);
}

/** `bytes` zeros, gzip-compressed in a stream (about 1 KiB per MiB). */
async function gzipZeros(bytes: number): Promise<Buffer> {
  const zeros = Buffer.alloc(1024 * 1024);
  const parts = Array.from({ length: bytes / zeros.length }, () => zeros);
  return buffer(Readable.from(parts).pipe(zlib.createGzip({ level: 1 })));
}

/** The SHA-256 of `bytes` bytes of `byte`. */
function filledSha256(bytes: number, byte = 0x61): string {
  const hash = createHash('sha256');
  const zeros = Buffer.alloc(1024 * 1024, byte);
  for (let done = 0; done < bytes; done += zeros.length) hash.update(zeros);
  return hash.digest('hex');
}

/** No zstd compressor for the tests here (neither node:zlib's nor the zstd program), and none required. */
const noZstd = lacking(canZstd(), 'zstd');
const noNativeZstd = noZstd || lacking(hasNativeZstd, 'node:zstd');

const decoders: { name: string; compression: 'zstd' | 'gzip'; native?: boolean; make: (plain: Buffer) => Buffer }[] = [
  ...(!noZstd ? [{ name: 'zstd (fzstd)', compression: 'zstd' as const, native: false, make: zstdCompress }] : []),
  ...(!noNativeZstd ? [{ name: 'zstd (node:zlib)', compression: 'zstd' as const, native: true, make: zstdCompress }] : []),
  { name: 'gzip', compression: 'gzip' as const, make: (plain: Buffer) => zlib.gzipSync(plain) },
];

/** A zstd frame with a content checksum (XXH64), which Coffer's compressor does not write. */
function zstdWithChecksum(plain: Buffer): Buffer {
  const z = zlib as unknown as { zstdCompressSync?: (b: Buffer, o: object) => Buffer; constants: Record<string, number> };
  if (z.zstdCompressSync) return z.zstdCompressSync(plain, { params: { [z.constants.ZSTD_c_checksumFlag!]: 1 } });
  return spawnSync('zstd', ['-q', '-c', '--check'], { input: plain, maxBuffer: 1024 ** 3 }).stdout;
}

/** The stream with the last byte of its checksum flipped (the gzip CRC-32, the zstd frame's XXH64). */
function badChecksum(plain: Buffer, compression: 'zstd' | 'gzip'): Buffer {
  const copy = compression === 'zstd' ? zstdWithChecksum(plain) : zlib.gzipSync(plain);
  if (compression === 'zstd' && !(copy[4]! & 4)) throw new Error('this zstd frame has no checksum');
  copy[copy.length - (compression === 'gzip' ? 5 : 1)]! ^= 1;
  return copy;
}

/** Decompresses `input` fed in `piece`-byte chunks; resolves with the output or rejects. */
async function decode(d: (typeof decoders)[number], input: Buffer, sealed: number, piece = 1000): Promise<Buffer> {
  const chunks = Array.from({ length: Math.ceil(input.length / piece) }, (_, i) => input.subarray(i * piece, (i + 1) * piece));
  const out: Buffer[] = [];
  await pipeline(
    Readable.from(chunks),
    decompressor(d.compression, sealed, { native: d.native }),
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        out.push(chunk);
        callback();
      },
    }),
  );
  return Buffer.concat(out);
}

describe.each(decoders)('the one-frame rule and the size bound, in process: $name', (d) => {
  const plain = Buffer.from('one frame, nothing after it\n'.repeat(5000));
  const other = Buffer.from('a second frame\n'.repeat(100));

  it('decodes one frame or member, whatever the chunking', async () => {
    for (const piece of [1, 7, 1000, 1 << 20]) expect((await decode(d, d.make(plain), plain.length, piece)).equals(plain)).toBe(true);
  });

  it.each([
    ['a second frame or member', () => Buffer.concat([d.make(plain), d.make(other)]), plain.length + other.length],
    ['trailing zero bytes', () => Buffer.concat([d.make(plain), Buffer.alloc(4)]), plain.length],
    ['trailing junk', () => Buffer.concat([d.make(plain), Buffer.from('junk')]), plain.length],
    [
      'a skippable zstd frame after it',
      () => Buffer.concat([d.make(plain), Buffer.from([0x50, 0x2a, 0x4d, 0x18, 1, 0, 0, 0, 0])]),
      plain.length,
    ],
    ['a truncated frame', () => d.make(plain).subarray(0, -3), plain.length],
    ['a wrong checksum (the zstd frame’s XXH64, the gzip CRC-32)', () => badChecksum(plain, d.compression), plain.length],
    ['output past the sealed size', () => d.make(plain), plain.length - 1],
    ['an empty stream', () => Buffer.alloc(0), 0],
  ])('refuses %s as an IntegrityError', async (_case, input, sealed) => {
    for (const piece of [1, 1000, 1 << 20]) {
      const failure = await decode(d, input(), sealed, piece).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure, `chunks of ${piece}`).toBeInstanceOf(Error);
      // A breach of the rule is an IntegrityError; a corrupt stream may be the decoder's error (readBackup wraps it).
      if (!/truncated|checksum/.test(_case)) expect(failure, `chunks of ${piece}`).toBeInstanceOf(IntegrityError);
    }
  });
});

describe('zstd frames a decoder must not be asked to take', () => {
  const fzstd = decoders.find((d) => d.native === false) ?? {
    name: 'fzstd',
    compression: 'zstd' as const,
    native: false,
    make: zstdCompress,
  };
  it('a window above 128 MiB, a content size other than the sealed one, a bomb past the sealed size', async () => {
    const bigWindow = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, (28 - 10) << 3, 0x01, 0x00, 0x00]);
    await expect(decode(fzstd, bigWindow, 10)).rejects.toThrow(/window/);
    // Single segment, 1-byte content size 5, one raw block of 5 bytes: sealed as 4 bytes.
    const sized = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x20, 5, 0x29, 0x00, 0x00, 1, 2, 3, 4, 5]);
    expect(await decode(fzstd, sized, 5)).toEqual(Buffer.from([1, 2, 3, 4, 5]));
    await expect(decode(fzstd, sized, 4)).rejects.toThrow(/holds 5 bytes; the sealed metadata says 4/);
    await expect(decode(fzstd, zstdBomb(8192), 1024 * 1024, 64 * 1024)).rejects.toThrow(/more than its sealed 1048576 bytes/);
  });
});

/** Other Node executables to run the CLI on: COFFER_TEST_NODES (':'-separated; .ci/run gives Node 22 and 24), the system's. */
function otherNodes(): { node: string; version: string }[] {
  const found = [...(process.env.COFFER_TEST_NODES ?? '').split(':').filter(Boolean), '/usr/bin/node', '/usr/local/bin/node'];
  const nodes = new Map<string, string>();
  for (const node of found) {
    if (!fs.existsSync(node)) continue;
    const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout?.trim();
    if (version && version !== process.version) nodes.set(version, node);
  }
  return [...nodes].map(([version, node]) => ({ node, version }));
}

describe('through the CLI, against a real server', () => {
  let server: TestServer;
  let clock: ManualClock;
  let work: string;
  let client: CofferClient;
  let masterKey: Buffer;
  let env: Record<string, string>;
  let hwmHook: string;

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    const { apiKey } = await server.newKey({ plan: 'pro' });
    work = tempDir('coffer-decomp-');
    const home = path.join(work, 'home');
    await fsp.mkdir(home);
    env = {
      COFFER_URL: server.url,
      COFFER_API_KEY: apiKey,
      COFFER_PASSPHRASE: PASSPHRASE,
      COFFER_KDF: 'min',
      HOME: home,
      XDG_CONFIG_HOME: path.join(home, '.config'),
      XDG_STATE_HOME: path.join(home, '.state'),
      XDG_CACHE_HOME: path.join(home, '.cache'),
    };
    expect((await cliFor(server.url, apiKey, PASSPHRASE, env)(['init'])).code).toBe(0);
    client = new CofferClient({ baseUrl: server.url, apiKey });
    ({ masterKey } = await unlockVault(client, PASSPHRASE));
    // Preloaded into the CLI: writes the process's peak resident set (VmHWM, kB) to COFFER_TEST_HWM at exit.
    hwmHook = path.join(work, 'hwm.cjs');
    await fsp.writeFile(
      hwmHook,
      "process.on('exit', () => require('fs').writeFileSync(process.env.COFFER_TEST_HWM, " +
        "/VmHWM:\\s+(\\d+)/.exec(require('fs').readFileSync('/proc/self/status', 'utf8'))[1]));\n",
    );
  });

  afterAll(async () => {
    if (masterKey) wipe(masterKey);
    await server?.stop();
  });

  /** Uploads `compressed` as a READY raw backup sealed with the given plaintext size and SHA-256. */
  async function upload(
    compressed: Buffer,
    compression: 'gzip' | 'zstd',
    plaintextSizeBytes: number,
    plaintextSha256: string,
    archive: 'raw' | 'tar' = 'raw',
  ): Promise<string> {
    const dek = newKey();
    try {
      const sealed = await buffer(Readable.from([compressed]).pipe(new EncryptStream(dek)));
      const slot = await client.createBackup();
      if (slot.upload.protocol !== 'direct') throw new Error(`expected a direct upload slot, got ${slot.upload.protocol}`);
      await uploadDirect(client, client.directUploadUrl(slot.backupId), Readable.from([sealed]));
      const metadata: BackupMetadata = {
        format: 'coffer-archive/v1',
        name: 'data.bin',
        sourcePath: '-',
        createdAt: new Date().toISOString(),
        kind: archive === 'raw' ? 'file' : 'directory',
        fileCount: 1,
        directoryCount: 0,
        symlinkCount: 0,
        archive,
        compression,
        chunkBytes: CHUNK_BYTES,
        plaintextSizeBytes,
        plaintextSha256,
        ciphertextSizeBytes: sealed.length,
      };
      await client.finalizeBackup(slot.backupId, {
        cryptoVersion: 'v1',
        ...wrapDek(masterKey, slot.backupId, dek),
        ...sealMetadata(dek, slot.backupId, metadata),
        ciphertextSizeBytes: sealed.length,
        plaintextSizeBytes,
      });
      clock.advance(31 * 60 * 1000); // pro plan: one backup per 30 minutes
      return slot.backupId;
    } finally {
      wipe(dek);
    }
  }

  /** Runs the CLI (on `node`, this one by default) and reports its exit, output and peak memory in MB. */
  async function run(args: string[], node = process.execPath) {
    const hwm = path.join(work, `hwm-${Math.random().toString(36).slice(2)}`);
    const cli = startCli(args, { ...env, COFFER_TEST_HWM: hwm }, { command: [node, '--require', hwmHook] });
    const result = await cli.within(120_000);
    const peakMb = Number(await fsp.readFile(hwm, 'utf8')) / 1024;
    return { ...result, peakMb };
  }

  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

  it.skipIf(noZstd)('a 32 KiB zstd bomb (a tar of a 1 GiB file) sealed as 1 MiB: exit 4, nothing written, memory bounded', async () => {
    const tarHeader = Buffer.alloc(512);
    new tar.Header({ path: 'big', mode: 0o644, size: GiB, mtime: new Date(), type: 'File', uid: 0, gid: 0 }).encode(tarHeader, 0);
    const id = await upload(zstdBomb(8192, 0x61, tarHeader), 'zstd', 1024 * 1024, filledSha256(1024 * 1024), 'tar');
    const target = path.join(work, 'zstd-bomb');
    const restored = await run(['restore', id, target]);
    expect(restored.peakMb).toBeLessThan(400);
    expect(restored.code, restored.stderr).toBe(4);
    expect(restored.stderr).toMatch(/more than its sealed 1048576 bytes/);
    expect(fs.existsSync(target)).toBe(false);
    for (const command of [
      ['ls', id],
      ['verify', id],
    ]) {
      const listed = await run(command);
      expect(listed.peakMb).toBeLessThan(400);
      expect(listed.code, listed.stderr + listed.stdout).toBe(4);
    }
  });

  it.skipIf(noZstd)(
    'an authentic 512 MiB zstd backup (a tar of one file) restores with bounded memory: the decoder waits for its reader',
    async () => {
      const size = GiB / 2;
      const tarHeader = Buffer.alloc(512);
      new tar.Header({ path: 'big', mode: 0o644, size, mtime: new Date(), type: 'File', uid: 0, gid: 0 }).encode(tarHeader, 0);
      const hash = createHash('sha256').update(tarHeader);
      const block = Buffer.alloc(1024 * 1024, 0x61);
      for (let done = 0; done < size; done += block.length) hash.update(block);
      // The RLE blocks carry the file; a last raw block the tar's end (two zero blocks).
      const frame = zstdBomb(4096, 0x61, tarHeader);
      frame.writeUInt8(frame[frame.length - 4]! & ~1, frame.length - 4); // the last RLE block is not the frame’s last
      const end = Buffer.concat([Buffer.from([((1024 << 3) | 1) & 0xff, (1024 << 3) >> 8, 0]), Buffer.alloc(1024)]);
      hash.update(Buffer.alloc(1024));
      const id = await upload(Buffer.concat([frame, end]), 'zstd', 512 + size + 1024, hash.digest('hex'), 'tar');
      const target = path.join(work, 'authentic');
      const restored = await run(['restore', id, target]);
      expect(restored.peakMb).toBeLessThan(400);
      expect(restored.code, restored.stderr).toBe(0);
      expect((await fsp.stat(path.join(target, 'big'))).size).toBe(size);
      await fsp.rm(target, { recursive: true });
    },
  );

  it('a gzip bomb (512 MiB of zeros) sealed as 1 MiB: exit 4, nothing written, memory bounded', async () => {
    const id = await upload(await gzipZeros(512 * 1024 * 1024), 'gzip', 1024 * 1024, filledSha256(1024 * 1024));
    const target = path.join(work, 'gzip-bomb');
    const restored = await run(['restore', id, target]);
    expect(restored.peakMb).toBeLessThan(400);
    expect(restored.code, restored.stderr).toBe(4);
    expect(restored.stderr).toMatch(/more than its sealed 1048576 bytes/);
    expect(fs.existsSync(target)).toBe(false);
  });

  const nodes = [{ node: process.execPath, version: process.version }, ...otherNodes()];
  const plain = Buffer.from('one verdict on every runtime\n'.repeat(2000));
  const second = Buffer.from('a second part\n'.repeat(50));
  const cases: [string, 'zstd' | 'gzip', () => Buffer, Buffer, number][] = [
    ['one zstd frame', 'zstd', () => zstdCompress(plain), plain, 0],
    ['two zstd frames', 'zstd', () => Buffer.concat([zstdCompress(plain), zstdCompress(second)]), Buffer.concat([plain, second]), 4],
    ['a zstd frame and trailing zeros', 'zstd', () => Buffer.concat([zstdCompress(plain), Buffer.alloc(8)]), plain, 4],
    ['a zstd frame and trailing junk', 'zstd', () => Buffer.concat([zstdCompress(plain), Buffer.from('junk')]), plain, 4],
    ['a zstd frame with its checksum', 'zstd', () => zstdWithChecksum(plain), plain, 0],
    ['a zstd frame with a wrong checksum', 'zstd', () => badChecksum(plain, 'zstd'), plain, 4],
    ['one gzip member', 'gzip', () => zlib.gzipSync(plain), plain, 0],
    ['two gzip members', 'gzip', () => Buffer.concat([zlib.gzipSync(plain), zlib.gzipSync(second)]), Buffer.concat([plain, second]), 4],
    ['a gzip member and trailing zeros', 'gzip', () => Buffer.concat([zlib.gzipSync(plain), Buffer.alloc(8)]), plain, 4],
    ['a gzip member and trailing junk', 'gzip', () => Buffer.concat([zlib.gzipSync(plain), Buffer.from('junk')]), plain, 4],
    ['a gzip member with a wrong CRC-32', 'gzip', () => badChecksum(plain, 'gzip'), plain, 4],
  ];

  // Each compression its own test: without a zstd compressor here the gzip cases still run.
  it.each(nodes)('one verdict on $version (gzip): one member restores, anything after it is exit 4', ({ node }) => verdicts('gzip', node));
  it.skipIf(noZstd).each(nodes)('one verdict on $version (zstd): one frame restores, anything after it is exit 4', ({ node }) =>
    verdicts('zstd', node),
  );

  async function verdicts(kind: 'gzip' | 'zstd', node: string): Promise<void> {
    for (const [name, compression, make, content, code] of cases.filter(([, compression]) => compression === kind)) {
      const id = await upload(make(), compression, content.length, sha(content));
      const target = path.join(work, `verdict-${Math.random().toString(36).slice(2)}`);
      const result = await run(['restore', id, target], node);
      expect(result.code, `${name}: ${result.stderr}`).toBe(code);
      if (code === 0) expect(await fsp.readFile(path.join(target, 'data.bin'))).toEqual(content);
      else expect(fs.existsSync(target), name).toBe(false);
    }
  }
});
