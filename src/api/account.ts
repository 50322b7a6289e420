/** /api/backup-account: vault material and reset (docs/api-rules.md#account). */
import { Type } from '@sinclair/typebox';
import { AppError } from '../domain/errors.js';
import type { FastifyReply } from 'fastify';
import type { AppPlugin } from '../http/fastify.js';
import type { RouteContext } from './context.js';
import { errorResponses, json } from './responses.js';
import {
  BackupAccount,
  type BackupAccountBody,
  BackupAccountEnvelope,
  type BackupAccountEnvelopeBody,
  BootstrapResponse,
  ResetRequest,
  ResetResponse,
  RotateResponse,
} from '../contract/schemas.js';
import { accountBody } from '../contract/views.js';
import type { VaultEnvelope } from '../domain/vault-input.js';
import { type AccountView, type IfMatch, vaultEtag } from '../services/vault.js';
import { actorOf } from './guard.js';

const tags = ['Backup account'];

/** On a rotate answer: how many days the replaced envelope stays restorable (docs/api-rules.md#vault-history). */
export const VAULT_HISTORY_HEADER = 'X-Coffer-Vault-History-Days';

/** The ETag of the vault material (absent while there is no vault), on every answer that carries the material. */
const ETAG_HEADER = {
  ETag: {
    type: 'string',
    description: 'Validator of the current vault material; send it back as If-Match on rotate to make the rotate conditional.',
  },
};

/**
 * On GET: the caller's own account id (an extension): a restore drill names the account that holds the backup in its
 * attestation (docs/crypto.md#restore-attestations), and nothing else tells an API key its own account.
 */
export const ACCOUNT_ID_HEADER = 'X-Coffer-Account-Id';
const ACCOUNT_HEADERS = {
  ...ETAG_HEADER,
  [ACCOUNT_ID_HEADER]: { type: 'string', format: 'uuid', description: "The caller's own account id (a Coffer extension)." },
};

/** The envelope of a bootstrap or rotate body, in the vault service's terms. */
function envelopeOf(body: BackupAccountEnvelopeBody): VaultEnvelope {
  const { cryptoVersion, kdf, wrappedMasterKey, wrappedMasterKeyNonce } = body;
  return {
    cryptoVersion,
    kdf: { salt: kdf.salt, opslimit: kdf.opslimit, memlimit: kdf.memlimit },
    wrappedMasterKey,
    wrappedMasterKeyNonce,
  };
}

function withEtag(reply: FastifyReply, view: AccountView): void {
  if (view.vault) void reply.header('etag', vaultEtag(view.vault));
}

/** Serialized account bodies by the account record they were made from (only frozen records, which cannot change). */
const accountBodies = new WeakMap<AccountView['account'], { vault: AccountView['vault']; bodies: [string?, string?] }>();

/**
 * The GET body, serialized by `serialize` (the route's response serializer). The metadata cache hands out the same
 * frozen account and vault until they change, so an unchanged account is converted and serialized once per kind of
 * credential (append-only or not), not on every read (bench P3).
 */
function serializedAccount(view: AccountView, credential: { appendOnly: boolean }, serialize: (body: BackupAccountBody) => string): string {
  const { account, vault } = view;
  const which = credential.appendOnly ? 1 : 0;
  let entry = accountBodies.get(account);
  if (entry?.vault !== vault) entry = undefined;
  let body = entry?.bodies[which];
  if (body === undefined) {
    body = serialize(accountBody(view, credential));
    const frozen = Object.isFrozen(account) && (vault === undefined || (Object.isFrozen(vault) && Object.isFrozen(vault.kdf)));
    if (frozen) {
      if (entry === undefined) accountBodies.set(account, (entry = { vault, bodies: [] }));
      entry.bodies[which] = body;
    }
  }
  return body;
}

/** One element of an If-Match list: an entity tag, optionally weak, then a comma or the end. */
const ENTITY_TAG = /[ \t]*((?:W\/)?"[\x21\x23-\x7e\x80-\xff]*")[ \t]*(,|$)/y;

/**
 * The If-Match header of a rotate (RFC 9110 §13.1.1): "*" or a list of entity tags; a weak tag never matches (the
 * comparison is strong). Absent: undefined (an unconditional rotate). Malformed or empty: 400 validation_failed.
 */
export function parseIfMatch(header: string | string[] | undefined): IfMatch | undefined {
  if (header === undefined) return undefined;
  const value = (Array.isArray(header) ? header.join(', ') : header).trim();
  if (value === '*') return '*';
  const malformed = () =>
    AppError.validation([{ path: 'headers.if-match', message: 'must be "*" or a comma-separated list of entity tags ("…")' }]);
  if (value === '') throw malformed();
  const tags: string[] = [];
  for (let at = 0; at < value.length;) {
    ENTITY_TAG.lastIndex = at;
    const match = ENTITY_TAG.exec(value);
    if (!match) throw malformed();
    if (!match[1]!.startsWith('W/')) tags.push(match[1]!);
    at = ENTITY_TAG.lastIndex;
  }
  return tags;
}

/** Routes without a request body. */
export const accountReadRoutes: AppPlugin<RouteContext> = async (app, ctx) => {
  app.get(
    '/api/backup-account',
    {
      schema: {
        operationId: 'getBackupAccount',
        summary: 'Read the backup account and its wrapped key material',
        description:
          'For an append-only key, `kdf`, `wrappedMasterKey` and `wrappedMasterKeyNonce` are always `null`: a backup host ' +
          'never holds what a passphrase guess could be checked against (it seals to the public recipient instead).',
        tags,
        response: { 200: json(Type.Ref(BackupAccount), 'The backup account.', ACCOUNT_HEADERS), ...errorResponses(401, 403, 500) },
      },
      onRequest: ctx.requireScope('backups:read'),
    },
    async (request, reply) => {
      const view = await ctx.vault.accountView(request.principal.accountId);
      withEtag(reply, view);
      void reply.header(ACCOUNT_ID_HEADER, request.principal.accountId);
      const serialize = reply.getSerializationFunction('200', 'application/json');
      if (!serialize) throw new Error('GET /api/backup-account has no response serializer');
      void reply.type('application/json; charset=utf-8');
      return serializedAccount(view, request.principal, serialize);
    },
  );

  app.patch(
    '/api/backup-account',
    {
      schema: {
        operationId: 'updateBackupAccount',
        summary: 'Reserved: cadence is set by plan, so this always answers 405',
        tags,
        response: errorResponses(401, 403, 405),
      },
      onRequest: ctx.requireScope('backups:write'),
    },
    async () => {
      throw new AppError('method_not_allowed', 'The backup account cannot be changed; cadence is set by plan.', undefined, {
        allow: 'GET',
      });
    },
  );
};

/** Routes with a JSON request body. */
export const accountWriteRoutes: AppPlugin<RouteContext> = async (app, ctx) => {
  app.post<{ Body: BackupAccountEnvelopeBody }>(
    '/api/backup-account/bootstrap',
    {
      schema: {
        operationId: 'bootstrapBackupAccount',
        summary: 'Store the KDF parameters and the wrapped master key (first time only)',
        tags,
        body: Type.Ref(BackupAccountEnvelope),
        response: {
          200: json(Type.Ref(BootstrapResponse), 'The account; `created` is false when a vault already existed.', ETAG_HEADER),
          ...errorResponses(400, 401, 403, 500),
        },
      },
      onRequest: [ctx.requireScope('backups:write'), ctx.refuseAppendOnly('account.bootstrap')],
    },
    async (request, reply) => {
      const { created, ...view } = await ctx.vault.bootstrap(request.principal.accountId, envelopeOf(request.body));
      withEtag(reply, view);
      if (created) await ctx.audit(request, 'account.bootstrap');
      return { ...accountBody(view, request.principal), created };
    },
  );

  app.post<{ Body: BackupAccountEnvelopeBody }>(
    '/api/backup-account/rotate',
    {
      schema: {
        operationId: 'rotateBackupAccount',
        summary: 'Replace the KDF parameters and the wrapped master key',
        tags,
        body: Type.Ref(BackupAccountEnvelope),
        headers: Type.Object({
          'if-match': Type.Optional(
            Type.String({
              description:
                'The ETag of the vault material the client read (or `*`): rotate only if it is still the current one, ' +
                'else `409 vault_changed`. Absent: an unconditional rotate.',
            }),
          ),
        }),
        response: {
          200: json(Type.Ref(RotateResponse), 'The account with the new material.', {
            ...ETAG_HEADER,
            [VAULT_HISTORY_HEADER]: {
              type: 'integer',
              minimum: 0,
              description: "Days the replaced envelope stays restorable by the owner (the account's deletion grace); 0: it was not kept.",
            },
          }),
          ...errorResponses(400, 401, 403, 409, 500),
        },
      },
      onRequest: [ctx.requireScope('backups:write'), ctx.refuseAppendOnly('account.rotate')],
    },
    async (request, reply) => {
      const ifMatch = parseIfMatch(request.headers['if-match']);
      const { rotated, historyDays, ...view } = await ctx.vault.rotate(
        request.principal.accountId,
        envelopeOf(request.body),
        actorOf(request.principal),
        ifMatch,
      );
      reply.header(VAULT_HISTORY_HEADER, String(historyDays));
      withEtag(reply, view);
      await ctx.audit(request, 'account.rotate');
      return { ...accountBody(view, request.principal), rotated };
    },
  );

  app.post<{ Body: { deleteBackups?: boolean } }>(
    '/api/backup-account/reset',
    {
      schema: {
        operationId: 'resetBackupAccount',
        summary: 'Delete the wrapping material (and, with deleteBackups, every backup)',
        tags,
        body: Type.Ref(ResetRequest),
        response: {
          200: json(Type.Ref(ResetResponse), 'What was reset.'),
          ...errorResponses(400, 401, 403, 409, 500),
        },
      },
      onRequest: [ctx.requireScope('backups:write'), ctx.refuseAppendOnly('account.reset')],
      // The body is optional: absent or empty means {} (docs/api-rules.md#encoding).
      preValidation: async (request) => {
        if (request.body === undefined) request.body = {};
      },
    },
    async (request) => {
      const outcome = await ctx.vault.reset(request.principal.accountId, request.body.deleteBackups === true, actorOf(request.principal));
      const detail = `${outcome.accountDeleted ? 'vault deleted' : 'no vault'}; ${outcome.deletedBackups} backups deleted`;
      await ctx.audit(request, 'account.reset', { detail });
      return outcome;
    },
  );
};
