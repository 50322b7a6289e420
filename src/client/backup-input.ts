/**
 * What a backup reads: a scanned tree (packed as tar) or a stream (as one raw file), and the size check the slot's
 * limit asks for before any byte is uploaded (./backup.ts runs it).
 */
import { ChunkPool, packTree, type PackCounts } from './archive.js';
import { scanTree, type TreeScan } from './scan.js';
import { compressBound } from './compression.js';
import { isPlainName } from './envelope-format.js';
import { ciphertextSize } from './envelope.js';
import type { BackupRun, StreamSource } from './backup.js';
import { archiveLimit, measureCiphertext, mib, tooLarge, type ArchiveLimit, type TooLargeStage } from './archive-limit.js';

/** Standard input ended before its first byte: a producer that failed at once, most likely. */
export class EmptyStreamError extends Error {
  override readonly name = 'EmptyStreamError';
}

/**
 * What a backup reads: a scanned tree (packed as tar) or a stream (as one raw file). What waits for the slot
 * (options.afterSlot, a producer to start, a scan after it) runs in opened(), with the size check the slot's limit
 * asks for.
 */
export class BackupInput {
  scan: TreeScan | undefined;
  /** The exact ciphertext size, once a dry run measured it (a tree whose bound passes a limit). */
  private measured: number | undefined;
  readonly counts: PackCounts = { files: 0, directories: 0, symlinks: 0 };
  /** The tar stream's chunks, given back by the compressor once consumed (a stream's own chunks are not the pool's). */
  readonly pool = new ChunkPool();
  private readonly afterSlot: (() => Promise<void>)[];
  private start: () => AsyncIterable<Buffer> = () => {
    throw new Error('the stream was not started');
  };

  constructor(private readonly run: BackupRun) {
    this.afterSlot = run.options.afterSlot ? [run.options.afterSlot] : [];
  }

  /** The plaintext, from its start (a tree's tar stream, or the stream's bytes). */
  read(): AsyncIterable<Buffer> {
    return this.start();
  }

  private async measure(tree: TreeScan, against: ArchiveLimit, stage: TooLargeStage): Promise<number> {
    const { emit, gzipLevel, compression, options } = this.run;
    emit({ type: 'measuring', reason: `the tree holds ${mib(tree.fileBytes)}; measuring its compressed size` });
    const exact = await measureCiphertext(tree, against, gzipLevel, options.signal, compression, stage);
    emit({ type: 'measured', ciphertextBytes: exact });
    return exact;
  }

  private fitsSurely(tree: TreeScan, bytes: number): boolean {
    return ciphertextSize(compressBound(this.run.compression, tree.tarBoundBytes)) <= bytes;
  }

  /** Prepares the stream (read at once when already flowing, or started once the slot is open). */
  async prepareStream(stream: StreamSource): Promise<void> {
    if (!isPlainName(stream.name)) {
      throw new Error(
        `the name of a stream backup must be a plain file name (no "/", no control characters): ${JSON.stringify(stream.name)}`,
      );
    }
    // A stream that ends at once is a producer that failed: its first bytes are read before the upload starts.
    const startStream = async () => {
      const source = typeof stream.stream === 'function' ? stream.stream() : stream.stream;
      const iterator = source[Symbol.asyncIterator]();
      const first = await iterator.next();
      if (first.done) throw new EmptyStreamError('the input stream ended before its first byte: nothing was uploaded');
      this.counts.files = 1;
      this.start = async function* () {
        yield first.value;
        for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
      };
    };
    // A stream already flowing is read before any slot is opened; a producer yet to start waits for the slot.
    if (typeof stream.stream === 'function') this.afterSlot.push(startStream);
    else await startStream();
  }

  /** Prepares the scan of the sources (now, or after options.afterSlot once the slot is open). */
  async prepareTree(): Promise<void> {
    const { options, sources, emit } = this.run;
    const clientLimit = options.maxArchiveBytes;
    const scanSources = async () => {
      const tree = await scanTree(sources, {
        exclude: options.exclude,
        skipUnreadable: options.skipUnreadable,
        ownerName: options.ownerName,
        signal: options.signal,
      });
      this.scan = tree;
      emit({ type: 'scanned', scan: tree });
      // This client's own limit is known before any slot: a tree over it opens none (unless the scan waits for one).
      if (clientLimit !== undefined && !this.fitsSurely(tree, clientLimit)) {
        this.measured = await this.measure(tree, archiveLimit(undefined, clientLimit), options.afterSlot ? 'before-upload' : 'before-slot');
      }
      this.start = () => packTree(tree, this.counts, this.pool);
    };
    if (options.afterSlot) this.afterSlot.push(scanSources);
    else await scanSources();
  }

  /**
   * The server said yes (the slot is open): only now do the hooks and a command producing the stream run, and a
   * tree that might not fit the slot's limit is measured.
   */
  async opened(limit: ArchiveLimit): Promise<void> {
    for (const step of this.afterSlot) await step();
    if (this.scan && !this.fitsSurely(this.scan, limit.bytes)) {
      if (this.measured === undefined) this.measured = await this.measure(this.scan, limit, 'before-upload');
      else if (this.measured > limit.bytes) throw tooLarge(limit, this.measured, 'before-upload');
    }
  }
}
