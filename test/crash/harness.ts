/**
 * Crash safety: a real `coffer serve` process runs a mixed workload (bootstraps, creates, full and aborted
 * uploads, finalizes, wrong-size finalizes, deletes, resets, rotations, event streams, downloads) from
 * several concurrent clients, is SIGKILLed (at a random moment; every third round at the moment an upload is
 * half-way in storage: a temp file, an incomplete S3 multipart upload) and is restarted on the same data. Once its
 * start-up sweep has run (coffer_sweeper_runs_total{outcome="ok"} on /metrics), the harness checks:
 *
 * - storage: every READY record's blob exists with exactly ciphertextSizeBytes; no stored blob without a
 *   live (not DELETED) record; no temp file or incomplete multipart upload;
 * - records: nothing in PENDING_UPLOAD/UPLOADED past its expiry, nothing in DELETING or FAILED, at most one
 *   slot in flight per account; the database's own integrity check (SQLite) passes;
 * - the journal: every acknowledged (2xx) write is still there: created slots exist, acknowledged uploads
 *   kept their size, acknowledged finalizes are READY (or DELETED if a delete was also sent), acknowledged
 *   deletes and resets are DELETED, the vault holds the material last acknowledged (or one that was sent
 *   after it, unacknowledged); no record carries a size the client never sent whole (an aborted upload is
 *   never recorded); and a READY backup's content, downloaded through the API, is the exact bytes sent.
 *
 * How much a run exercised is asserted, not only printed: at least CrashLoop.minimums (acknowledged finalizes, kills
 * timed mid-upload, READY contents downloaded and compared). A kill is not timed by the clock, which made a loaded
 * machine exercise a quarter of what an idle one did: a random-moment round is killed after a random number
 * (1–40) of acknowledged writes of that round, one of them a finalize; a targeted round once an upload is
 * half-way in storage (both with a bound against hangs).
 *
 * Every choice of the loop (actions, sizes, cut points, kill moments) comes from one seed, printed at the start and
 * in a failure: COFFER_CRASH_SEED=<seed> replays those choices (the interleaving of the clients still varies).
 *
 * The orphan sweep keeps blobs younger than its grace (1 h: they may belong to an upload still in flight on
 * another node). A crash is taken to have happened longer ago than that: while the server is down the
 * harness moves the stored files' timestamps back two hours (Backend.age), then the restarted server's
 * first sweep must leave no orphan.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { systemClock } from '../../src/domain/clock.js';
import { KeyService } from '../../src/services/keys.js';
import type { Stores } from '../../src/store/ports/stores.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const BIN = path.join(ROOT, 'dist/cli/main.js');
/** /metrics is served only with a token (docs/operations.md#metrics): the harness sets one to read the sweeps. */
const METRICS_TOKEN = 'crash-harness-metrics-token';

export interface Row {
  id: string;
  accountId: string;
  status: string;
  expiresAt: number;
  blobKey: string | null;
  size: number | null;
}

/** One storage pair (SQLite + files, PostgreSQL + S3) as the harness sees it from outside the server. */
export interface Backend {
  name: string;
  /** Environment of the server process (data directory, database URL, S3 settings). */
  env: Record<string, string>;
  rows(): Promise<Row[]>;
  /** accountId → wrappedMasterKey of the accounts that have a vault. */
  vaults(): Promise<Map<string, string>>;
  /** Complete blobs under `backups/`: key → size. */
  blobs(): Promise<Map<string, number>>;
  /** Temp files and incomplete multipart uploads. */
  leftovers(): Promise<string[]>;
  /** Moves every stored file's timestamp `ms` into the past (only while the server is down). */
  age(ms: number): void | Promise<void>;
  /** Problems the database itself reports (SQLite integrity_check, foreign_key_check); [] when none. */
  integrity(): Promise<string[]>;
  /** `n` pro accounts with an all-scope key each, created before the first start. */
  createKeys(n: number): Promise<{ accountId: string; apiKey: string }[]>;
  /**
   * The server offers s3-presigned uploads (COFFER_S3_PRESIGNED=on in `env`): some uploads then go straight to the
   * store under presigned URLs (single PUT, multipart, abandoned, or with a body of another length than signed).
   */
  presigned?: boolean;
}

/**
 * `n` pro accounts with a key each, through the same KeyService `coffer admin keys create` uses, in-process
 * (one admin process per account would cost a second or two each). Migrates and closes `stores`.
 */
export async function issueProKeys(stores: Stores, n: number): Promise<{ accountId: string; apiKey: string }[]> {
  await stores.database.migrate();
  try {
    const keys = new KeyService(stores, systemClock);
    const out: { accountId: string; apiKey: string }[] = [];
    for (let i = 0; i < n; i++) {
      const issued = await keys.issueKey(await keys.createAccount('pro'));
      out.push({ accountId: issued.account.id, apiKey: issued.apiKey });
    }
    return out;
  } finally {
    await stores.database.close();
  }
}

export { assertBuilt } from '../helpers/built.js';

// ---------------------------------------------------------------------------------------------------------
// The server process

interface ServerProcess {
  child: ChildProcess;
  url: string;
  startedAt: number;
  output: () => string;
}

async function startServer(env: Record<string, string>, log: string[]): Promise<ServerProcess> {
  const startedAt = Date.now();
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: {
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'error',
      COFFER_UPLOAD_WINDOW: UPLOAD_WINDOW,
      COFFER_METRICS_TOKEN: METRICS_TOKEN,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const collect = (chunk: Buffer) => {
    output += chunk;
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  // Only a hang detector: on a loaded machine a start has been seen to take 30 s.
  const deadline = Date.now() + 120_000;
  while (!/listening on (\S+)/.test(output)) {
    if (Date.now() > deadline || child.exitCode !== null || child.signalCode !== null) {
      child.kill('SIGKILL');
      await exited(child);
      throw new Error(`the server did not start (exit code ${child.exitCode}, signal ${child.signalCode}):\n${output}`);
    }
    await sleep(20);
  }
  log.push(`started in ${Date.now() - startedAt} ms`);
  return { child, url: /listening on (\S+)/.exec(output)![1]!, startedAt, output: () => output };
}

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How long one request of the checks (or one PUT to the store) may take before the loop stops and names it. */
const REQUEST_BOUND_MS = 60_000;

/**
 * fetch with a bound: a request that hangs (a store that stopped answering) fails within REQUEST_BOUND_MS, naming
 * itself, instead of after undici's five-minute header timeout as an anonymous "fetch failed".
 */
async function boundedFetch(what: string, url: string, init: RequestInit = {}): Promise<globalThis.Response> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(REQUEST_BOUND_MS) });
  } catch (error) {
    const reason = (error as Error).name === 'TimeoutError' ? `no answer within ${REQUEST_BOUND_MS / 1000} s` : (error as Error).message;
    throw new Error(`${what}: ${reason}`, { cause: error });
  }
}

/** Waits until the server's start-up sweep has finished (its Prometheus counter), failing on a sweep error. */
async function awaitSweep(server: ServerProcess): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const response = await boundedFetch('GET /metrics', `${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
    const text = await response.text();
    const count = (outcome: string) =>
      Number(new RegExp(`coffer_sweeper_runs_total\\{outcome="${outcome}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    if (count('error') > 0) throw new Error(`the start-up sweep failed:\n${server.output()}`);
    if (count('ok') > 0) return;
    if (Date.now() > deadline) throw new Error(`no sweep finished within 30 s:\n${server.output()}`);
    await sleep(20);
  }
}

// ---------------------------------------------------------------------------------------------------------
// The client-side journal: what was sent, what was acknowledged

interface BackupFacts {
  id: string;
  accountId: string;
  /** size → SHA-256 of every body sent to this slot in full (acknowledged or not). */
  sentWhole: Map<number, string>;
  uploadAcked: number | null;
  /** The size the server reported for the slot (a read), for the client's next finalize. */
  knownSize: number | null;
  finalizeSent: boolean;
  finalizeAcked: boolean;
  deleteSent: boolean;
  deleteAcked: boolean;
  /** The last round whose checks downloaded its content. */
  contentChecked: boolean;
}

interface AccountFacts {
  accountId: string;
  apiKey: string;
  /** Vault material (wrappedMasterKey) the account may hold: the last acknowledged, plus any sent since. */
  vault: Set<string | null>;
  /** A backup reached READY: its cadence is spent for 30 minutes. */
  spent: boolean;
  /** The slot in flight, as last known. */
  slot: { id: string; status: 'PENDING_UPLOAD' | 'UPLOADED' } | null;
  backups: string[];
}

export interface Tally {
  rounds: number;
  kills: number;
  /** Kills timed to land while an upload was half-way in storage. */
  midUploadKills: number;
  requests: number;
  acknowledged: Record<string, number>;
  inDoubt: number;
  abortedUploads: number;
  streams: number;
  contentChecks: number;
  startMs: number[];
  /** Wall time spent per phase over the whole loop. */
  phaseMs: { start: number; sweep: number; check: number; workload: number };
  /** s3-presigned uploads (Backend.presigned): acknowledged completes, abandoned ones, short bodies refused. */
  presigned: { completed: number; abandoned: number; refused: number };
  /** Damage found on the data right after the kills, before a restart repaired it. */
  found: { orphanBlobs: number; leftovers: number; deleting: number; expiredInFlight: number; failed: number };
}

class ServerGone extends Error {}

interface Response {
  status: number;
  body: any;
}

class Client {
  dead = false;
  constructor(
    private readonly url: string,
    private readonly tally: Tally,
  ) {}

  /** A JSON request; ServerGone when the connection fails (the server was killed). */
  async call(account: AccountFacts, method: string, route: string, json?: unknown): Promise<Response> {
    if (this.dead) throw new ServerGone();
    this.tally.requests += 1;
    let response: globalThis.Response;
    try {
      response = await fetch(`${this.url}${route}`, {
        method,
        headers: { authorization: `Bearer ${account.apiKey}`, ...(json !== undefined ? { 'content-type': 'application/json' } : {}) },
        body: json === undefined ? undefined : JSON.stringify(json),
      });
      const text = await response.text();
      const body = text && (response.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text;
      if (response.status >= 500) throw new Error(`${method} ${route} answered ${response.status}: ${text}`);
      return { status: response.status, body };
    } catch (error) {
      if (error instanceof TypeError || (error as NodeJS.ErrnoException).name === 'SocketError') {
        this.dead = true;
        throw new ServerGone();
      }
      throw error;
    }
  }

  /**
   * Uploads `body` with a Content-Length, or chunked (the S3 store then streams a multipart upload), whole or
   * cut off after `cutAt` bytes (the connection is then destroyed).
   */
  upload(account: AccountFacts, id: string, body: Buffer, cutAt?: number, chunked = false): Promise<Response> {
    if (this.dead) return Promise.reject(new ServerGone());
    this.tally.requests += 1;
    return new Promise((resolveOnce, rejectOnce) => {
      let settled = false;
      const resolve = (value: Response) => {
        if (!settled) resolveOnce(value);
        settled = true;
      };
      const reject = (error: Error) => {
        if (!settled) rejectOnce(error);
        settled = true;
      };
      const request = http.request(`${this.url}/api/backups/upload?backupId=${id}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${account.apiKey}`,
          'content-type': 'application/octet-stream',
          ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(body.length) }),
        },
      });
      request.on('response', (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk) => (text += chunk));
        response.on('end', () => {
          if (response.statusCode! >= 500) return reject(new Error(`upload answered ${response.statusCode}: ${text}`));
          resolve({ status: response.statusCode!, body: text ? JSON.parse(text) : undefined });
        });
        response.on('error', () => reject(new ServerGone()));
      });
      request.on('error', () => {
        if (cutAt === undefined) this.dead = true;
        reject(new ServerGone());
      });
      // A request destroyed before any answer may close without an error event.
      request.on('close', () => reject(new ServerGone()));
      const sent = cutAt === undefined ? body : body.subarray(0, cutAt);
      for (let at = 0; chunked && at < sent.length - 65_536; at += 65_536) request.write(sent.subarray(at, at + 65_536));
      const rest = chunked ? sent.subarray(Math.max(0, Math.ceil(sent.length / 65_536) - 1) * 65_536) : sent;
      if (cutAt === undefined) request.end(rest);
      else request.write(rest, () => setTimeout(() => request.destroy(), pick(0, 20)));
    });
  }

  /**
   * A PUT to a presigned URL, straight to the store (not the server: it goes on when the server is killed). `lie`:
   * a body one byte short, sent without the signed length (the store must refuse it, or complete must).
   */
  async presignedPut(request: { url: string; headers: Record<string, string> }, body: Buffer, lie = false): Promise<globalThis.Response> {
    this.tally.requests += 1;
    const response = await boundedFetch(`a presigned PUT to the store (${new URL(request.url).pathname})`, request.url, {
      method: 'PUT',
      headers: lie ? {} : request.headers,
      body: new Uint8Array(lie ? body.subarray(1) : body),
    });
    await response.arrayBuffer();
    if (response.status >= 500) throw new Error(`the store answered a presigned PUT with ${response.status}`);
    return response;
  }

  /** Follows an event stream until it closes (or the server dies); returns the statuses seen. */
  async watch(account: AccountFacts, id: string, signal: AbortSignal): Promise<string[]> {
    const statuses: string[] = [];
    this.tally.streams += 1;
    try {
      const response = await fetch(`${this.url}/api/backups/${id}/events`, {
        headers: { authorization: `Bearer ${account.apiKey}` },
        signal,
      });
      if (response.status !== 200) {
        await response.text();
        return statuses;
      }
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of response.body!) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(frame)?.[1];
          const data = /^data: (.*)$/m.exec(frame)?.[1];
          if (event === 'backup.status') statuses.push(JSON.parse(data!).status);
          if (event === 'backup.stream.error') throw new Error(`event stream error: ${data}`);
          if (event === 'backup.stream.closed') return statuses;
        }
      }
    } catch (error) {
      if (error instanceof Error && /stream error/.test(error.message)) throw error;
    }
    return statuses;
  }
}

const UPLOAD_WINDOW = '2s';
/**
 * Finalizes (of the right size or not) one round may send. Only a finalize makes a backup READY, and only a READY
 * backup spends its account's cadence, so at most `rounds × FINALIZES_PER_ROUND` accounts are ever spent: with
 * `actors` more accounts than that, an actor always finds one, however many requests a fast machine gets through
 * before the kill.
 */
const FINALIZES_PER_ROUND = 10;
// 6 MB crosses the S3 store's 5 MiB part size: a kill mid-upload leaves an incomplete multipart upload to sweep.
const SIZES = [0, 1, 1000, 65_536, 400_000, 1_500_000, 6_000_000];
/** Parts of a presigned multipart upload (S3's smallest but the last): 6 MB goes in two. */
const PRESIGNED_PART = 5 * 1024 * 1024;

function material(): Record<string, unknown> {
  return {
    cryptoVersion: 'v1',
    kdf: { salt: randomBytes(16).toString('base64'), opslimit: 2, memlimit: 67_108_864 },
    wrappedMasterKey: randomBytes(48).toString('base64'),
    wrappedMasterKeyNonce: randomBytes(24).toString('base64'),
  };
}

function finalizeBody(size: number): Record<string, unknown> {
  return {
    cryptoVersion: 'v1',
    wrappedDek: randomBytes(48).toString('base64'),
    wrappedDekNonce: randomBytes(24).toString('base64'),
    encryptedMetadata: randomBytes(100).toString('base64'),
    encryptedMetadataNonce: randomBytes(24).toString('base64'),
    ciphertextSizeBytes: size,
    plaintextSizeBytes: size,
  };
}

const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** mulberry32: a small seeded generator of numbers in [0, 1). */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The loop's random choices, from its seed (CrashLoop.run sets it). */
let nextRandom: () => number = Math.random;
const chance = () => nextRandom();
/** A whole number in [0, max) or [min, max). */
const pick = (min: number, max?: number) =>
  max === undefined ? Math.floor(nextRandom() * min) : min + Math.floor(nextRandom() * (max - min));

/** The seed of this run: COFFER_CRASH_SEED, else a fresh one. */
export const CRASH_SEED = process.env.COFFER_CRASH_SEED ? Number(process.env.COFFER_CRASH_SEED) : Math.floor(Math.random() * 2 ** 32);
if (!Number.isSafeInteger(CRASH_SEED) || CRASH_SEED < 0)
  throw new Error(`COFFER_CRASH_SEED must be a whole number, got ${process.env.COFFER_CRASH_SEED}`);

/** Bound on how long a round waits for the moment its kill is due (a hang detector, not a timing). */
const KILL_WAIT_MS = 30_000;

export class CrashLoop {
  readonly tally: Tally = {
    rounds: 0,
    kills: 0,
    midUploadKills: 0,
    requests: 0,
    acknowledged: {},
    inDoubt: 0,
    abortedUploads: 0,
    streams: 0,
    contentChecks: 0,
    startMs: [],
    phaseMs: { start: 0, sweep: 0, check: 0, workload: 0 },
    presigned: { completed: 0, abandoned: 0, refused: 0 },
    found: { orphanBlobs: 0, leftovers: 0, deleting: 0, expiredInFlight: 0, failed: 0 },
  };
  private readonly accounts: AccountFacts[] = [];
  private readonly backups = new Map<string, BackupFacts>();
  private nextAccount = 0;
  private readonly log: string[] = [];
  /** In rounds whose kill waits for an upload half-way in storage, uploads are big (S3: multipart). */
  private bigUploads = false;
  /** Slots in flight when the server was last killed (the restart's sweep fails those that expired). */
  private readonly inFlightAtKill = new Set<string>();
  /** Finalizes this round may still send (FINALIZES_PER_ROUND). */
  private finalizesLeft = 0;
  /** Writes (and finalizes) acknowledged in this round: a random-moment kill waits for them. */
  private roundAcks = { all: 0, finalize: 0 };
  private onAck: () => void = () => undefined;

  constructor(
    private readonly backend: Backend,
    private readonly options: { rounds: number; actors: number },
  ) {}

  /**
   * What a run of `rounds` must have exercised at least: acknowledged finalizes (a random-moment round is killed
   * only after one), kills that caught an upload half-way in storage (every third round aims for one), and READY
   * backups whose content the checks downloaded and compared.
   */
  get minimums(): { finalizes: number; midUploadKills: number; contentChecks: number; presigned: number } {
    const { rounds } = this.options;
    const targeted = Math.floor(rounds / 3);
    return {
      finalizes: rounds - targeted,
      midUploadKills: Math.ceil(targeted / 2),
      contentChecks: Math.ceil(((rounds - targeted) * 3) / 4),
      // About half the uploads are presigned where offered: at least one completed every third round.
      presigned: this.backend.presigned ? Math.ceil(rounds / 3) : 0,
    };
  }

  private ack(kind: string): void {
    this.tally.acknowledged[kind] = (this.tally.acknowledged[kind] ?? 0) + 1;
    this.roundAcks.all += 1;
    if (kind === 'finalize') this.roundAcks.finalize += 1;
    this.onAck();
  }

  async run(): Promise<void> {
    nextRandom = seeded(CRASH_SEED);
    console.log(`crash loop ${this.backend.name}: seed ${CRASH_SEED} (COFFER_CRASH_SEED=${CRASH_SEED} replays its choices)`);
    try {
      await this.loop();
    } catch (error) {
      throw new Error(
        `${(error as Error).message}\n(crash loop ${this.backend.name}, seed ${CRASH_SEED}: replay with COFFER_CRASH_SEED=${CRASH_SEED})`,
        { cause: error },
      );
    } finally {
      nextRandom = Math.random;
    }
    const t = this.tally;
    const short: string[] = [];
    const { finalizes, midUploadKills, contentChecks, presigned } = this.minimums;
    if ((t.acknowledged.finalize ?? 0) < finalizes)
      short.push(`${t.acknowledged.finalize ?? 0} acknowledged finalizes (at least ${finalizes})`);
    if (t.midUploadKills < midUploadKills) short.push(`${t.midUploadKills} kills mid-upload (at least ${midUploadKills})`);
    if (t.contentChecks < contentChecks) short.push(`${t.contentChecks} READY contents verified (at least ${contentChecks})`);
    if (t.presigned.completed < presigned) short.push(`${t.presigned.completed} presigned uploads completed (at least ${presigned})`);
    if (short.length > 0) {
      throw new Error(
        `crash loop ${this.backend.name} exercised too little: ${short.join(', ')}; seed ${CRASH_SEED} (COFFER_CRASH_SEED=${CRASH_SEED})`,
      );
    }
  }

  private async loop(): Promise<void> {
    const keys = await this.backend.createKeys(this.options.rounds * FINALIZES_PER_ROUND + this.options.actors);
    for (const { accountId, apiKey } of keys) {
      this.accounts.push({ accountId, apiKey, vault: new Set([null]), spent: false, slot: null, backups: [] });
    }
    const phases = this.tally.phaseMs;
    const timed = async <T>(phase: keyof Tally['phaseMs'], task: () => Promise<T>): Promise<T> => {
      const started = Date.now();
      try {
        return await task();
      } finally {
        phases[phase] += Date.now() - started;
      }
    };
    let server = await timed('start', () => startServer(this.backend.env, this.log));
    try {
      for (let round = 0; round < this.options.rounds; round++) {
        await timed('sweep', () => awaitSweep(server));
        await timed('check', () => this.check(server, round));
        await timed('workload', () => this.workload(server, round % 3 === 2));
        this.tally.kills += 1;
        this.tally.rounds += 1;
        await exited(server.child);
        await timed('check', () => this.survey());
        await this.backend.age(2 * 3_600_000);
        server = await timed('start', () => startServer(this.backend.env, this.log));
      }
      await timed('sweep', () => awaitSweep(server));
      await timed('check', () => this.check(server, this.options.rounds));
    } catch (error) {
      const tail = server.output().split('\n').slice(-40).join('\n');
      throw new Error(`${(error as Error).message}\n--- server output (tail) ---\n${tail}`, { cause: error });
    } finally {
      server.child.kill('SIGKILL');
      await exited(server.child);
    }
    this.tally.startMs = this.log.map((line) => Number(/(\d+) ms/.exec(line)?.[1] ?? 0));
  }

  // ---- workload ----

  /** The next account whose cadence is not spent and that no other client is using. */
  private takeAccount(busy: Set<string>): AccountFacts {
    for (let tries = 0; tries < this.accounts.length; tries++) {
      const account = this.accounts[this.nextAccount++ % this.accounts.length]!;
      if (!account.spent && !busy.has(account.accountId)) return account;
    }
    throw new Error(`every account has used its cadence (or is in use): more than ${FINALIZES_PER_ROUND} finalizes in a round?`);
  }

  /** Several clients work until the server is killed at a random moment. */
  private async workload(server: ServerProcess, targeted: boolean): Promise<void> {
    this.bigUploads = targeted;
    this.finalizesLeft = FINALIZES_PER_ROUND;
    this.roundAcks = { all: 0, finalize: 0 };
    const client = new Client(server.url, this.tally);
    const watches = new AbortController();
    const busy = new Set<string>();
    const actors = Array.from({ length: this.options.actors }, async () => {
      let account = this.takeAccount(busy);
      while (!client.dead) {
        // Some steps need no I/O: let timers (the killer) run.
        await new Promise((resolve) => setImmediate(resolve));
        if (busy.has(account.accountId)) account = this.takeAccount(busy);
        busy.add(account.accountId);
        let next: 'stay' | 'move' = 'stay';
        try {
          next = await this.step(client, account, watches.signal);
        } catch (error) {
          if (!(error instanceof ServerGone)) throw error;
          this.tally.inDoubt += 1;
        } finally {
          busy.delete(account.accountId);
        }
        if (next === 'move') account = this.takeAccount(busy);
      }
    });
    const kill = () => {
      server.child.kill('SIGKILL');
      client.dead = true;
    };
    // Every third round the kill waits for an upload caught half-way in storage (a temp file, an incomplete
    // multipart upload); the others kill at a random moment.
    const killer = targeted
      ? (async () => {
          const deadline = Date.now() + KILL_WAIT_MS;
          while (Date.now() < deadline && (await this.backend.leftovers()).length === 0) await sleep(2);
          if (Date.now() < deadline) this.tally.midUploadKills += 1;
          kill();
        })()
      : (async () => {
          // After a random number of this round's writes were acknowledged, one of them a finalize.
          const target = pick(1, 41);
          const due = () => this.roundAcks.all >= target && this.roundAcks.finalize >= 1;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, KILL_WAIT_MS);
            this.onAck = () => {
              if (due()) {
                clearTimeout(timer);
                resolve();
              }
            };
            this.onAck();
          });
          this.onAck = () => undefined;
          kill();
        })();
    const results = await Promise.allSettled(actors);
    await killer;
    watches.abort();
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  private facts(account: AccountFacts, id: string): BackupFacts {
    let facts = this.backups.get(id);
    if (!facts) {
      facts = {
        id,
        accountId: account.accountId,
        sentWhole: new Map(),
        uploadAcked: null,
        knownSize: null,
        finalizeSent: false,
        finalizeAcked: false,
        deleteSent: false,
        deleteAcked: false,
        contentChecked: false,
      };
      this.backups.set(id, facts);
      account.backups.push(id);
    }
    return facts;
  }

  /** One action for the account; returns whether the actor should move on to another account. */
  private async step(client: Client, account: AccountFacts, watches: AbortSignal): Promise<'stay' | 'move'> {
    const roll = chance();
    if (account.vault.has(null) && account.vault.size === 1) {
      const envelope = material();
      account.vault.add(envelope.wrappedMasterKey as string);
      const response = await client.call(account, 'POST', '/api/backup-account/bootstrap', envelope);
      expectStatus(response, [200], 'bootstrap');
      account.vault = new Set([response.body.wrappedMasterKey]);
      this.ack('bootstrap');
      return 'stay';
    }
    if (account.slot === null) {
      if (account.spent || roll < 0.08) return this.afterwards(client, account, watches);
      const response = await client.call(account, 'POST', '/api/backups');
      if (response.status === 201) {
        this.facts(account, response.body.backupId);
        account.slot = { id: response.body.backupId, status: 'PENDING_UPLOAD' };
        this.ack('create');
        if (chance() < 0.3) void client.watch(account, response.body.backupId, watches);
        return 'stay';
      }
      if (response.status === 409 && response.body.code === 'upload_in_progress') {
        const current = await client.call(account, 'GET', `/api/backups/${response.body.details.backupId}`);
        expectStatus(current, [200, 404], 'read the slot in flight');
        if (current.status !== 200) return 'move';
        account.slot = { id: current.body.id, status: current.body.status };
        this.facts(account, current.body.id).knownSize = current.body.ciphertextSizeBytes;
        return 'stay';
      }
      if (response.status === 409 && response.body.code === 'vault_not_initialized') {
        account.vault = new Set([null]);
        return 'stay';
      }
      expectStatus(response, [429], 'create');
      account.spent = true;
      return 'move';
    }
    const slot = account.slot;
    const facts = this.facts(account, slot.id);
    if (slot.status === 'PENDING_UPLOAD') {
      if (roll < 0.06) {
        // Abandoned: the slot expires (COFFER_UPLOAD_WINDOW) and the sweeper fails and removes it.
        account.slot = null;
        return 'move';
      }
      if (roll < 0.14) return this.deleteBackup(client, account, facts);
      const size = (this.bigUploads ? SIZES.at(-1)! : SIZES[pick(SIZES.length)]!) + facts.sentWhole.size;
      const data = randomBytes(size);
      const chunked = this.bigUploads || chance() < 0.3;
      if (this.backend.presigned && chance() < 0.5) return this.presignedUpload(client, account, facts, data, roll < 0.3);
      if (roll < 0.3 && size > 1) {
        this.tally.abortedUploads += 1;
        await client.upload(account, slot.id, data, pick(1, size), chunked).catch((error) => {
          if (!(error instanceof ServerGone)) throw error;
        });
        return 'stay';
      }
      facts.sentWhole.set(size, sha(data));
      const response = await client.upload(account, slot.id, data, undefined, chunked);
      if (response.status === 201) {
        facts.uploadAcked = size;
        account.slot = { id: slot.id, status: 'UPLOADED' };
        this.ack('upload');
        return 'stay';
      }
      // The slot expired, or an earlier (cut off, unacknowledged) attempt got there: look again.
      expectStatus(response, [400, 409], 'upload');
      return this.refresh(client, account, slot.id);
    }
    // UPLOADED; once the round's finalizes are used up, the slot waits (or expires) while the account does the rest.
    if (this.finalizesLeft === 0) return this.afterwards(client, account, watches);
    const size = facts.uploadAcked ?? facts.knownSize ?? [...facts.sentWhole.keys()].at(-1) ?? 0;
    if (roll < 0.05) {
      this.finalizesLeft -= 1;
      const response = await client.call(account, 'POST', `/api/backups/${slot.id}/finalize`, finalizeBody(size + 1));
      expectStatus(response, [404, 409], 'finalize with a wrong size');
      if (response.status === 409 && response.body.code !== 'ciphertext_size_mismatch') return this.refresh(client, account, slot.id);
      return 'stay';
    }
    if (roll < 0.1) return this.deleteBackup(client, account, facts);
    if (roll < 0.13) {
      account.slot = null;
      return 'move';
    }
    this.finalizesLeft -= 1;
    facts.finalizeSent = true;
    const response = await client.call(account, 'POST', `/api/backups/${slot.id}/finalize`, finalizeBody(size));
    if (response.status === 200) {
      facts.finalizeAcked = true;
      account.slot = null;
      account.spent = true;
      this.ack('finalize');
      return 'stay';
    }
    expectStatus(response, [404, 409], 'finalize');
    return this.refresh(client, account, slot.id);
  }

  /**
   * An s3-presigned upload of `data` into the account's slot: one PUT up to PRESIGNED_PART bytes, parts above;
   * `abandon`: stored in part (or not at all) and never completed, sometimes aborted; now and then a single PUT
   * whose body is one byte short of what was signed, which must never become the slot's content.
   */
  private async presignedUpload(
    client: Client,
    account: AccountFacts,
    facts: BackupFacts,
    data: Buffer,
    abandon: boolean,
  ): Promise<'stay' | 'move'> {
    const negotiate = (type: string, payload: Record<string, unknown>) =>
      client.call(account, 'POST', '/api/backups/upload', { type: `s3-presigned.${type}`, payload: { backupId: facts.id, ...payload } });
    const multipart = data.length > PRESIGNED_PART;
    const start = await negotiate('start', multipart ? {} : { size: data.length });
    if (start.status !== 200) {
      // The slot expired, was deleted, or an unacknowledged attempt got there.
      expectStatus(start, [400, 409], 'presigned start');
      return this.refresh(client, account, facts.id);
    }
    const { uploadKey, uploadId } = start.body;
    const chunks: Buffer[] = [];
    for (let at = 0; at < data.length || chunks.length === 0; at += PRESIGNED_PART) chunks.push(data.subarray(at, at + PRESIGNED_PART));
    if (abandon) {
      this.tally.abortedUploads += 1;
      this.tally.presigned.abandoned += 1;
      if (!multipart && chance() < 0.5) await client.presignedPut(start.body.request, data);
      if (multipart) {
        const part = await negotiate('part', { uploadKey, uploadId, partNumber: 1, size: chunks[0]!.length });
        expectStatus(part, [200, 400, 409], 'presigned part');
        if (part.status === 200) await client.presignedPut(part.body.request, chunks[0]!);
      }
      if (chance() < 0.3) expectStatus(await negotiate('abort', { uploadKey, uploadId }), [200, 400, 409], 'presigned abort');
      return 'stay';
    }
    const lie = !multipart && data.length > 1 && chance() < 0.15;
    const parts: { partNumber: number; etag: string }[] = [];
    if (multipart) {
      for (const [index, chunk] of chunks.entries()) {
        const signed = await negotiate('part', { uploadKey, uploadId, partNumber: index + 1, size: chunk.length });
        if (signed.status !== 200) {
          expectStatus(signed, [400, 409], 'presigned part');
          return this.refresh(client, account, facts.id);
        }
        const stored = await client.presignedPut(signed.body.request, chunk);
        if (stored.status !== 200) throw new Error(`the store refused a presigned part: ${stored.status}`);
        parts.push({ partNumber: index + 1, etag: stored.headers.get('etag')! });
      }
    } else {
      const stored = await client.presignedPut(start.body.request, data, lie);
      if (!lie && stored.status !== 200) throw new Error(`the store refused a presigned PUT: ${stored.status}`);
    }
    if (!lie) facts.sentWhole.set(data.length, sha(data));
    const complete = await negotiate('complete', { uploadKey, size: data.length, ...(multipart ? { uploadId, parts } : {}) });
    if (complete.status === 200) {
      if (lie) throw new Error(`complete accepted a body one byte short of the ${data.length} signed (${uploadKey})`);
      facts.uploadAcked = data.length;
      account.slot = { id: facts.id, status: 'UPLOADED' };
      this.ack('upload');
      this.tally.presigned.completed += 1;
      return 'stay';
    }
    if (lie) this.tally.presigned.refused += 1;
    expectStatus(complete, [400, 409], 'presigned complete');
    if (!lie && complete.body.code === 'ciphertext_size_mismatch')
      throw new Error(`complete refused a whole upload: ${JSON.stringify(complete.body)}`);
    return this.refresh(client, account, facts.id);
  }

  /** Re-reads a slot whose state the client got wrong (expiry, or an unacknowledged attempt that landed). */
  private async refresh(client: Client, account: AccountFacts, id: string): Promise<'stay' | 'move'> {
    const current = await client.call(account, 'GET', `/api/backups/${id}`);
    expectStatus(current, [200, 404], 'read a slot');
    const status = current.status === 200 ? current.body.status : 'GONE';
    account.slot = status === 'PENDING_UPLOAD' || status === 'UPLOADED' ? { id, status } : null;
    if (current.status === 200) this.facts(account, id).knownSize = current.body.ciphertextSizeBytes;
    if (status === 'READY') account.spent = true;
    return account.slot ? 'stay' : 'move';
  }

  private async deleteBackup(client: Client, account: AccountFacts, facts: BackupFacts): Promise<'stay' | 'move'> {
    facts.deleteSent = true;
    const response = await client.call(account, 'DELETE', `/api/backups/${facts.id}`);
    expectStatus(response, [200, 404], 'delete');
    if (response.status === 200) {
      facts.deleteAcked = true;
      this.ack('delete');
    }
    if (account.slot?.id === facts.id) account.slot = null;
    return 'stay';
  }

  /** With the cadence spent (or now and then): reads, downloads, streams, deletes, rotations, resets. */
  private async afterwards(client: Client, account: AccountFacts, watches: AbortSignal): Promise<'stay' | 'move'> {
    const roll = chance();
    const ready = account.backups.map((id) => this.backups.get(id)!).filter((f) => f.finalizeAcked && !f.deleteSent);
    if (roll < 0.2 && ready.length > 0) {
      const facts = ready[pick(ready.length)]!;
      const statuses = await client.watch(account, facts.id, watches);
      if (!client.dead && statuses.length > 0 && statuses.at(-1) !== 'READY')
        throw new Error(`stream of READY ${facts.id} said ${statuses}`);
      return 'stay';
    }
    if (roll < 0.35 && ready.length > 0) return this.deleteBackup(client, account, ready[pick(ready.length)]!);
    if (roll < 0.45) {
      const envelope = material();
      account.vault.add(envelope.wrappedMasterKey as string);
      const response = await client.call(account, 'POST', '/api/backup-account/rotate', envelope);
      expectStatus(response, [200, 409], 'rotate');
      account.vault = new Set([response.status === 200 ? response.body.wrappedMasterKey : null]);
      if (response.status === 200) this.ack('rotate');
      return 'stay';
    }
    if (roll < 0.55) {
      const mine = account.backups.map((id) => this.backups.get(id)!);
      for (const facts of mine) facts.deleteSent = true;
      account.vault.add(null);
      const response = await client.call(account, 'POST', '/api/backup-account/reset', { deleteBackups: true });
      expectStatus(response, [200], 'reset');
      for (const facts of mine) facts.deleteAcked = true;
      account.vault = new Set([null]);
      account.slot = null;
      this.ack('reset');
      return 'move';
    }
    if (roll < 0.7) {
      const response = await client.call(account, 'GET', '/api/backups');
      expectStatus(response, [200], 'list');
      for (const record of response.body.backups) {
        const facts = this.backups.get(record.id);
        if (!facts) throw new Error(`the list of ${account.accountId} names a backup nobody created: ${record.id}`);
      }
      return 'stay';
    }
    return 'move';
  }

  // ---- invariants ----

  /** Counts what the kill left for the restart to repair (read while the server is down). */
  private async survey(): Promise<void> {
    const rows = await this.backend.rows();
    const live = new Set(rows.filter((r) => r.status !== 'DELETED' && r.blobKey !== null).map((r) => r.blobKey));
    const found = this.tally.found;
    for (const key of (await this.backend.blobs()).keys()) if (!live.has(key)) found.orphanBlobs += 1;
    found.leftovers += (await this.backend.leftovers()).length;
    this.inFlightAtKill.clear();
    for (const row of rows) {
      if (row.status === 'DELETING') found.deleting += 1;
      if (row.status === 'FAILED') found.failed += 1;
      if (row.status === 'PENDING_UPLOAD' || row.status === 'UPLOADED') this.inFlightAtKill.add(row.id);
    }
  }

  private async check(server: ServerProcess, round: number): Promise<void> {
    const where = `after restart ${round}`;
    const problems: string[] = [];
    const rows = await this.backend.rows();
    const byId = new Map(rows.map((row) => [row.id, row]));
    const blobs = await this.backend.blobs();

    // Storage.
    for (const row of rows.filter((r) => r.status === 'READY')) {
      const size = row.blobKey === null ? undefined : blobs.get(row.blobKey);
      if (size !== row.size) problems.push(`READY ${row.id}: blob ${row.blobKey} has ${size ?? 'no'} bytes, record says ${row.size}`);
    }
    const live = new Set(rows.filter((r) => r.status !== 'DELETED' && r.blobKey !== null).map((r) => r.blobKey));
    for (const key of blobs.keys()) if (!live.has(key)) problems.push(`blob ${key} has no live record`);
    for (const leftover of await this.backend.leftovers()) problems.push(`leftover ${leftover}`);

    // Records.
    const inFlight = new Map<string, number>();
    for (const row of rows) {
      if (row.status === 'DELETING' || row.status === 'FAILED') problems.push(`${row.id} is still ${row.status}`);
      if ((row.status === 'PENDING_UPLOAD' || row.status === 'UPLOADED') && row.expiresAt <= server.startedAt) {
        problems.push(`${row.id} is ${row.status} past its expiry`);
      }
      if (row.status === 'PENDING_UPLOAD' || row.status === 'UPLOADED') inFlight.set(row.accountId, (inFlight.get(row.accountId) ?? 0) + 1);
    }
    for (const [account, count] of inFlight) if (count > 1) problems.push(`account ${account} has ${count} slots in flight`);
    for (const id of this.inFlightAtKill) {
      const row = byId.get(id);
      if (row?.status === 'DELETED' && row.expiresAt <= server.startedAt && !this.backups.get(id)?.deleteSent)
        this.tally.found.expiredInFlight += 1;
    }
    problems.push(...(await this.backend.integrity()));

    // The journal.
    const vaults = await this.backend.vaults();
    for (const account of this.accounts) {
      const stored = vaults.get(account.accountId) ?? null;
      if (!account.vault.has(stored)) problems.push(`vault of ${account.accountId} is ${stored}, expected one of ${[...account.vault]}`);
      account.vault = new Set([stored]);
    }
    const contentChecks: BackupFacts[] = [];
    for (const facts of this.backups.values()) {
      const row = byId.get(facts.id);
      const label = `backup ${facts.id}`;
      if (!row) {
        problems.push(`${label}: acknowledged create, no record`);
        continue;
      }
      if (row.accountId !== facts.accountId) problems.push(`${label}: belongs to ${row.accountId}, not ${facts.accountId}`);
      if (row.size !== null && !facts.sentWhole.has(row.size)) problems.push(`${label}: records ${row.size} bytes, never sent whole`);
      if (facts.uploadAcked !== null && row.size !== facts.uploadAcked)
        problems.push(`${label}: acknowledged upload of ${facts.uploadAcked} bytes, record says ${row.size}`);
      if (facts.uploadAcked !== null && row.status === 'PENDING_UPLOAD')
        problems.push(`${label}: acknowledged upload, still PENDING_UPLOAD`);
      if (facts.deleteAcked && row.status !== 'DELETED') problems.push(`${label}: acknowledged delete, but ${row.status}`);
      if (facts.finalizeAcked && !facts.deleteSent && row.status !== 'READY')
        problems.push(`${label}: acknowledged finalize, but ${row.status}`);
      if (facts.finalizeAcked && facts.deleteSent && !['READY', 'DELETED'].includes(row.status))
        problems.push(`${label}: finalized, ${row.status}`);
      if (row.status === 'READY' && !facts.finalizeSent) problems.push(`${label}: READY without a finalize`);
      if (row.status === 'READY' && !facts.contentChecked) contentChecks.push(facts);
    }
    // What the API serves for a READY backup is exactly what was sent.
    for (const facts of contentChecks) {
      const account = this.accounts.find((a) => a.accountId === facts.accountId)!;
      const response = await boundedFetch(`GET the content of ${facts.id}`, `${server.url}/api/backups/${facts.id}/content`, {
        headers: { authorization: `Bearer ${account.apiKey}` },
      });
      const data = Buffer.from(await response.arrayBuffer());
      const row = byId.get(facts.id)!;
      if (response.status !== 200) problems.push(`backup ${facts.id}: content answered ${response.status}`);
      else if (sha(data) !== facts.sentWhole.get(row.size!))
        problems.push(`backup ${facts.id}: content differs from the ${row.size} bytes sent`);
      facts.contentChecked = true;
      this.tally.contentChecks += 1;
    }
    // The client forgets what it believed about slots; it reads them again.
    for (const account of this.accounts) {
      if (!account.slot) continue;
      const row = byId.get(account.slot.id);
      account.slot = row && (row.status === 'PENDING_UPLOAD' || row.status === 'UPLOADED') ? { id: row.id, status: row.status } : null;
      if (row) this.backups.get(row.id)!.knownSize = row.size;
      if (row?.status === 'READY') account.spent = true;
    }
    if (problems.length > 0)
      throw new Error(`${this.backend.name} ${where}: ${problems.length} problem(s):\n  ${problems.slice(0, 30).join('\n  ')}`);
  }
}

function expectStatus(response: Response, allowed: number[], what: string): void {
  if (!allowed.includes(response.status)) {
    throw new Error(`${what} answered ${response.status} (expected ${allowed.join('/')}): ${JSON.stringify(response.body)}`);
  }
}
