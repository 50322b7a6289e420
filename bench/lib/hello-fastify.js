/* global process */
/** The P3 baseline: Fastify hello-world, started the same way as Coffer's server process (own process, loopback). */
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.get('/', async () => ({ hello: 'world' }));
await app.listen({ port: 0, host: '127.0.0.1' });
process.send({ ready: { url: `http://127.0.0.1:${app.server.address().port}`, pid: process.pid } });
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
process.on('disconnect', () => process.exit(0));
