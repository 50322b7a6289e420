/** API keys: issued as `cfk_<43 base64url>`, stored only as a SHA-256 hash (docs/api-rules.md#api-keys). */
import { hash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { v7 as uuidv7 } from 'uuid';
import type { Clock } from '../domain/clock.js';
import { AppError } from '../domain/errors.js';
import { type Grant, mintWithin, opensConsole } from '../domain/grants.js';
import { FRESH_SIGN_IN_MS, isFreshSignIn } from '../domain/backups.js';
import { API_KEY_PATTERN, HOST_LABEL, keyLabelProblem, keyStatus, type KeyStatus } from '../domain/keys.js';
import type { Plan } from '../domain/plans.js';
import { atQuota, effectiveQuota, type PlanQuotas } from '../domain/quotas.js';
import { SCOPES, type Scope } from '../domain/scopes.js';
import { iso, isoOrNull } from '../domain/time.js';
import type { Account, ApiKey, Session } from '../domain/entities.js';
import { NOT_CACHED } from '../store/ports/keys.js';
import type { Stores } from '../store/ports/stores.js';
import type { AuditActor } from '../domain/audit.js';
import { AuditTrail } from './audit.js';

export { HOST_LABEL };

export const hashApiKey = (apiKey: string): string => hash('sha256', apiKey, 'hex');

export function generateApiKey(): string {
  return `cfk_${randomBytes(32).toString('base64url')}`;
}

export interface IssuedKey {
  key: ApiKey;
  apiKey: string;
  account: Account;
}

export interface MintedKey extends IssuedKey {
  /** The requested expiry was later than the session's credential allows: the key ends with the credential. */
  capped: boolean;
}

/** What a session opened with a login link may do: whatever the account's owner may (all scopes, no end). */
const OWNER: Grant = { scopes: SCOPES, expiresAt: null, appendOnly: false };

/** Who asks for a key change, for the audit trail: the actor and the client address (null for operators). */
/** The most host accounts an owner may have for this addition, and the refusal past it (given how many there are). */
export interface HostAccountLimit {
  most: number;
  refusal(count: number): AppError;
}

export interface ChangedBy {
  actor: AuditActor;
  address: string | null;
}

/** The audit note of a new key: its permissions and restriction (never its secret). */
const keyNote = (key: ApiKey) => `${key.label ? `"${key.label}": ` : ''}${key.scopes.join(',')}${key.appendOnly ? '; append-only' : ''}`;

/** A key as operators and owners see it (`coffer admin keys list`, the console): never its secret or hash. */
export function keyView(key: ApiKey, now: number) {
  return {
    keyId: key.id,
    accountId: key.accountId,
    scopes: key.scopes,
    appendOnly: key.appendOnly,
    label: key.label ?? null,
    createdAt: iso(key.createdAt),
    expiresAt: isoOrNull(key.expiresAt),
    revokedAt: isoOrNull(key.revokedAt),
    status: keyStatus(key, now),
  };
}

export class KeyService {
  constructor(
    private readonly ports: Pick<Stores, 'database' | 'accounts' | 'usage' | 'keys' | 'vaults' | 'audit'>,
    private readonly clock: Clock,
    private readonly audit: AuditTrail = new AuditTrail(ports, clock),
    /** Each plan's storage quota (COFFER_QUOTA_<PLAN>): a fleet at its owner's quota gets no new host account. */
    private readonly planQuotas: PlanQuotas = {},
  ) {}

  async createAccount(plan: Plan): Promise<Account> {
    const account: Account = { id: uuidv7(), plan, createdAt: this.clock.now(), lastReadyCreatedAt: null, deletionGraceDays: 0 };
    await this.ports.accounts.createAccount(account);
    return account;
  }

  async issueKey(
    account: Account,
    /**
     * `expiresAt` (an instant) wins over `expiresInMs` (from now); neither, or null, means no expiry. `now`: the
     * instant the caller computed `expiresAt` from, so that a key asked for 7 days lasts exactly 7 days.
     */
    options: {
      scopes?: Scope[];
      expiresInMs?: number | null;
      expiresAt?: number | null;
      apiKey?: string;
      now?: number;
      /** May not delete, reset, rotate or bootstrap over a vault (src/domain/append-only.ts). */
      appendOnly?: boolean;
      /** Recorded in the account's audit trail when given. */
      by?: ChangedBy;
      /** Made in a console session: that session's freshAt (Session.freshAt). */
      mintedFreshAt?: number;
      /** The owner's name for the key; checked here (domain/keys.ts keyLabelProblem). */
      label?: string | null;
    } = {},
  ): Promise<IssuedKey> {
    const label = options.label ?? null;
    const labelProblem = label === null ? null : keyLabelProblem(label);
    if (labelProblem !== null) throw AppError.validation([{ path: '/label', message: labelProblem }]);
    const now = options.now ?? this.clock.now();
    const apiKey = options.apiKey ?? generateApiKey();
    const key: ApiKey = {
      id: uuidv7(),
      accountId: account.id,
      scopes: options.scopes ?? [...SCOPES],
      createdAt: now,
      expiresAt: options.expiresAt !== undefined ? options.expiresAt : options.expiresInMs == null ? null : now + options.expiresInMs,
      revokedAt: null,
      appendOnly: options.appendOnly === true,
      label,
      ...(options.mintedFreshAt === undefined ? {} : { mintedFreshAt: options.mintedFreshAt }),
    };
    await this.ports.keys.createApiKey(key, hashApiKey(apiKey));
    if (options.by) {
      await this.audit.record({ accountId: account.id, action: 'key.create', ...options.by, target: key.id, detail: keyNote(key) });
    }
    return { key, apiKey, account };
  }

  /**
   * Issues a key for the session's account, bounded by the credential the session was opened with: the API key
   * (its scopes and expiry), or, for a login link, the account's owner (any scopes, any expiry). A scope the
   * credential lacks is refused (403 insufficient_scope); a later expiry is cut to the credential's; an append-only
   * credential makes only append-only keys.
   */
  async create(
    session: Pick<Session, 'accountId' | 'keyId' | 'freshAt'>,
    request: { scopes: Scope[]; expiresInMs: number | null; appendOnly?: boolean; label?: string | null },
    by?: ChangedBy,
  ): Promise<MintedKey> {
    const account = await this.ports.accounts.getAccount(session.accountId);
    if (!account) throw new AppError('authentication_required', 'The account of this session no longer exists.');
    let credential = OWNER;
    if (session.keyId !== null) {
      const key = await this.ports.keys.getApiKey(session.keyId);
      if (!key || key.revokedAt !== null)
        throw new AppError('authentication_required', 'The key this session was opened with was revoked.');
      credential = key;
    }
    const now = this.clock.now();
    const requested = {
      scopes: request.scopes,
      expiresAt: request.expiresInMs === null ? null : now + request.expiresInMs,
      appendOnly: request.appendOnly === true,
    };
    // A key that can open a console session is as strong as the session: minting one needs a fresh sign-in, or a
    // stale session could sign in again with it and purge, shorten the grace or restore an old envelope.
    if (opensConsole(requested) && !isFreshSignIn(session.freshAt, now)) {
      throw new AppError('reauthentication_required', 'To make a key that can open the console, confirm with a fresh sign-in first.', {
        freshSignInSeconds: FRESH_SIGN_IN_MS / 1000,
      });
    }
    const decision = mintWithin(requested, credential);
    if (!decision.ok && decision.missing === null) {
      throw new AppError(
        'insufficient_scope',
        'This session was opened with an append-only key; a key made here must be append-only too.',
        { reason: 'append_only' },
      );
    }
    if (!decision.ok) {
      throw new AppError(
        'insufficient_scope',
        `This session was opened with a key that lacks ${decision.missing}; a key made here cannot hold more than that key.`,
        { requiredPermission: decision.missing },
      );
    }
    const issued = await this.issueKey(account, {
      ...decision.grant,
      now,
      by,
      mintedFreshAt: session.freshAt,
      label: request.label ?? null,
    });
    return { ...issued, capped: decision.capped };
  }

  /**
   * A host account for `ownerAccountId` (docs/client.md#hosts-with-their-own-schedule): a new account on the owner's
   * plan (its own cadence), linked to the owner, holding a copy of the owner's vault envelope (ciphertext only: the same
   * master key, so the same recipient and passphrase), and an append-only `backups:write` key for the host.
   */
  /** Adds a host account (see addHostAlone), one per owner at a time. */
  async addHost(
    ownerAccountId: string,
    options: { label: string; expiresInMs?: number | null; by?: ChangedBy; mintedFreshAt?: number; limit?: HostAccountLimit },
  ): Promise<IssuedKey> {
    // One addition per owner at a time (across nodes on PostgreSQL), so two at once cannot both pass the name and
    // limit checks; the section is a few inserts, so a second request waits for it rather than failing.
    for (let waited = 0; ; waited += 25) {
      const outcome = await this.ports.database.tryExclusive(`host-accounts:${ownerAccountId}`, () =>
        this.addHostAlone(ownerAccountId, options),
      );
      if (outcome.ran) return outcome.value;
      if (waited >= 10_000) throw new Error(`another host account of ${ownerAccountId} is still being added after 10 s`);
      await sleep(25);
    }
  }

  private async addHostAlone(
    ownerAccountId: string,
    options: { label: string; expiresInMs?: number | null; by?: ChangedBy; mintedFreshAt?: number; limit?: HostAccountLimit },
  ): Promise<IssuedKey> {
    const owner = await this.ports.accounts.getAccount(ownerAccountId);
    if (!owner) throw new AppError('not_found', `There is no account ${ownerAccountId}.`);
    const label = options.label.trim();
    if (!HOST_LABEL.test(label)) {
      throw AppError.validation([
        { path: 'label', message: 'must be 1–40 letters, digits, spaces, dots, dashes or underscores, starting with a letter or digit' },
      ]);
    }
    if (owner.ownerAccountId) {
      throw new AppError('insufficient_scope', 'This account is itself a host account; only its owner account can add hosts.', {
        reason: 'host_account',
      });
    }
    const vault = await this.ports.vaults.getVault(owner.id);
    if (!vault)
      throw new AppError('vault_not_initialized', 'The owner account has no vault yet: initialize it (coffer init) before adding a host.');
    const hosts = await this.ports.accounts.listHostAccounts(owner.id);
    if (hosts.some((host) => host.label === label)) {
      throw AppError.validation([{ path: 'label', message: `a host account named "${label}" already exists for this account` }]);
    }
    if (options.limit && hosts.length >= options.limit.most) throw options.limit.refusal(hosts.length);
    const now = this.clock.now();
    // One budget: a new host account would store under the owner's quota, which the fleet has used up.
    const quota = effectiveQuota(owner.plan, owner.quotaOverride, this.planQuotas);
    const fleet = quota === null ? undefined : await this.ports.usage.fleetUsage(now, owner.id);
    if (quota !== null && fleet && atQuota(quota, fleet.storedBytes)) {
      const stores =
        hosts.length === 0
          ? `The account stores ${fleet.storedBytes} bytes; its quota is ${quota} bytes`
          : `The account and its ${hosts.length} host account${hosts.length === 1 ? '' : 's'} store ${fleet.storedBytes} bytes together; their quota is ${quota} bytes`;
      throw new AppError('quota_exceeded', `${stores}, and a new host account would store under it too: none is added at the quota.`, {
        quota,
        usage: fleet.storedBytes,
      });
    }
    const account: Account = {
      id: uuidv7(),
      plan: owner.plan,
      createdAt: now,
      lastReadyCreatedAt: null,
      deletionGraceDays: 0,
      ownerAccountId: owner.id,
      label,
    };
    const stored = await this.ports.accounts.createAccount(account);
    const { createdAt: _created, ...envelope } = vault;
    await this.ports.vaults.createVault(account.id, { ...envelope, kdf: { ...vault.kdf }, updatedAt: now, createdAt: now });
    if (options.by) {
      await this.audit.record({
        accountId: owner.id,
        action: 'account.host-add',
        ...options.by,
        target: account.id,
        detail: `host ${label}`,
      });
    }
    return this.issueKey(stored, {
      scopes: ['backups:write'],
      appendOnly: true,
      expiresInMs: options.expiresInMs ?? null,
      now,
      ...(options.by ? { by: options.by } : {}),
      ...(options.mintedFreshAt === undefined ? {} : { mintedFreshAt: options.mintedFreshAt }),
    });
  }

  /** The keys of an account (of every account when none is given), oldest first. */
  list(accountId?: string): Promise<ApiKey[]> {
    return this.ports.keys.listApiKeys(accountId);
  }

  /**
   * Revokes a key (only if it belongs to `accountId`, when given). The key as it is afterwards, and whether this
   * call revoked it (false: it already was); undefined when there is no such key.
   */
  async revoke(keyId: string, accountId?: string, by?: ChangedBy): Promise<{ key: ApiKey; revoked: boolean } | undefined> {
    const key = await this.ports.keys.getApiKey(keyId);
    if (!key || (accountId !== undefined && key.accountId !== accountId)) return undefined;
    const revoked = await this.ports.keys.revokeApiKey(key.id, this.clock.now());
    if (revoked && by) await this.audit.record({ accountId: key.accountId, action: 'key.revoke', ...by, target: key.id });
    return { key: (await this.ports.keys.getApiKey(key.id)) ?? key, revoked };
  }

  /** Whether the key is active, revoked or expired now. */
  status(key: ApiKey): KeyStatus {
    return keyStatus(key, this.clock.now());
  }

  /**
   * authenticate() without waiting, when the metadata cache holds the answer (bench P3: most requests); NOT_CACHED
   * when only authenticate() can tell.
   */
  authenticateCached(apiKey: string): ApiKey | undefined | typeof NOT_CACHED {
    if (this.ports.keys.peekApiKeyByHash === undefined) return NOT_CACHED;
    if (!API_KEY_PATTERN.test(apiKey)) return undefined;
    const key = this.ports.keys.peekApiKeyByHash(hashApiKey(apiKey));
    return key === NOT_CACHED ? NOT_CACHED : this.activeOnly(key);
  }

  /** The key behind a presented secret, if it is known, not revoked and not expired. */
  async authenticate(apiKey: string): Promise<ApiKey | undefined> {
    if (!API_KEY_PATTERN.test(apiKey)) return undefined;
    return this.activeOnly(await this.ports.keys.findApiKeyByHash(hashApiKey(apiKey)));
  }

  private activeOnly(key: ApiKey | undefined): ApiKey | undefined {
    return key && this.status(key) === 'active' ? key : undefined;
  }

  /**
   * First start on an empty database: one account on `plan` (COFFER_INITIAL_PLAN, pro unless set) and one
   * all-scope key (docs/api-rules.md#api-keys). `by`: the operator who started the server, as `coffer admin` names
   * them (the OS user), so the audit trail names one operator the same way from the first entry on.
   */
  async bootstrapFirstAccount(initialApiKey: string | null, plan: Plan, by: ChangedBy): Promise<IssuedKey | null> {
    // Several nodes may start at once on one empty PostgreSQL database: only one of them bootstraps.
    const outcome = await this.ports.database.tryExclusive('first-start', async () => {
      if ((await this.ports.accounts.listAccounts()).length > 0) return null;
      const account = await this.createAccount(plan);
      return this.issueKey(account, initialApiKey ? { apiKey: initialApiKey, by } : { by });
    });
    return outcome.ran ? outcome.value : null;
  }
}
