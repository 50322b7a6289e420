/**
 * `npm run ceph`: a throwaway Ceph cluster with its S3 gateway on loopback for a developer (test/helpers/ceph.ts),
 * until Ctrl-C. Prints the endpoint and the environment for `coffer serve` (bucket `coffer`); the data lives in
 * RAM and is gone when it stops. Runs with vite-node (the TypeScript helper the tests use).
 */
import { startCeph } from './ceph.js';

const started = Date.now();
const cluster = await startCeph({ bucket: 'coffer' });
const env = {
  COFFER_BLOB_STORE: 's3',
  COFFER_S3_ENDPOINT: cluster.endpoint,
  COFFER_S3_BUCKET: cluster.bucket,
  COFFER_S3_REGION: 'us-east-1',
  COFFER_S3_ACCESS_KEY_ID: cluster.accessKeyId,
  COFFER_S3_SECRET_ACCESS_KEY: cluster.secretAccessKey,
};
console.log(`Ceph's S3 gateway is up at ${cluster.endpoint} (${Date.now() - started} ms; data in ${cluster.directory}, in RAM).`);
console.log('For coffer serve:\n');
for (const [name, value] of Object.entries(env)) console.log(`export ${name}=${value}`);
console.log('\nCtrl-C stops it and removes its directory.');
const stop = () => {
  cluster.stop();
  process.exit(0);
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
process.once('SIGHUP', stop);
setInterval(() => undefined, 1 << 30);
