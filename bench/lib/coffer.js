/* global process, Buffer, fetch, URL */
/**
 * Starting Coffer on a chosen backend (SQLite or PostgreSQL metadata, fs or S3 blobs) and driving its API.
 * PostgreSQL: a schema of our own (coffer_bench_<pid>_<n>) in postgres://postgres@127.0.0.1:5432/test,
 * dropped afterwards. S3: s3rver on loopback in its own process, with its own temp directory; or (`ceph`) a real S3,
 * a one-host Ceph cluster with its RADOS Gateway (test/helpers/ceph.ts, run by vite-node in its own process), data in
 * RAM, thrown away afterwards.
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { BENCH_DIR, ROOT, commandExists, log, logFile, startChild, tempDir } from './common.js';

export const PG_URL = process.env.COFFER_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const BACKENDS = ['sqlite+fs', 'postgres+fs', 'sqlite+s3', 'postgres+s3', 'sqlite+ceph', 'postgres+ceph'];
/** RAM the Ceph OSD may hold (memstore): room for a few GiB of archives. */
const CEPH_DEVICE_MB = 6144;

let schemas = 0;

/** Sets up the backing services of one backend; returns the environment for Coffer and a cleanup. */
export async function prepareBackend(backend) {
  const [meta, blobs] = backend.split('+');
  if (!['sqlite', 'postgres'].includes(meta) || !['fs', 's3', 'ceph'].includes(blobs)) {
    throw new Error(`unknown backend ${backend} (known: ${BACKENDS.join(', ')})`);
  }
  const dataDir = tempDir('coffer-bench-data-');
  const env = { COFFER_DATA_DIR: dataDir };
  const cleanups = [async () => fs.rmSync(dataDir, { recursive: true, force: true })];
  try {
    if (meta === 'postgres') {
      const schema = `coffer_bench_${process.pid}_${++schemas}`;
      await withPg((client) => client.query(`create schema "${schema}"`));
      const url = new URL(PG_URL);
      url.searchParams.set('options', `-c search_path=${schema}`);
      env.COFFER_DATABASE_URL = url.toString();
      cleanups.push(() => withPg((client) => client.query(`drop schema if exists "${schema}" cascade`)));
    }
    if (blobs === 's3') {
      const s3Dir = tempDir('coffer-bench-s3-');
      const s3 = await startChild(path.join(BENCH_DIR, 'lib', 's3rver-proc.js'), [s3Dir, 'coffer-bench'], {
        logFile: logFile(`s3rver-${process.pid}.log`),
      });
      Object.assign(env, {
        COFFER_BLOB_STORE: 's3',
        COFFER_S3_ENDPOINT: s3.ready.endpoint,
        COFFER_S3_BUCKET: s3.ready.bucket,
        COFFER_S3_REGION: 'us-east-1',
        COFFER_S3_ACCESS_KEY_ID: 'S3RVER',
        COFFER_S3_SECRET_ACCESS_KEY: 'S3RVER',
      });
      cleanups.push(async () => {
        await s3.stop();
        fs.rmSync(s3Dir, { recursive: true, force: true });
      });
    }
    if (blobs === 'ceph') {
      const ceph = await startChild(
        path.join(ROOT, 'node_modules', 'vite-node', 'vite-node.mjs'),
        [path.join(ROOT, 'test', 'helpers', 'ceph-run.ts')],
        {
          env: { COFFER_CEPH_DEVICE_MB: String(CEPH_DEVICE_MB) },
          logFile: logFile(`ceph-${process.pid}.log`),
          readyTimeoutMs: 120_000,
        },
      );
      Object.assign(env, ceph.ready);
      cleanups.push(async () => void (await ceph.stop()));
    }
  } catch (error) {
    await runCleanups(cleanups);
    throw error;
  }
  return { backend, meta, blobs, dataDir, env, cleanup: () => runCleanups(cleanups) };
}

async function runCleanups(cleanups) {
  for (const cleanup of cleanups.reverse()) {
    await cleanup().catch((error) => log(`cleanup failed: ${error.message}`));
  }
}

async function withPg(fn) {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Whether Ceph's daemons are installed (Debian: ceph-mon ceph-osd radosgw ceph-common), for the `ceph` backends. */
export function cephInstalled() {
  return ['ceph-mon', 'ceph-osd', 'radosgw', 'radosgw-admin', 'monmaptool', 'ceph'].every(
    (command) => commandExists(command) || fs.existsSync(path.join('/usr/sbin', command)) || fs.existsSync(path.join('/usr/bin', command)),
  );
}

/** Whether PostgreSQL answers (the PostgreSQL backends are skipped, with a note, when it does not). */
export async function pgAvailable() {
  try {
    await withPg((client) => client.query('select 1'));
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts a Coffer server process (bench/lib/coffer-proc.js) on a prepared backend.
 * The server logs at its default level (`info`, a line per request), as a user runs it, into `logFile`.
 */
export async function startCoffer(prepared, { env = {}, nodeArgs = [], logFile } = {}) {
  const child = await startChild(path.join(BENCH_DIR, 'lib', 'coffer-proc.js'), [], {
    env: { ...prepared.env, ...env },
    nodeArgs,
    logFile,
  });
  return {
    ...child,
    url: child.ready.url,
    keys: (count = 1, plan = 'pro') => child.request({ type: 'keys', count, plan }),
    stats: () => child.request({ type: 'stats' }),
    advance: (ms) => child.request({ type: 'advance', ms }),
    /** Profiles the server between startProfile() and stopProfile(file) (inspector; writes a .cpuprofile). */
    startProfile: () => child.request({ type: 'profile', action: 'start' }),
    stopProfile: (file) => child.request({ type: 'profile', action: 'stop', file }),
  };
}

/** A small fetch-based client with the API key attached; throws on an unexpected status. */
export function api(baseUrl, apiKey) {
  return async function call(method, urlPath, { json, body, headers = {}, expect } = {}) {
    const allHeaders = { authorization: `Bearer ${apiKey}`, ...headers };
    if (json !== undefined) {
      body = JSON.stringify(json);
      allHeaders['content-type'] = 'application/json';
    }
    const response = await fetch(`${baseUrl}${urlPath}`, { method, headers: allHeaders, body, duplex: 'half' });
    const text = await response.text();
    if (expect !== undefined && response.status !== expect) {
      throw new Error(`${method} ${urlPath}: expected ${expect}, got ${response.status} ${text.slice(0, 300)}`);
    }
    return {
      status: response.status,
      body: text && response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text,
      headers: response.headers,
    };
  };
}

const b64 = (bytes, fill = 1) => Buffer.alloc(bytes, fill).toString('base64');

/** A well-formed vault envelope (the server never interprets it). */
export const envelope = () => ({
  cryptoVersion: 'v1',
  kdf: { salt: b64(16), opslimit: 2, memlimit: 67_108_864 },
  wrappedMasterKey: b64(48),
  wrappedMasterKeyNonce: b64(24),
});

export const finalizeBody = (size) => ({
  cryptoVersion: 'v1',
  wrappedDek: b64(48),
  wrappedDekNonce: b64(24),
  encryptedMetadata: b64(100),
  encryptedMetadataNonce: b64(24),
  ciphertextSizeBytes: size,
  plaintextSizeBytes: size,
  clientVersion: 'bench',
  hostappVersion: 'bench',
});

/** New pro accounts with bootstrapped vaults: [{apiKey, accountId, call}]. */
export async function accounts(coffer, count, { vault = true } = {}) {
  const issued = await coffer.keys(count, 'pro');
  return Promise.all(
    issued.map(async (key) => {
      const call = api(coffer.url, key.apiKey);
      if (vault) await call('POST', '/api/backup-account/bootstrap', { json: envelope(), expect: 200 });
      return { ...key, call };
    }),
  );
}

export async function createSlot(call) {
  return (await call('POST', '/api/backups', { expect: 201 })).body.backupId;
}

export async function uploadSmall(call, id, bytes = Buffer.alloc(1024, 7)) {
  await call('POST', `/api/backups/upload?backupId=${id}`, {
    body: bytes,
    headers: { 'content-type': 'application/octet-stream' },
    expect: 201,
  });
  return bytes.length;
}

export async function finalize(call, id, size) {
  return (await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(size), expect: 200 })).body;
}
