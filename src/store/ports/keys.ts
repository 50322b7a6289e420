/** API keys, known by hash. */
import type { ApiKey } from '../../domain/entities.js';

/** What KeyStore.peekApiKeyByHash answers when it cannot tell without a read (not cached, or no cache). */
export const NOT_CACHED = Symbol('not cached');

export interface KeyStore {
  createApiKey(key: ApiKey, keyHash: string): Promise<void>;
  findApiKeyByHash(keyHash: string): Promise<ApiKey | undefined>;
  /**
   * findApiKeyByHash's answer without waiting, where the store already holds it (the metadata cache: bench P3), or
   * NOT_CACHED when only findApiKeyByHash can tell. A store without a cache has none.
   */
  peekApiKeyByHash?(keyHash: string): ApiKey | undefined | typeof NOT_CACHED;
  listApiKeys(accountId?: string): Promise<ApiKey[]>;
  getApiKey(keyId: string): Promise<ApiKey | undefined>;
  revokeApiKey(keyId: string, at: number): Promise<boolean>;
}
