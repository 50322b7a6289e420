/* global process, URL, setInterval, clearInterval */
/**
 * The P4 reference: a bare node:http Server-Sent Events fan-out with nothing else (no framework, no auth, no
 * database): GET /events/<id> opens a stream that gets a status frame at once, every interval and on every
 * change; POST /change/<id>?status=X changes the status and pushes the frame to that id's streams. Same frame
 * shape and interval as Coffer, so the difference is what Coffer itself adds.
 */
import http from 'node:http';

const INTERVAL_MS = Number(process.env.COFFER_SSE_INTERVAL_MS ?? 2000);
const streams = new Map(); // id → Set<stream>
const states = new Map(); // id → status

function frame(stream, id) {
  stream.frameId += 1;
  const now = new Date().toISOString();
  const data = {
    backupId: id,
    status: states.get(id) ?? 'PENDING_UPLOAD',
    createdAt: now,
    expiresAt: now,
    ciphertextSizeBytes: null,
    plaintextSizeBytes: null,
    clientVersion: null,
    hostappVersion: null,
    observedAt: now,
  };
  stream.response.write(`id: ${stream.frameId}\nevent: backup.status\ndata: ${JSON.stringify(data)}\n\n`);
}

const server = http.createServer((request, response) => {
  const [, kind, id] = request.url.split('?')[0].split('/');
  if (request.method === 'GET' && kind === 'events' && id) {
    response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store, no-transform' });
    response.write('retry: 2000\n\n');
    const stream = { response, frameId: 0 };
    let set = streams.get(id);
    if (!set) streams.set(id, (set = new Set()));
    set.add(stream);
    const ticker = setInterval(() => frame(stream, id), INTERVAL_MS);
    response.on('close', () => {
      clearInterval(ticker);
      set.delete(stream);
    });
    frame(stream, id);
    return;
  }
  if (request.method === 'POST' && kind === 'change' && id) {
    states.set(id, new URL(request.url, 'http://x').searchParams.get('status'));
    for (const stream of streams.get(id) ?? []) frame(stream, id);
    request.resume();
    response.writeHead(204).end();
    return;
  }
  response.writeHead(404).end();
});
server.maxConnections = 20_000;
server.listen({ port: 0, host: '127.0.0.1', backlog: 511 }, () => {
  process.send({ ready: { url: `http://127.0.0.1:${server.address().port}`, pid: process.pid } });
});
process.on('SIGTERM', () => {
  for (const set of streams.values()) for (const stream of set) stream.response.destroy();
  server.close(() => process.exit(0));
});
process.on('disconnect', () => process.exit(0));
