/**
 * The audit trail (docs/operations.md#audit-trail): per account, a record of destructive and key-changing actions:
 * what, when, by which key, session or operator, from which address, on what. Pure rules: the vocabulary, the bound
 * on its size, and the check that an entry holds no secret.
 */

/** Every action the trail records. The deletion grace records the last four. */
export const AUDIT_ACTIONS = [
  'backup.delete',
  'account.reset',
  'account.rotate',
  'account.bootstrap',
  'key.create',
  'key.revoke',
  'account.plan',
  'backup.undelete',
  'backup.purge',
  'account.deletion-grace',
  'account.quota',
  'account.vault-restore',
  'account.login-link',
  'account.host-add',
  'account.label',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** `done`: it happened. `refused`: it was attempted and refused (an append-only key), and nothing changed. */
export const AUDIT_OUTCOMES = ['done', 'refused'] as const;
export type AuditOutcome = (typeof AUDIT_OUTCOMES)[number];

export const ACTOR_KINDS = ['key', 'session', 'operator'] as const;
export type ActorKind = (typeof ACTOR_KINDS)[number];

/** Who did it: an API key (its keyId), a console session (its id), or an operator (`coffer admin`, the OS user). */
export interface AuditActor {
  kind: ActorKind;
  id: string | null;
}

/** One entry as it is stored and shown. Ids and short words only: never key material, tokens or wrapped keys. */
export interface AuditEntry {
  id: string;
  accountId: string;
  at: number;
  action: AuditAction;
  outcome: AuditOutcome;
  actor: AuditActor;
  /** The client address (request.ip, behind COFFER_TRUST_PROXY the forwarded one); null for operators. */
  address: string | null;
  /** What it acted on: a backup id, a key id; null when it is the account itself. */
  target: string | null;
  /** A short plain note, e.g. "free → plus" or "3 backups deleted". */
  detail: string | null;
}

/**
 * The newest entries kept per account and outcome (so at most twice this per account); older ones are dropped as new
 * ones arrive. Counted per outcome so that a key flooding the trail with refused attempts (a stolen append-only
 * key) cannot push out the record of what was done.
 */
export const AUDIT_MAX_ENTRIES = 1000;

const LIMITS = { actorId: 100, address: 100, target: 100, detail: 200 } as const;

/** Anything that looks like a Coffer secret: an API key, a login token, a session secret. */
const SECRET = /cf[kls]_[A-Za-z0-9_-]{20,}/;
/** A long unbroken base64 run (wrapped keys, nonces, salts are base64 in Coffer's API). */
const LONG_BASE64 = /[A-Za-z0-9+/=_-]{60,}/;

/**
 * Why an entry may not be stored (empty: it may). Guards against a caller passing a secret or a blob by mistake;
 * a trail that could hold secrets would be worth stealing.
 */
export function auditEntryProblems(entry: Omit<AuditEntry, 'id'>): string[] {
  const problems: string[] = [];
  if (!(AUDIT_ACTIONS as readonly string[]).includes(entry.action)) problems.push(`unknown action ${String(entry.action)}`);
  if (!(AUDIT_OUTCOMES as readonly string[]).includes(entry.outcome)) problems.push(`unknown outcome ${String(entry.outcome)}`);
  if (!(ACTOR_KINDS as readonly string[]).includes(entry.actor.kind)) problems.push(`unknown actor kind ${String(entry.actor.kind)}`);
  const texts: [keyof typeof LIMITS, string | null][] = [
    ['actorId', entry.actor.id],
    ['address', entry.address],
    ['target', entry.target],
    ['detail', entry.detail],
  ];
  for (const [name, value] of texts) {
    if (value === null) continue;
    if (value.length > LIMITS[name]) problems.push(`${name} is longer than ${LIMITS[name]} characters`);
    if (SECRET.test(value) || LONG_BASE64.test(value)) problems.push(`${name} looks like a secret`);
  }
  return problems;
}

/**
 * Who acted, for everything that records it (the audit trail, the vault history): an API key, a console session or an
 * operator. A console session acting through the API also names the API key it was opened with (`keyId`; null or
 * absent: a login link, or not known where it acted); the audit trail stores kind and id only.
 */
export interface Actor extends AuditActor {
  keyId?: string | null;
}

/**
 * How the vault history names who replaced an envelope (its stored `replacedBy`): an API key's id; for a console
 * session, the API key it was opened with when known, else `session:<id>`; `operator` for an operator.
 */
export function historyActor(actor: Actor): string {
  switch (actor.kind) {
    case 'key':
      return actor.id ?? 'unknown';
    case 'session':
      return actor.keyId ?? `session:${actor.id}`;
    case 'operator':
      return 'operator';
  }
}
