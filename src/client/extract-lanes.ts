/**
 * The scheduler of extractInto() (extract.ts): the file-system work the entry policy allows, as batches for worker
 * threads (extract-worker.ts), one lane per directory. Each directory belongs to one worker, which creates it and
 * everything in it, in archive order; a creation that needs another worker's (its directory's, a hard link's
 * target) names it as a dependency. It bounds the look-ahead (content and entries sent and not yet written), keeps
 * the earliest failure, and settles only when the workers answered for everything.
 */
import { Worker } from 'node:worker_threads';
import { IntegrityError } from './envelope.js';
import { unsafe } from './extract-policy.js';
import {
  extractWorker,
  type WorkerAnswer,
  type WorkerBatch,
  type WorkerFailure,
  type WorkerItem,
  type WorkerSetup,
} from './extract-worker.js';

/** How far the extractor may run ahead of the file system, and how many threads do the file-system work. */
export interface ExtractLimits {
  /** File content sent to the workers and not yet written (bytes; default 8 MiB). Past it, writes wait. */
  aheadBytes?: number;
  /** Entries sent to the workers and not yet done (default 2,048). Past it, writes wait. */
  aheadEntries?: number;
  /** Worker threads (default: the cores, at most 4). */
  workers?: number;
}

/** Where a creation runs: its worker and sequence number (what depends on it waits for that worker to pass it). */
export interface Place {
  worker: number;
  seq: number;
}

/** The place of what exists before any creation (staging itself). */
export const STAGING: Place = { worker: 0, seq: -1 };

const NOT_FAILED = 0x7fffffff;
/** The size of the reused buffers that carry a batch's content to a worker, and how many are kept. */
const DATA_BUFFER = 128 * 1024;
const SPARE_BUFFERS = 64;
const WORKER_SOURCE = `(${extractWorker.toString()})()`;

/** One worker's batch in the making: its items and the content they write. */
interface Pending {
  items: WorkerItem[];
  chunks: Buffer[];
  bytes: number;
  entries: number;
}

const emptyBatch = (): Pending => ({ items: [], chunks: [], bytes: 0, entries: 0 });

/** Workers started ahead of their extraction (prestartWorkers), idle until a lane takes one. */
let spareWorkers: { worker: Worker; failed: boolean }[] = [];

/**
 * Starts `count` extraction workers now, so that a thread's start (a new isolate and Node's bootstrap) is spent
 * while the restore waits for its key rather than when the first files arrive. They do nothing until a WorkerLanes
 * takes them (its place comes as their first message); they do not keep the process alive; dropSpareWorkers() stops
 * those left.
 */
export function prestartWorkers(count: number): void {
  while (spareWorkers.length < count) {
    const spare = { worker: new Worker(WORKER_SOURCE, { eval: true }), failed: false };
    spare.worker.unref();
    spare.worker.once('error', () => (spare.failed = true));
    spare.worker.once('exit', () => (spare.failed = true));
    spareWorkers.push(spare);
  }
}

/** Stops the started workers that no extraction took. */
export function dropSpareWorkers(): void {
  const spares = spareWorkers;
  spareWorkers = [];
  for (const { worker } of spares) void worker.terminate();
}

function takeWorker(): Worker {
  for (;;) {
    const spare = spareWorkers.shift();
    if (!spare) return new Worker(WORKER_SOURCE, { eval: true });
    if (spare.failed) continue;
    spare.worker.removeAllListeners();
    spare.worker.ref();
    return spare.worker;
  }
}

export class WorkerLanes {
  private readonly workerCount: number;
  /** [0, workers): each worker's progress; then STOP and FAILED (extract-worker.ts). */
  private readonly shared: Int32Array;
  private readonly stopAt: number;
  private readonly failedAtIndex: number;
  /** Content buffers back from the workers, for the next batches. */
  private readonly spare: ArrayBuffer[] = [];
  /** Started when first sent something (an archive of one directory uses one). */
  private readonly workers: (Worker | undefined)[] = [];
  private readonly pending: Pending[] = [];
  /** Batches sent to each worker and not yet answered, with what they hold. */
  private readonly sent: { bytes: number; entries: number }[][] = [];
  /** The worker that owns each directory (by archive-relative key): it creates it and what it holds. */
  private readonly owner = new Map<string, number>([['', 0]]);
  private nextOwner = 0;
  /** Each worker's creations queued or sent and not yet answered (what a new directory's owner is chosen by). */
  private readonly backlog: number[];

  /** Creations so far, in archive order (the next one's sequence number). */
  sequence = 0;
  private aheadBytes = 0;
  private aheadEntries = 0;
  private inFlight = 0; // batches sent and not answered
  private failedAt = NOT_FAILED;
  /** The failure of the earliest entry that failed. */
  failure: Error | undefined;
  private heldWrite: ((error?: Error | null) => void) | undefined;
  private settledWaiters: (() => void)[] = [];
  private closing: Promise<void> | undefined;

  constructor(
    private readonly limits: Required<ExtractLimits>,
    private readonly keepOwners: boolean,
    /** Called on every failure (the stream ends at the first). */
    private readonly onFailure: () => void,
  ) {
    this.workerCount = Math.max(1, Math.floor(limits.workers));
    this.shared = new Int32Array(new SharedArrayBuffer(4 * (this.workerCount + 2)));
    this.shared.fill(-1, 0, this.workerCount);
    this.stopAt = this.workerCount;
    this.failedAtIndex = this.workerCount + 1;
    this.shared[this.failedAtIndex] = NOT_FAILED;
    this.backlog = new Array<number>(this.workerCount).fill(0);
    for (let i = 0; i < this.workerCount; i++) {
      this.pending.push(emptyBatch());
      this.sent.push([]);
    }
  }

  /** Calls `then` once no batch is in flight. */
  whenSettled(then: () => void): void {
    if (this.inFlight === 0) then();
    else this.settledWaiters.push(then);
  }

  private over(): boolean {
    return this.aheadBytes > this.limits.aheadBytes || this.aheadEntries > this.limits.aheadEntries;
  }

  /**
   * A stream write's callback: now while the look-ahead is within its bounds, else once it is back under them;
   * after a failure, with it, once nothing is in flight.
   */
  whenRoom(callback: (error?: Error | null) => void): void {
    if (this.failure) return this.whenSettled(() => callback(this.failure));
    if (this.over()) this.heldWrite = callback;
    else callback();
  }

  /** Lets a waiting write go on once the look-ahead is back under its bounds (or a failure ends the stream). */
  private relieve(): void {
    if (!this.heldWrite || (!this.failure && this.over())) return;
    const callback = this.heldWrite;
    this.heldWrite = undefined;
    if (this.failure) this.whenSettled(() => callback(this.failure));
    else callback();
  }

  /** Records a failure; the one of the earliest entry wins. A file-system error that is not a refusal is reported as such. */
  fail(error: unknown, at: number): void {
    if (at < this.failedAt) {
      this.failedAt = at;
      this.failure = error instanceof IntegrityError ? error : new Error(`cannot write the restored files: ${(error as Error).message}`);
      // Nothing after it is created (a worker may be about to start something already sent).
      for (;;) {
        const current = Atomics.load(this.shared, this.failedAtIndex);
        if (at >= current || Atomics.compareExchange(this.shared, this.failedAtIndex, current, at) === current) break;
      }
    }
    this.relieve();
    this.onFailure();
  }

  private answered(worker: number, failures: WorkerFailure[]): void {
    const batch = this.sent[worker]!.shift();
    if (!batch) return;
    this.inFlight -= 1;
    this.aheadBytes -= batch.bytes;
    this.aheadEntries -= batch.entries;
    this.backlog[worker]! -= batch.entries;
    for (const f of failures) {
      const alias = f.creation && (f.code === 'EEXIST' || f.code === 'ELOOP' || f.code === 'ENOTDIR');
      this.fail(
        alias
          ? unsafe('whose name the file system already holds for an earlier entry (a case or Unicode alias?)', f.shown)
          : new Error(f.message),
        f.seq,
      );
    }
    this.relieve();
    if (this.inFlight === 0) {
      const waiters = this.settledWaiters;
      this.settledWaiters = [];
      for (const waiter of waiters) waiter();
    }
  }

  private start(i: number): Worker {
    let worker = this.workers[i];
    if (worker) return worker;
    worker = takeWorker();
    worker.postMessage({ shared: this.shared.buffer as SharedArrayBuffer, index: i, keepOwners: this.keepOwners } satisfies WorkerSetup);
    worker.on('message', ({ failures, data }: WorkerAnswer) => {
      if (data?.byteLength === DATA_BUFFER && this.spare.length < SPARE_BUFFERS) this.spare.push(data);
      this.answered(i, failures);
    });
    worker.on('error', (error) => {
      // A worker that dies answers for nothing more: what it was sent is settled as failed.
      this.fail(error, -1);
      while (this.sent[i]!.length > 0) this.answered(i, []);
    });
    this.workers[i] = worker;
    return worker;
  }

  /** Sends every worker what was queued for it (all at once: a dependency is never sent after what waits for it). */
  flush(): void {
    for (let i = 0; i < this.workerCount; i++) {
      const batch = this.pending[i]!;
      if (batch.items.length === 0) continue;
      this.pending[i] = emptyBatch();
      let data: ArrayBuffer | undefined;
      if (batch.bytes > 0) {
        // Buffers go to the worker and come back with its answer: reused, their pages are not faulted in again.
        data =
          (batch.bytes <= DATA_BUFFER ? this.spare.pop() : undefined) ??
          (Buffer.allocUnsafeSlow(Math.max(batch.bytes, DATA_BUFFER)).buffer as ArrayBuffer);
        const joined = Buffer.from(data, 0, batch.bytes);
        let at = 0;
        for (const chunk of batch.chunks) at += chunk.copy(joined, at);
      }
      this.sent[i]!.push({ bytes: batch.bytes, entries: batch.entries });
      this.inFlight += 1;
      this.start(i).postMessage({ items: batch.items, ...(data ? { data } : {}) } satisfies WorkerBatch, data ? [data] : []);
    }
  }

  /**
   * The owner of directory `key`, chosen as it appears: the worker with the fewest creations still to do (in turn
   * among equals). In turn alone, a tree whose directories alternate between many files and few (a directory and
   * its subdirectory) gave one worker twice the other's files, and the other waited for it (a directory's creation
   * waits for its parent's, queued behind the files before it).
   */
  private ownerOf(key: string): number {
    let worker = this.owner.get(key);
    if (worker === undefined) {
      worker = this.nextOwner;
      for (let k = 1; k < this.workerCount; k++) {
        const i = (this.nextOwner + k) % this.workerCount;
        if (this.backlog[i]! < this.backlog[worker]!) worker = i;
      }
      this.nextOwner = (worker + 1) % this.workerCount;
      this.owner.set(key, worker);
    }
    return worker;
  }

  /**
   * Queues a creation in the lane of the worker owning directory `dir`, after `after` (other creations it needs);
   * returns its place. A directory is created in its own lane (`dir` is its own key), once its parent exists.
   */
  queue(dir: string, item: Omit<WorkerItem, 'seq' | 'deps'>, after: Place[]): Place {
    const worker = this.ownerOf(dir);
    const seq = this.sequence++;
    const deps: number[] = [];
    for (const dep of after) if (dep.worker !== worker && dep.seq >= 0) deps.push(dep.worker, dep.seq);
    const batch = this.pending[worker]!;
    batch.items.push({ ...item, seq, ...(deps.length > 0 ? { deps } : {}) });
    batch.entries += 1;
    this.aheadEntries += 1;
    this.backlog[worker]! += 1;
    return { worker, seq };
  }

  /** Content of the file opened at `file`, as it is parsed. */
  write(file: Place, chunk: Buffer): void {
    const batch = this.pending[file.worker]!;
    batch.items.push({ op: 'write', seq: file.seq, offset: batch.bytes, length: chunk.length });
    batch.chunks.push(chunk);
    batch.bytes += chunk.length;
    this.aheadBytes += chunk.length;
  }

  /** The end of the file opened at `file`: its attributes are set on the descriptor, then it is closed. */
  closeFile(file: Place, attributes: Pick<WorkerItem, 'mode' | 'uid' | 'gid' | 'mtime'>): void {
    this.pending[file.worker]!.items.push({ op: 'close', seq: file.seq, ...attributes });
  }

  /**
   * Sends what is left, then the last message to every worker (which closes any file left open), and resolves
   * once all answered; the workers are then stopped. `stop` skips everything not yet done (destroyed).
   */
  close(stop: boolean): Promise<void> {
    return (this.closing ??= new Promise<void>((resolve) => {
      if (stop) Atomics.store(this.shared, this.stopAt, 1);
      this.flush();
      this.workers.forEach((worker, i) => {
        if (!worker) return;
        this.sent[i]!.push({ bytes: 0, entries: 0 });
        this.inFlight += 1;
        worker.postMessage({ items: [], finish: true } satisfies WorkerBatch);
      });
      this.whenSettled(() => {
        for (const worker of this.workers) void worker?.terminate();
        resolve();
      });
    }));
  }
}
