/** Response declarations shared by the route schemas (and thus by /openapi.json). */
import { Type, type TSchema } from '@sinclair/typebox';
import { ErrorResponse } from '../contract/schemas.js';

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Validation failed (`validation_failed`, `invalid_json`).',
  401: 'Missing or invalid credential (`authentication_required`).',
  403:
    'The key lacks the needed permission (`insufficient_scope`, `details.requiredPermission`), or it is append-only and ' +
    'the operation would delete or replace something (`insufficient_scope`, `details.reason: "append_only"`).',
  404: 'Not found.',
  405: 'Method not allowed (`method_not_allowed`).',
  409: 'Conflict with the current state.',
  413:
    'Archive over the size limit (`payload_too_large`, `details.maxBytes`), or an upload that would take the account past ' +
    'its storage quota (`upload_exceeds_quota`, `details.quota` and `details.usage` in bytes); nothing is stored.',
  415: 'Unsupported Content-Type (`unsupported_media_type`).',
  429: 'Backup cadence exceeded (`backup_cadence_exceeded`).',
  500: 'Internal error (`internal_error`).',
};

const RETRY_AFTER = {
  'Retry-After': { type: 'integer', minimum: 0, description: 'Seconds until a new backup is allowed.' },
};

/** The 409 of POST /api/backups, which also answers for the storage quota. */
export const CREATE_CONFLICT =
  'Conflict with the current state: `vault_not_initialized`, `upload_in_progress` (`details.backupId`), or ' +
  '`quota_exceeded` when the account already stores as much as its quota allows (`details.quota` and `details.usage` ' +
  'in bytes; delete or purge backups, or ask the operator for more).';

/** ErrorResponse declarations for the given statuses. */
export function errorResponses(...statuses: number[]): Record<number, object> {
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      {
        description: ERROR_DESCRIPTIONS[status],
        ...(status === 429 ? { headers: RETRY_AFTER } : {}),
        content: { 'application/json': { schema: Type.Ref(ErrorResponse) } },
      },
    ]),
  );
}

/** A JSON success response, optionally with documented headers. */
export function json(schema: TSchema, description: string, headers?: Record<string, object>) {
  return {
    description,
    ...(headers ? { headers } : {}),
    content: { 'application/json': { schema } },
  };
}
