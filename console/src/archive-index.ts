/**
 * The files of a decrypted backup in the page: an index of its tar entries (made while the archive is checked)
 * and one file's bytes cut out of the verified archive on demand. Web streams only (modern-tar), so the worker
 * and the page share it. Nothing here is trusted for writing: names are shown as text and saved under a
 * sanitized base name; the browser writes nothing else.
 */
import { createTarDecoder } from 'modern-tar';
import type { BackupMetadata } from './crypto/envelope.js';

export interface ArchiveEntry {
  /** Archive-relative, '/'-separated, without './' or a trailing '/'. */
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'hardlink' | 'other';
  size: number;
  mode: number;
  /** RFC 3339, or null. */
  mtime: string | null;
  linkTarget?: string;
}

const TYPES: Record<string, ArchiveEntry['type']> = { file: 'file', directory: 'directory', symlink: 'symlink', link: 'hardlink' };

export const entryPath = (name: string): string =>
  name
    .split('/')
    .filter((part) => part !== '' && part !== '.')
    .join('/');

/** Reads a tar stream to its end and returns its entries (bodies are read and dropped). */
export async function indexTar(tar: ReadableStream<Uint8Array>): Promise<ArchiveEntry[]> {
  const entries: ArchiveEntry[] = [];
  const decoded = tar.pipeThrough(createTarDecoder({ strict: true }));
  const reader = decoded.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const { header, body } = value;
    const path = entryPath(header.name);
    const type = TYPES[header.type ?? 'file'] ?? 'other';
    await body.cancel();
    if (path === '' && type === 'directory') continue;
    entries.push({
      path,
      type,
      size: type === 'file' ? header.size : 0,
      mode: (header.mode ?? 0) & 0o7777,
      mtime: header.mtime ? header.mtime.toISOString().replace('.000Z', 'Z') : null,
      ...(header.linkname ? { linkTarget: header.linkname } : {}),
    });
  }
  return entries;
}

/** The entries of a raw backup (a stream backed up as one file). */
export const rawEntries = (metadata: BackupMetadata): ArchiveEntry[] => [
  { path: metadata.name, type: 'file', size: metadata.plaintextSizeBytes, mode: 0o600, mtime: metadata.createdAt },
];

/**
 * One file of the verified archive as a Blob: the tar is read again from the (in-memory) archive Blob up to
 * that entry. A hard link is followed to the file it links to (one earlier entry of the archive).
 */
export async function extractFile(archive: Blob, metadata: BackupMetadata, wanted: ArchiveEntry, entries: ArchiveEntry[]): Promise<Blob> {
  if (metadata.archive === 'raw') return archive;
  let path = wanted.path;
  if (wanted.type === 'hardlink') path = entryPath(wanted.linkTarget ?? '');
  const target = entries.find((e) => e.path === path && e.type === 'file');
  if (!target) throw new Error(`${wanted.path} is not a file of this backup`);
  const reader = archive
    .stream()
    .pipeThrough(createTarDecoder({ strict: true }))
    .getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (entryPath(value.header.name) !== path || (value.header.type ?? 'file') !== 'file') {
        await value.body.cancel();
        continue;
      }
      const parts: Uint8Array[] = [];
      const body = value.body.getReader();
      for (;;) {
        const chunk = await body.read();
        if (chunk.done) break;
        parts.push(chunk.value);
      }
      return new Blob(parts as BlobPart[], { type: 'application/octet-stream' });
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  throw new Error(`${wanted.path} was not found in the archive`);
}
