/* global process */
/**
 * The P3 baseline: Fastify hello-world (GET / → {"hello":"world"}), started the same way as Coffer's server
 * process (own process, loopback, no logger).
 *
 * With a SQLite file as argument it also serves a reference (not the target's baseline): the same two reads
 * written by hand, minimal — GET /ref/list and GET /ref/account look the Bearer key up by its SHA-256 and
 * read the same rows from Coffer's own database (read-only; prepared statements on the driver Coffer uses here; JSON.stringify). It shows
 * what the work itself costs on this stack, so a gap to hello-world can be split into "the work" and "Coffer".
 */
import { createHash } from 'node:crypto';
import Fastify from 'fastify';
import { openSqliteDatabase } from '../../dist/store/sqlite-driver.js';

const app = Fastify({ logger: false });
app.get('/', async () => ({ hello: 'world' }));

const file = process.argv[2];
if (file) {
  const db = await openSqliteDatabase(file, { readonly: true });
  const keyByHash = db.prepare('select account_id, scopes, expires_at, revoked_at from api_keys where key_hash = ?');
  const list = db.prepare(
    `select id, status, created_at, expires_at, ciphertext_size_bytes, plaintext_size_bytes, client_version, hostapp_version
     from backups where account_id = ? and status in ('PENDING_UPLOAD', 'UPLOADED', 'READY', 'FAILED')
     order by created_at desc, id desc`,
  );
  const account = db.prepare('select plan from accounts where id = ?');
  const vault = db.prepare('select * from vaults where account_id = ?');
  const INTERVAL = { free: '1d', plus: '4h', pro: '30m' };
  const iso = (ms) => new Date(Number(ms)).toISOString();
  const authenticate = (request, reply) => {
    const match = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '');
    const key = match && keyByHash.get([createHash('sha256').update(match[1]).digest('hex')]);
    if (
      !key ||
      key.revoked_at !== null ||
      (key.expires_at !== null && key.expires_at <= Date.now()) ||
      !key.scopes.includes('backups:read')
    ) {
      reply.code(401).send({ error: 'authentication_required' });
      return null;
    }
    return key.account_id;
  };
  app.get('/ref/list', async (request, reply) => {
    const accountId = authenticate(request, reply);
    if (accountId === null) return reply;
    return {
      backups: list.all([accountId]).map((r) => ({
        id: r.id,
        status: r.status,
        createdAt: iso(r.created_at),
        expiresAt: iso(r.expires_at),
        ciphertextSizeBytes: r.ciphertext_size_bytes,
        plaintextSizeBytes: r.plaintext_size_bytes,
        clientVersion: r.client_version,
        hostappVersion: r.hostapp_version,
      })),
    };
  });
  app.get('/ref/account', async (request, reply) => {
    const accountId = authenticate(request, reply);
    if (accountId === null) return reply;
    const { plan } = account.get([accountId]);
    const v = vault.get([accountId]);
    return {
      initialized: v !== undefined,
      backupInterval: INTERVAL[plan],
      cryptoVersion: v?.crypto_version ?? null,
      kdf: v ? { salt: v.kdf_salt, opslimit: v.kdf_opslimit, memlimit: v.kdf_memlimit } : null,
      wrappedMasterKey: v?.wrapped_master_key ?? null,
      wrappedMasterKeyNonce: v?.wrapped_master_key_nonce ?? null,
    };
  });
}

await app.listen({ port: 0, host: '127.0.0.1' });
process.send({ ready: { url: `http://127.0.0.1:${app.server.address().port}`, pid: process.pid } });
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
process.on('disconnect', () => process.exit(0));
