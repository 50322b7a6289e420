/* global process */
/**
 * s3rver (an S3 protocol server on its own disk directory) in its own process on loopback, so that it does
 * not share an event loop with Coffer or the load generator. Like test/helpers/s3.ts it answers
 * ListMultipartUploads and AbortMultipartUpload, which s3rver lacks (Coffer's sweeper calls them).
 */
import fs from 'node:fs';
import path from 'node:path';
import S3rver from 's3rver';

const [directory, bucket = 'coffer-bench'] = process.argv.slice(2);
const uploadsDir = path.join(directory, bucket, '._S3rver_uploads');
const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });

server.middleware.unshift(async (ctx, next) => {
  const [bucketName, ...keyParts] = ctx.path.split('/').filter(Boolean);
  if (bucketName !== bucket) return next();
  if (keyParts.length === 0 && ctx.method === 'GET' && 'uploads' in ctx.query) {
    const ids = fs.existsSync(uploadsDir) ? fs.readdirSync(uploadsDir) : [];
    const items = ids.map(
      (id) =>
        `<Upload><Key>${fs.readFileSync(path.join(uploadsDir, id, 'key'), 'utf8')}</Key><UploadId>${id}</UploadId>` +
        `<Initiated>${fs.statSync(path.join(uploadsDir, id, 'key')).mtime.toISOString()}</Initiated></Upload>`,
    );
    ctx.type = 'application/xml';
    ctx.body =
      '<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
      `<Bucket>${bucket}</Bucket><MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>${items.join('')}</ListMultipartUploadsResult>`;
    return;
  }
  if (keyParts.length > 0 && ctx.method === 'DELETE' && 'uploadId' in ctx.query) {
    fs.rmSync(path.join(uploadsDir, path.basename(String(ctx.query.uploadId))), { recursive: true, force: true });
    ctx.status = 204;
    return;
  }
  return next();
});

const address = await server.run();
process.on('SIGTERM', () => server.close().then(() => process.exit(0)));
process.on('disconnect', () => process.exit(0));
process.send({ ready: { endpoint: `http://127.0.0.1:${address.port}`, bucket } });
