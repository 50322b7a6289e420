/**
 * Restore drills (docs/crypto.md#restore-attestations): the attestation a drill makes, and the API's bodies that carry
 * it. One source for the client that writes and verifies it (src/client/attestation.ts), the server that stores and
 * shows it (src/services/attestations.ts) and the console that verifies it after unlock.
 *
 * The payload is UTF-8 JSON authenticated by an HMAC under a key derived from the vault's master key: the server reads
 * the few fields it shows (backupId, accountId, checkedAt, result) but can neither forge nor alter one.
 */
import { Type, type Static } from '@sinclair/typebox';

export const ATTESTATION_FORMAT = 'coffer-attestation/v1';
/** The longest payload accepted, in bytes (before base64). */
export const MAX_ATTESTATION_PAYLOAD_BYTES = 4096;
export const ATTESTATION_MAC_BYTES = 32;
/** What a drill checks, in the order it checks them (docs/crypto.md#restore-attestations). */
export const DRILL_CHECKS = ['download', 'decrypt', 'decompress', 'archive', 'sizes', 'sha256'] as const;
export const DRILL_RESULTS = ['passed', 'failed'] as const;

const BASE64 = '^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$';
const Uuid = Type.String({ format: 'uuid' });
const DateTime = Type.String({ format: 'date-time' });
const Count = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });

/** The authenticated payload. Readers ignore members they do not know (a later version may add some). */
export const AttestationPayload = Type.Object(
  {
    format: Type.Literal(ATTESTATION_FORMAT),
    /** The account that holds the backup. */
    accountId: Uuid,
    backupId: Uuid,
    /** When the drill ended, by the drilling machine's clock (RFC 3339, UTC). */
    checkedAt: DateTime,
    result: Type.Union(DRILL_RESULTS.map((value) => Type.Literal(value))),
    /** Null when passed; else a short reason ("the archive's SHA-256 does not match"). */
    failure: Type.Union([Type.String({ minLength: 1, maxLength: 500 }), Type.Null()]),
    /** The checks that ran and passed, from DRILL_CHECKS, in their order (a failed drill lists those before the failure). */
    checks: Type.Array(Type.String({ pattern: '^[a-z0-9-]{1,32}$' }), { maxItems: 16 }),
    /** What was checked: the ciphertext as downloaded, and (when decrypted) the plaintext it held. */
    ciphertextSizeBytes: Type.Union([Count, Type.Null()]),
    ciphertextSha256: Type.Union([Type.String({ pattern: '^[0-9a-f]{64}$' }), Type.Null()]),
    plaintextSizeBytes: Type.Union([Count, Type.Null()]),
    fileCount: Type.Union([Count, Type.Null()]),
    /** Which master key of the vault's ring authenticated it: hex of the first 8 bytes of SHA-256(attestation key). */
    vaultKey: Type.String({ pattern: '^[0-9a-f]{16}$' }),
    /** Who ran the drill: the machine's name and the client ("coffer-cli/1.4.0"), as the drilling machine says. */
    drilledBy: Type.Object({
      machine: Type.String({ maxLength: 255 }),
      client: Type.String({ maxLength: 64 }),
    }),
  },
  { $id: 'AttestationPayload' },
);
export type AttestationPayloadBody = Static<typeof AttestationPayload>;

/** `POST /api/backups/{id}/attestations`: the payload's bytes and their HMAC, each in standard base64. */
export const AttestationRequest = Type.Object(
  {
    payload: Type.String({ pattern: BASE64, minLength: 4, maxLength: 4 * Math.ceil(MAX_ATTESTATION_PAYLOAD_BYTES / 3) }),
    mac: Type.String({ pattern: BASE64, minLength: 44, maxLength: 44 }),
  },
  { $id: 'AttestationRequest', additionalProperties: false },
);
export type AttestationRequestBody = Static<typeof AttestationRequest>;

/** One stored attestation: the payload and mac as sent, what the server read from them, and the server's own record. */
export const Attestation = Type.Object(
  {
    id: Uuid,
    accountId: Uuid,
    backupId: Uuid,
    /** The server's clock when it was recorded. */
    recordedAt: DateTime,
    /** The id of the API key that recorded it. */
    recordedByKeyId: Type.String(),
    /** Read from the payload, unchecked by the server. */
    checkedAt: DateTime,
    result: Type.Union(DRILL_RESULTS.map((value) => Type.Literal(value))),
    payload: Type.String(),
    mac: Type.String(),
  },
  { $id: 'Attestation', additionalProperties: false },
);
export type AttestationBody = Static<typeof Attestation>;

/** `GET /api/backups/{id}/attestations` and `GET /api/attestations`: newest first. */
export const AttestationList = Type.Object(
  { attestations: Type.Array(Type.Ref(Attestation)) },
  { $id: 'AttestationList', additionalProperties: false },
);
export type AttestationListBody = { attestations: AttestationBody[] };
