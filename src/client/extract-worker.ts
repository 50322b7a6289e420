/**
 * The file-system side of extractInto() (extract.ts), run in worker threads: the main thread checks every entry
 * and sends each worker the creations of the directories it owns, in archive order, in batches; the worker
 * performs them with synchronous calls (one message per batch instead of a thread-pool round trip per call).
 *
 * This function is the whole worker: extract.ts starts it from its source text (`eval`), so it must not refer to
 * anything outside itself (modules come from process.getBuiltinModule).
 *
 * Shared memory (Int32Array): [0, workers) how far each worker got (the sequence number of its last creation,
 * done or skipped), then STOP (destroyed: skip everything) and FAILED (the smallest sequence number that failed;
 * every creation after it is skipped). A creation that depends on another worker's (the directory it goes in,
 * a hard link's target) waits until that worker got past it, then is skipped if anything up to it failed: so
 * nothing is ever created in a directory whose own creation did not succeed.
 */
export interface WorkerItem {
  op: 'mkdir' | 'open' | 'write' | 'close' | 'symlink' | 'link';
  /** The entry's sequence number (write and close: the file's open). */
  seq: number;
  /** Absolute path of what is created. */
  path?: string;
  /** The archive path, for messages. */
  shown?: string;
  mode?: number;
  /** Milliseconds since the epoch. */
  mtime?: number;
  uid?: number;
  gid?: number;
  /** symlink: the target (verbatim); link: the absolute path of the existing file. */
  target?: string;
  /** Creations of other workers this one waits for: [worker, seq] pairs. */
  deps?: number[];
  /** write: the bytes' place in the batch's data. */
  offset?: number;
  length?: number;
}

export interface WorkerBatch {
  items: WorkerItem[];
  data?: ArrayBuffer;
  /** The last message: close what is still open, then answer. */
  finish?: boolean;
}

export interface WorkerFailure {
  seq: number;
  /** Whether the failing call was an exclusive creation (its EEXIST, ELOOP, ENOTDIR mean an alias). */
  creation: boolean;
  code?: string;
  message: string;
  shown?: string;
}

/** A worker's answer to a batch: what failed, and the batch's content buffer, handed back for reuse. */
export interface WorkerAnswer {
  failures: WorkerFailure[];
  data?: ArrayBuffer;
}

/** A worker's first message: its place (it may be started before its extraction exists, see extract-lanes.ts). */
export interface WorkerSetup {
  shared: SharedArrayBuffer;
  index: number;
  keepOwners: boolean;
}

export function extractWorker(): void {
  const { parentPort } = process.getBuiltinModule('node:worker_threads') as typeof import('node:worker_threads');
  parentPort!.once('message', (setup: WorkerSetup) => extract(setup));

  function extract({ shared: buffer, index: self, keepOwners }: WorkerSetup): void {
    const fs = process.getBuiltinModule('node:fs');
    const shared = new Int32Array(buffer);
    const STOP = shared.length - 2;
    const FAILED = shared.length - 1;
    const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
    /** Files open for writing, by sequence number. */
    const open = new Map<number, number>();

    const failAt = (seq: number) => {
      for (;;) {
        const current = Atomics.load(shared, FAILED);
        if (seq >= current || Atomics.compareExchange(shared, FAILED, current, seq) === current) return;
      }
    };
    const skipping = (seq: number) => Atomics.load(shared, STOP) !== 0 || seq > Atomics.load(shared, FAILED);
    const waitFor = (worker: number, seq: number) => {
      for (;;) {
        const got = Atomics.load(shared, worker);
        if (got >= seq || Atomics.load(shared, STOP) !== 0) return;
        Atomics.wait(shared, worker, got, 100);
      }
    };
    const done = (seq: number) => {
      if (Atomics.load(shared, self) < seq) Atomics.store(shared, self, seq);
      Atomics.notify(shared, self);
    };
    const closeFile = (seq: number) => {
      const fd = open.get(seq);
      open.delete(seq);
      if (fd !== undefined) fs.closeSync(fd);
    };

    parentPort!.on('message', (batch: WorkerBatch) => {
      const failures: WorkerFailure[] = [];
      const data = batch.data ? Buffer.from(batch.data) : Buffer.alloc(0);
      const failed = (item: WorkerItem, error: unknown, creation: boolean) => {
        const e = error as NodeJS.ErrnoException;
        failures.push({ seq: item.seq, creation, code: e.code, message: e.message, shown: item.shown });
        failAt(item.seq);
      };
      for (const item of batch.items) {
        if (item.op === 'write' || item.op === 'close') {
          const fd = open.get(item.seq);
          if (fd === undefined) continue; // not created (skipped or failed)
          try {
            if (Atomics.load(shared, STOP) !== 0) {
              closeFile(item.seq);
              continue;
            }
            if (item.op === 'write') {
              const end = item.offset! + item.length!;
              for (let at = item.offset!; at < end;) at += fs.writeSync(fd, data, at, end - at);
            } else {
              if (keepOwners && item.uid !== undefined && item.gid !== undefined) fs.fchownSync(fd, item.uid, item.gid);
              fs.fchmodSync(fd, item.mode!);
              if (item.mtime !== undefined) fs.futimesSync(fd, item.mtime / 1000, item.mtime / 1000);
              closeFile(item.seq);
            }
          } catch (error) {
            failed(item, error, false);
            try {
              closeFile(item.seq);
            } catch {
              // already failing
            }
          }
          continue;
        }
        const deps = item.deps ?? [];
        for (let i = 0; i < deps.length; i += 2) waitFor(deps[i]!, deps[i + 1]!);
        if (!skipping(item.seq)) {
          let created = false;
          try {
            switch (item.op) {
              case 'mkdir':
                fs.mkdirSync(item.path!, item.mode);
                break;
              case 'open':
                open.set(item.seq, fs.openSync(item.path!, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600));
                break;
              case 'symlink':
                fs.symlinkSync(item.target!, item.path!);
                created = true;
                if (keepOwners && item.uid !== undefined && item.gid !== undefined) fs.lchownSync(item.path!, item.uid, item.gid);
                if (item.mtime !== undefined) fs.lutimesSync(item.path!, item.mtime / 1000, item.mtime / 1000);
                break;
              case 'link':
                fs.linkSync(item.target!, item.path!);
                break;
            }
          } catch (error) {
            failed(item, error, !created);
          }
        }
        done(item.seq);
      }
      if (batch.finish) {
        for (const seq of [...open.keys()]) {
          try {
            closeFile(seq);
          } catch {
            // nothing more to report: the restore already failed (a file left open was not complete)
          }
        }
      }
      const answer: WorkerAnswer = { failures, ...(batch.data ? { data: batch.data } : {}) };
      parentPort!.postMessage(answer, batch.data ? [batch.data] : []);
    });
  }
}
