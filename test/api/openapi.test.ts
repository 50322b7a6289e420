/** /openapi.json: a valid OpenAPI 3.1 document that declares exactly the API's statuses and resources. */
import { Validator } from '@seriousme/openapi-schema-validator';
import { beforeAll, describe, expect, it } from 'vitest';
import { useServer } from '../helpers/fixture.js';

const fx = useServer({ env: { COFFER_PUBLIC_URL: 'https://backup.example.test' } });
let document: any;

beforeAll(async () => {
  document = await (await fetch(`${fx.server.url}/openapi.json`)).json();
});

/** The statuses each /api operation declares: its fixed surface (docs/api-rules.md#statuses). */
const DECLARED_STATUSES: Record<string, number[]> = {
  'GET /api/backup-account': [200, 401, 403, 500],
  'PATCH /api/backup-account': [401, 403, 405],
  'POST /api/backup-account/bootstrap': [200, 400, 401, 403, 500],
  'POST /api/backup-account/rotate': [200, 400, 401, 403, 409, 500],
  'POST /api/backup-account/reset': [200, 400, 401, 403, 409, 500],
  'GET /api/backups': [200, 401, 403, 500],
  // Extension (docs/api-rules.md#host-accounts): new operations, so their statuses are the project's own.
  'GET /api/host-accounts': [200, 401, 403, 500],
  'GET /api/host-accounts/{accountId}/backups': [200, 401, 403, 404, 500],
  'POST /api/backups': [201, 401, 403, 409, 429, 500],
  'POST /api/backups/upload': [200, 201, 400, 401, 403, 409, 413, 415, 500],
  'GET /api/backups/{id}': [200, 401, 403, 404, 500],
  'DELETE /api/backups/{id}': [200, 401, 403, 404, 500],
  'POST /api/backups/{id}/finalize': [200, 400, 401, 403, 404, 409, 500],
  // 206 is the one stated extension (docs/api-rules.md#download) (resumable restore).
  'GET /api/backups/{id}/content': [200, 206, 401, 403, 404, 500],
  'GET /api/backups/{id}/events': [200, 401, 403, 404, 500],
  // Extension s3-presigned-download (docs/api-rules.md#s3-presigned-download): a new operation.
  'GET /api/backups/{id}/content-url': [200, 401, 403, 404, 500],
  // Extension: restore attestations (docs/api-rules.md#attestations), new operations.
  'POST /api/backups/{id}/attestations': [201, 400, 401, 403, 404, 409, 500],
  'GET /api/backups/{id}/attestations': [200, 401, 403, 404, 500],
  'GET /api/attestations': [200, 400, 401, 403, 500],
};

describe('/openapi.json', () => {
  it('validates against the OpenAPI 3.1 meta-schema', async () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document.info.version).toBe('0.1.0');
    const result = await new Validator().validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('declares exactly the allowed statuses for every operation, and no other /api operation', () => {
    const operations: Record<string, number[]> = {};
    for (const [path, item] of Object.entries<any>(document.paths)) {
      if (!path.startsWith('/api/')) continue;
      for (const [method, operation] of Object.entries<any>(item)) {
        operations[`${method.toUpperCase()} ${path}`] = Object.keys(operation.responses)
          .map(Number)
          .sort((a, b) => a - b);
      }
    }
    expect(operations).toEqual(DECLARED_STATUSES);
  });

  it('has a component for every API resource and the three security schemes (two API-key headers, the console session)', () => {
    for (const name of [
      'BackupKdf',
      'BackupAccountEnvelope',
      'BackupAccount',
      'BackupStatus',
      'BackupRecord',
      'BackupDetail',
      'BackupFinalizeRequest',
      'CreateBackupResponse',
      'BackupStatusEvent',
      'ErrorResponse',
    ]) {
      expect(document.components.schemas, name).toHaveProperty(name);
    }
    expect(document.components.schemas.BackupStatus.enum).toEqual(['PENDING_UPLOAD', 'UPLOADED', 'READY', 'FAILED', 'DELETING', 'DELETED']);
    expect(document.components.securitySchemes).toEqual({
      bearerAuth: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
      apiKeyHeader: expect.objectContaining({ type: 'apiKey', in: 'header', name: 'x-api-key' }),
      sessionCookie: expect.objectContaining({ type: 'apiKey', in: 'cookie', name: '__Host-coffer_session' }),
    });
    expect(document.security).toEqual([{ bearerAuth: [] }, { apiKeyHeader: [] }, { sessionCookie: [] }]);
  });

  it('uses the public URL and documents the headers and media types of docs/api-rules.md', () => {
    expect(document.servers).toEqual([{ url: 'https://backup.example.test' }]);
    const create = document.paths['/api/backups'].post.responses['201'];
    expect(create.headers).toHaveProperty('X-RateLimit-Policy');
    expect(create.headers['Coffer-Max-Archive-Bytes'].schema).toMatchObject({ type: 'integer', minimum: 1 });
    expect(document.paths['/api/backups'].post.responses['429'].headers).toHaveProperty('Retry-After');
    const content = document.paths['/api/backups/{id}/content'].get.responses['200'];
    expect(Object.keys(content.content)).toEqual(['application/octet-stream']);
    expect(content.headers).toHaveProperty('Content-Disposition');
    expect(content.headers).toHaveProperty('Content-Length');
    const events = document.paths['/api/backups/{id}/events'].get.responses['200'];
    expect(Object.keys(events.content)).toEqual(['text/event-stream']);
    expect(events.headers['Cache-Control'].schema.const).toBe('no-store, no-transform');
    const upload = document.paths['/api/backups/upload'].post;
    expect(Object.keys(upload.requestBody.content).sort()).toEqual(['application/json', 'application/octet-stream']);
    expect(upload.parameters).toEqual([expect.objectContaining({ name: 'backupId', in: 'query', required: false })]);
  });

  it('uses the very schemas that validate requests (a finalize body the document forbids is refused)', () => {
    const finalize = document.paths['/api/backups/{id}/finalize'].post.requestBody.content['application/json'].schema;
    expect(finalize.$ref).toBe('#/components/schemas/BackupFinalizeRequest');
    expect(document.components.schemas.BackupFinalizeRequest.additionalProperties).toBe(false);
  });
});

describe('/openapi.json of a server without COFFER_PUBLIC_URL', () => {
  const local = useServer();

  it('names the address the server listens on: the public URL is part of the config from the start', async () => {
    const served = await (await fetch(`${local.server.url}/openapi.json`)).json();
    expect(served.servers).toEqual([{ url: local.server.url }]);
  });
});
