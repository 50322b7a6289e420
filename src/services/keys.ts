/** API keys: issued as `cfk_<43 base64url>`, stored only as a SHA-256 hash (docs/api-rules.md#api-keys). */
import { createHash, randomBytes } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import type { Clock } from '../domain/clock.js';
import type { Plan } from '../domain/plans.js';
import { SCOPES, type Scope } from '../domain/scopes.js';
import type { Account, ApiKey, Store } from '../store/store.js';

export const API_KEY_PATTERN = /^cfk_[A-Za-z0-9_-]{43}$/;

export const hashApiKey = (apiKey: string): string => createHash('sha256').update(apiKey).digest('hex');

export function generateApiKey(): string {
  return `cfk_${randomBytes(32).toString('base64url')}`;
}

export interface IssuedKey {
  key: ApiKey;
  apiKey: string;
  account: Account;
}

export class KeyService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  async createAccount(plan: Plan): Promise<Account> {
    const account: Account = { id: uuidv7(), plan, createdAt: this.clock.now(), lastReadyCreatedAt: null };
    await this.store.createAccount(account);
    return account;
  }

  async issueKey(
    account: Account,
    /**
     * `expiresAt` (an instant) wins over `expiresInMs` (from now); neither, or null, means no expiry. `now`: the
     * instant the caller computed `expiresAt` from, so that a key asked for 7 days lasts exactly 7 days.
     */
    options: { scopes?: Scope[]; expiresInMs?: number | null; expiresAt?: number | null; apiKey?: string; now?: number } = {},
  ): Promise<IssuedKey> {
    const now = options.now ?? this.clock.now();
    const apiKey = options.apiKey ?? generateApiKey();
    const key: ApiKey = {
      id: uuidv7(),
      accountId: account.id,
      scopes: options.scopes ?? [...SCOPES],
      createdAt: now,
      expiresAt: options.expiresAt !== undefined ? options.expiresAt : options.expiresInMs == null ? null : now + options.expiresInMs,
      revokedAt: null,
    };
    await this.store.createApiKey(key, hashApiKey(apiKey));
    return { key, apiKey, account };
  }

  /** The key behind a presented secret, if it is known, not revoked and not expired. */
  async authenticate(apiKey: string): Promise<ApiKey | undefined> {
    if (!API_KEY_PATTERN.test(apiKey)) return undefined;
    const key = await this.store.findApiKeyByHash(hashApiKey(apiKey));
    if (!key || key.revokedAt !== null) return undefined;
    if (key.expiresAt !== null && key.expiresAt <= this.clock.now()) return undefined;
    return key;
  }

  /** First start on an empty database: one free account and one all-scope key (docs/api-rules.md#api-keys). */
  async bootstrapFirstAccount(initialApiKey: string | null): Promise<IssuedKey | null> {
    // Several nodes may start at once on one empty PostgreSQL database: only one of them bootstraps.
    const outcome = await this.store.tryExclusive('first-start', async () => {
      if ((await this.store.listAccounts()).length > 0) return null;
      const account = await this.createAccount('free');
      return this.issueKey(account, initialApiKey ? { apiKey: initialApiKey } : {});
    });
    return outcome.ran ? outcome.value : null;
  }
}
