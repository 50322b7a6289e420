/** Extension: restore attestations, what drills reported of a backup (docs/api-rules.md#attestations). */
import { Type } from '@sinclair/typebox';
import { Value, ValueErrorType } from '@sinclair/typebox/value';
import {
  Attestation,
  type AttestationBody,
  AttestationList,
  AttestationPayload,
  AttestationRequest,
  type AttestationRequestBody,
} from '../contract/attestation.js';
import { BackupIdParams } from '../contract/schemas.js';
import {
  ATTESTATION_LIST_DEFAULT,
  ATTESTATION_LIST_MAX,
  type PayloadShapeCheck,
  type RestoreAttestation,
  attestationListLimit,
  checkAttestationRequest,
} from '../domain/attestations.js';
import { iso } from '../domain/time.js';
import type { AppPlugin } from '../http/fastify.js';
import type { Services } from '../services/services.js';
import { type RouteContext, loadReadableBackup } from './context.js';
import { errorResponses, json } from './responses.js';

export type AttestationRouteContext = RouteContext & Pick<Services, 'attestations'>;

const tags = ['Restore attestations'];

/** The component schemas of these routes, for /openapi.json and the routes' references. */
export const ATTESTATION_SCHEMAS = [AttestationPayload, AttestationRequest, Attestation, AttestationList];

/**
 * The payload against AttestationPayload (unknown members allowed). Formats are left to the domain, which checks
 * the only formatted fields the server reads (the ids against the backup, checkedAt as RFC 3339).
 */
export const attestationPayloadIssue: PayloadShapeCheck = (payload) => {
  for (const error of Value.Errors(AttestationPayload, payload)) {
    if (error.type === ValueErrorType.StringFormatUnknown) continue;
    return { path: error.path.slice(1).replaceAll('/', '.'), message: error.message };
  }
  return undefined;
};

export function attestationBody(attestation: RestoreAttestation): AttestationBody {
  return {
    id: attestation.id,
    accountId: attestation.accountId,
    backupId: attestation.backupId,
    recordedAt: iso(attestation.recordedAt),
    recordedByKeyId: attestation.recordedBy,
    checkedAt: iso(attestation.checkedAt),
    result: attestation.result,
    payload: attestation.payload,
    mac: attestation.mac,
  };
}

const listBody = (attestations: RestoreAttestation[]) => ({ attestations: attestations.map(attestationBody) });

/** GET /api/backups/{id}/attestations and GET /api/attestations (no request body). */
export const attestationReadRoutes: AppPlugin<AttestationRouteContext> = async (app, ctx) => {
  const read = ctx.requireScope('backups:read');

  app.get(
    '/api/backups/:id/attestations',
    {
      schema: {
        operationId: 'listBackupAttestations',
        summary: "List a backup's restore attestations, newest first (extension)",
        tags,
        params: BackupIdParams,
        response: { 200: json(Type.Ref(AttestationList), 'Newest first.'), ...errorResponses(401, 403, 404, 500) },
      },
      onRequest: [read, loadReadableBackup(ctx)],
    },
    async (request) => listBody(await ctx.attestations.listForBackup(request.backup)),
  );

  app.get(
    '/api/attestations',
    {
      schema: {
        operationId: 'listAttestations',
        summary: 'List the restore attestations of every backup the caller reads, newest first (extension)',
        tags,
        querystring: Type.Object({
          limit: Type.Optional(
            Type.String({
              pattern: '^[0-9]{1,7}$',
              description: `How many, newest first: 1 to ${ATTESTATION_LIST_MAX} (default ${ATTESTATION_LIST_DEFAULT}).`,
            }),
          ),
        }),
        response: { 200: json(Type.Ref(AttestationList), 'Newest first.'), ...errorResponses(400, 401, 403, 500) },
      },
      onRequest: read,
    },
    async (request) => {
      const { limit } = request.query as { limit?: string };
      return listBody(await ctx.attestations.listVisible(request.principal, attestationListLimit(limit)));
    },
  );
};

/** POST /api/backups/{id}/attestations (a JSON body). */
export const attestationWriteRoutes: AppPlugin<AttestationRouteContext> = async (app, ctx) => {
  app.post<{ Body: AttestationRequestBody }>(
    '/api/backups/:id/attestations',
    {
      schema: {
        operationId: 'recordAttestation',
        summary: "Record a restore drill's attestation of a READY backup (extension)",
        tags,
        params: BackupIdParams,
        body: Type.Ref(AttestationRequest),
        response: {
          201: json(Type.Ref(Attestation), 'The attestation as stored.'),
          ...errorResponses(400, 401, 403, 404, 409, 500),
        },
      },
      // backups:read, not write: a drill reads the backup; a write-only host key cannot drill.
      onRequest: [ctx.requireScope('backups:read'), loadReadableBackup(ctx)],
    },
    async (request, reply) => {
      const checked = checkAttestationRequest(request.body, request.backup, attestationPayloadIssue);
      const stored = await ctx.attestations.record(request.principal.keyId, request.backup, checked);
      return reply.code(201).send(attestationBody(stored));
    },
  );
};
