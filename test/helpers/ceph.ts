/**
 * A throwaway one-host Ceph cluster on loopback with its S3 gateway (RADOS Gateway), for the tests that run
 * against a real S3 implementation as well as against s3rver (docs/operations.md, "Real S3 (Ceph)").
 *
 * One monitor (msgr v2 only), one OSD on `memstore` (data in RAM, capped), no manager, authentication off, pool
 * size 1, every path under one private temp directory, free loopback ports: two runs on one machine coexist.
 * Start ~3 s, RSS ~135 MB idle. `stop()` SIGKILLs the daemons by their recorded PIDs (the data is thrown away)
 * and removes the directory; a watchdog shell does the same if the starting process dies without stopping.
 *
 * Started once per test run by test/helpers/global-setup.ts (which passes the endpoint to the workers through
 * COFFER_TEST_CEPH), and by `npm run ceph` for a developer (scripts/ceph.ts).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';

const run = promisify(execFile);

/** What the workers need to reach the gateway (JSON in COFFER_TEST_CEPH). */
export interface CephEndpoint {
  endpoint: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
}

export interface CephCluster extends CephEndpoint {
  directory: string;
  stop(): void;
}

/** The Debian packages the cluster needs, and the binaries that show they are installed. */
export const CEPH_PACKAGES = ['ceph-mon', 'ceph-osd', 'radosgw', 'ceph-common'];
const BINARIES = ['monmaptool', 'ceph-mon', 'ceph-osd', 'radosgw', 'radosgw-admin', 'ceph'];

/** Why Ceph cannot start here, or undefined when its binaries are installed. */
export function cephMissing(): string | undefined {
  const dirs = (process.env.PATH ?? '').split(path.delimiter).concat(['/usr/bin', '/usr/sbin']);
  const missing = BINARIES.filter((name) => !dirs.some((dir) => fs.existsSync(path.join(dir, name))));
  return missing.length === 0
    ? undefined
    : `Ceph is not installed (missing ${missing.join(', ')}): apt-get install ${CEPH_PACKAGES.join(' ')}`;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, logs: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Ceph: ${what} did not happen within ${timeoutMs / 1000} s\n${logs()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export interface StartCephOptions {
  /** Parent of the cluster's private directory (default: the system temp folder). */
  parent?: string;
  bucket?: string;
  /** RAM the OSD may hold (default 1 GiB: a whole test run writes to one cluster). */
  deviceBytes?: number;
}

/** Starts the cluster and its gateway, creates a user and a bucket; rejects (having cleaned up) on failure. */
export async function startCeph(options: StartCephOptions = {}): Promise<CephCluster> {
  const missing = cephMissing();
  if (missing) throw new Error(missing);
  const directory = fs.mkdtempSync(path.join(options.parent ?? os.tmpdir(), 'coffer-ceph-'));
  const children: ChildProcess[] = [];
  let watchdog: ChildProcess | undefined;
  const stop = () => {
    for (const child of children) {
      try {
        if (child.pid && child.exitCode === null && child.signalCode === null) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    if (watchdog?.pid && watchdog.exitCode === null) {
      try {
        process.kill(watchdog.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    fs.rmSync(directory, { recursive: true, force: true, maxRetries: 3 });
  };
  const logs = () =>
    (fs.existsSync(path.join(directory, 'log')) ? fs.readdirSync(path.join(directory, 'log')) : [])
      .map((name) => {
        const text = fs.readFileSync(path.join(directory, 'log', name), 'utf8');
        return `--- ${name} (last lines)\n${text.split('\n').slice(-15).join('\n')}`;
      })
      .join('\n');
  try {
    const [monPort, rgwPort] = [await freePort(), await freePort()];
    const fsid = randomUUID();
    const conf = path.join(directory, 'ceph.conf');
    for (const sub of ['run', 'log', 'mon', 'osd', 'rgw']) fs.mkdirSync(path.join(directory, sub));
    fs.writeFileSync(
      conf,
      [
        '[global]',
        `fsid = ${fsid}`,
        `mon_host = [v2:127.0.0.1:${monPort}]`,
        'public_addr = 127.0.0.1',
        'ms_bind_msgr1 = false',
        'ms_bind_msgr2 = true',
        'auth_cluster_required = none',
        'auth_service_required = none',
        'auth_client_required = none',
        'osd_pool_default_size = 1',
        'osd_pool_default_min_size = 1',
        'osd_pool_default_pg_num = 8',
        'osd_pool_default_pgp_num = 8',
        'mon_allow_pool_size_one = true',
        'osd_objectstore = memstore',
        `memstore_device_bytes = ${options.deviceBytes ?? 1024 * 1024 * 1024}`,
        'osd_memory_target = 268435456',
        'paxos_propose_interval = 0.1',
        // A deleted object's tail (past its first 4 MiB) waits for the gateway's garbage collection, which by default
        // runs once an hour: a whole test run's deletes would stay in the memstore, and a full OSD makes every write
        // wait with no answer (a crash-loop PUT was seen to hang until the client gave up). Collect every 10 s.
        'rgw_gc_obj_min_wait = 10',
        'rgw_gc_processor_period = 10',
        `run_dir = ${directory}/run`,
        `admin_socket = ${directory}/run/$name.asok`,
        `pid_file = ${directory}/run/$name.pid`,
        `log_file = ${directory}/log/$name.log`,
        `mon_data = ${directory}/mon/$name`,
        `osd_data = ${directory}/osd/$name`,
        `keyring = ${directory}/keyring`,
        `crash_dir = ${directory}/crash`,
        'mon_cluster_log_file = /dev/null',
        '',
        '[client.rgw.a]',
        `rgw_frontends = beast endpoint=127.0.0.1:${rgwPort}`,
        `rgw_data = ${directory}/rgw`,
        'auth_client_required = none',
        'ms_mon_client_mode = crc secure',
        '',
      ].join('\n'),
    );
    const cli = (command: string, args: string[]) => run(command, ['-c', conf, ...args], { cwd: directory, timeout: 30_000 });
    const daemon = (command: string, args: string[]) => {
      const name = `${command}-${children.length}`;
      const out = fs.openSync(path.join(directory, 'log', `${name}.out`), 'a');
      const child = spawn(command, ['-c', conf, '-f', ...args], { cwd: directory, detached: true, stdio: ['ignore', out, out] });
      fs.closeSync(out);
      child.unref();
      children.push(child);
      if (!watchdog) {
        // Kills the daemons and removes the directory if this process goes away without calling stop().
        watchdog = spawn(
          'sh',
          [
            '-c',
            `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; kill -9 $(cat "$1"/run/pgids 2>/dev/null) 2>/dev/null; rm -rf "$1"`,
            'watchdog',
            directory,
          ],
          { detached: true, stdio: 'ignore' },
        );
        watchdog.unref();
      }
      fs.appendFileSync(path.join(directory, 'run', 'pgids'), ` -${child.pid}`);
      return child;
    };

    const monmap = path.join(directory, 'monmap');
    await run('monmaptool', ['--create', '--fsid', fsid, '--addv', 'a', `[v2:127.0.0.1:${monPort}]`, monmap]);
    await cli('ceph-mon', ['--mkfs', '-i', 'a', '--monmap', monmap]);
    daemon('ceph-mon', ['-i', 'a']);
    const osdUuid = randomUUID();
    const { stdout: osdId } = await until('the monitor answering', 20_000, () => cli('ceph', ['osd', 'new', osdUuid]), logs);
    const id = osdId.trim();
    fs.mkdirSync(path.join(directory, 'osd', `osd.${id}`));
    await cli('ceph-osd', ['-i', id, '--mkfs', '--osd-uuid', osdUuid]);
    daemon('ceph-osd', ['-i', id]);
    daemon('radosgw', ['-n', 'client.rgw.a']);
    const endpoint = `http://127.0.0.1:${rgwPort}`;
    await until('the gateway answering', 60_000, async () => ((await fetch(endpoint)).status > 0 ? true : undefined), logs);
    const accessKeyId = 'COFFERTEST';
    const secretAccessKey = 'coffer-test-secret';
    await cli('radosgw-admin', [
      'user',
      'create',
      '--uid',
      'coffer',
      '--display-name',
      'Coffer tests',
      '--access-key',
      accessKeyId,
      '--secret-key',
      secretAccessKey,
    ]);
    const bucket = options.bucket ?? 'coffer-test';
    const client = new S3Client({
      region: 'us-east-1',
      endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId, secretAccessKey },
    });
    await until(
      'the bucket being created',
      20_000,
      async () => (await client.send(new CreateBucketCommand({ Bucket: bucket })), true),
      logs,
    );
    client.destroy();
    return { endpoint, bucket, accessKeyId, secretAccessKey, directory, stop };
  } catch (error) {
    const text = logs();
    stop();
    throw new Error(`${(error as Error).message}${text && !(error as Error).message.includes('---') ? `\n${text}` : ''}`);
  }
}
