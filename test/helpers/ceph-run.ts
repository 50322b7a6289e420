/**
 * `npm run ceph`: a throwaway Ceph cluster with its S3 gateway on loopback for a developer (test/helpers/ceph.ts),
 * until Ctrl-C. Prints the endpoint and the environment for `coffer serve` (bucket `coffer`); the data lives in
 * RAM and is gone when it stops. Runs with vite-node (the TypeScript helper the tests use).
 *
 * Started with an IPC channel (the benchmarks' startChild, bench/lib/coffer.js), it sends that environment as
 * `{ ready: env }` instead and stops when the parent disconnects. COFFER_CEPH_DEVICE_MB sets the RAM the OSD
 * may hold (default 384 MiB).
 */
import { startCeph } from './ceph.js';

const started = Date.now();
const deviceMiB = Number(process.env.COFFER_CEPH_DEVICE_MB ?? 384);
if (!Number.isInteger(deviceMiB) || deviceMiB < 64) throw new Error(`COFFER_CEPH_DEVICE_MB must be a whole number ≥ 64, got ${deviceMiB}`);
const cluster = await startCeph({ bucket: 'coffer', deviceBytes: deviceMiB * 1024 * 1024 });
const env = {
  COFFER_BLOB_STORE: 's3',
  COFFER_S3_ENDPOINT: cluster.endpoint,
  COFFER_S3_BUCKET: cluster.bucket,
  COFFER_S3_REGION: 'us-east-1',
  COFFER_S3_ACCESS_KEY_ID: cluster.accessKeyId,
  COFFER_S3_SECRET_ACCESS_KEY: cluster.secretAccessKey,
};
const stop = () => {
  cluster.stop();
  process.exit(0);
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
process.once('SIGHUP', stop);
if (process.send) {
  process.once('disconnect', stop);
  process.send({ ready: env });
} else {
  console.log(`Ceph's S3 gateway is up at ${cluster.endpoint} (${Date.now() - started} ms; data in ${cluster.directory}, in RAM).`);
  console.log('For coffer serve:\n');
  for (const [name, value] of Object.entries(env)) console.log(`export ${name}=${value}`);
  console.log('\nCtrl-C stops it and removes its directory.');
}
setInterval(() => undefined, 1 << 30);
