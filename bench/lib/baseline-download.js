/* global process */
/**
 * A P2 reference (not the target's baseline, which is nginx): a bare node:http server streaming one file with
 * fs.createReadStream(…, { highWaterMark }) → response, nothing else. It shows what Node itself can do
 * without sendfile(2), so a gap to nginx can be split into "Node" and "Coffer".
 */
import fs from 'node:fs';
import http from 'node:http';

const [file, chunk = String(1024 * 1024)] = process.argv.slice(2);
const server = http.createServer((request, response) => {
  const { size } = fs.statSync(file);
  response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
  fs.createReadStream(file, { highWaterMark: Number(chunk) }).pipe(response);
});
server.listen(0, '127.0.0.1', () => {
  process.send({ ready: { url: `http://127.0.0.1:${server.address().port}`, pid: process.pid } });
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
process.on('disconnect', () => process.exit(0));
