/* global process, URL */
/**
 * The P1/P5 baseline: a bare node:http server that pipes the request body to a file and answers 201 with the
 * size, nothing else (no framework, no auth, no database). `?fsync=1` opens the file with flush (fsync before
 * close), the durability Coffer's fs store adds; the target compares with the plain pipe.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';

const dir = process.argv[2];
const server = http.createServer(async (request, response) => {
  const url = new URL(request.url, 'http://x');
  if (request.method !== 'POST' || url.pathname !== '/upload') {
    response.writeHead(404).end();
    return;
  }
  const file = path.join(dir, randomUUID());
  let size = 0;
  request.on('data', (chunk) => (size += chunk.length));
  try {
    await pipeline(request, fs.createWriteStream(file, { flush: url.searchParams.get('fsync') === '1' }));
    response.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ size }));
  } catch {
    response.writeHead(500).end();
  }
  fs.rm(file, { force: true }, () => undefined);
});
server.listen(0, '127.0.0.1', () => {
  process.send({ ready: { url: `http://127.0.0.1:${server.address().port}`, pid: process.pid } });
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
process.on('disconnect', () => process.exit(0));
