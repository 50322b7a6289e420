import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { BlobStore, ByteRange } from './blob-store.js';

const KEY = /^[A-Za-z0-9][A-Za-z0-9._-]*(\/[A-Za-z0-9][A-Za-z0-9._-]*)*$/;

/** Blobs as files under `<root>/blobs`, written to `<root>/tmp` first, fsynced, then renamed into place. */
export class FsBlobStore implements BlobStore {
  readonly kind = 'fs' as const;
  private readonly blobDir: string;
  private readonly tmpDir: string;

  constructor(root: string) {
    this.blobDir = path.join(root, 'blobs');
    this.tmpDir = path.join(root, 'tmp');
    fs.mkdirSync(this.blobDir, { recursive: true });
    fs.mkdirSync(this.tmpDir, { recursive: true });
    // Temp files left by a crash are never complete blobs.
    for (const name of fs.readdirSync(this.tmpDir)) fs.rmSync(path.join(this.tmpDir, name), { force: true });
  }

  private pathOf(key: string): string {
    if (!KEY.test(key) || key.split('/').some((part) => part === '..' || part === '.')) {
      throw new Error(`invalid blob key: ${key}`);
    }
    return path.join(this.blobDir, key);
  }

  async put(key: string, body: Readable, signal?: AbortSignal): Promise<{ size: number }> {
    const target = this.pathOf(key);
    const temp = path.join(this.tmpDir, randomUUID());
    try {
      await pipeline(body, fs.createWriteStream(temp, { flush: true }), signal ? { signal } : {});
      await fsp.mkdir(path.dirname(target), { recursive: true });
      await fsp.rename(temp, target);
      await syncDirectory(path.dirname(target));
      const { size } = await fsp.stat(target);
      return { size };
    } catch (error) {
      await fsp.rm(temp, { force: true });
      throw error;
    }
  }

  async stat(key: string): Promise<{ size: number } | null> {
    try {
      const { size } = await fsp.stat(this.pathOf(key));
      return { size };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const handle = await fsp.open(this.pathOf(key), 'r');
    return handle.createReadStream(range ? { start: range.start, end: range.end } : {});
  }

  async delete(key: string): Promise<void> {
    await fsp.rm(this.pathOf(key), { force: true });
  }

  async *list(): AsyncIterable<string> {
    for (const entry of await fsp.readdir(this.blobDir, { recursive: true, withFileTypes: true })) {
      if (entry.isFile()) {
        yield path.relative(this.blobDir, path.join(entry.parentPath, entry.name)).split(path.sep).join('/');
      }
    }
  }

  async ping(): Promise<void> {
    await fsp.access(this.blobDir, fs.constants.W_OK);
  }
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await fsp.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
