/**
 * TRANSITIONAL (issue 37): the one wide Store is every port at once, for the services that still take it (each
 * aggregate has its own implementation now: src/store/sql/; the ports are in src/store/ports/, the records in
 * src/domain/entities.ts). Nothing new should import this file.
 */
export type * from '../domain/entities.js';
export type * from './ports/accounts.js';
export type * from './ports/audit.js';
export type * from './ports/backups.js';
export type * from './ports/database.js';
export { NOT_CACHED } from './ports/keys.js';
export type * from './ports/keys.js';
export type * from './ports/multipart.js';
export type * from './ports/operator-sessions.js';
export type * from './ports/sessions.js';
export type * from './ports/settings.js';
export type * from './ports/sign-ins.js';
export type * from './ports/stores.js';
export type * from './ports/usage.js';
export type * from './ports/vaults.js';
import type { AccountStore } from './ports/accounts.js';
import type { AuditStore } from './ports/audit.js';
import type { BackupStore } from './ports/backups.js';
import type { Database } from './ports/database.js';
import type { KeyStore } from './ports/keys.js';
import type { MultipartStore } from './ports/multipart.js';
import type { OperatorSessionStore } from './ports/operator-sessions.js';
import type { SessionStore } from './ports/sessions.js';
import type { SettingStore } from './ports/settings.js';
import type { SignInStore } from './ports/sign-ins.js';
import type { Stores } from './ports/stores.js';
import type { UsageStore } from './ports/usage.js';
import type { VaultStore } from './ports/vaults.js';

export type Store = Database &
  AccountStore &
  UsageStore &
  KeyStore &
  SessionStore &
  OperatorSessionStore &
  SignInStore &
  VaultStore &
  BackupStore &
  AuditStore &
  SettingStore &
  MultipartStore;

/**
 * The one wide Store served by the ports (transitional: for the services that still take it, until each takes the
 * ports it names). Each method calls the port's own at the time of the call (so a test that replaces a port's method
 * is heard); a port's optional method (peekApiKeyByHash without a cache) stays absent.
 */
export function storeOf(stores: Stores): Store {
  const wide: Record<string, unknown> = {};
  for (const port of Object.values(stores) as object[]) {
    for (
      let proto: object | null = port;
      proto !== null && proto !== Object.prototype;
      proto = Object.getPrototypeOf(proto) as object | null
    ) {
      for (const name of Object.getOwnPropertyNames(proto)) {
        if (name === 'constructor' || name in wide) continue;
        const methods = port as Record<string, (...args: unknown[]) => unknown>;
        wide[name] = typeof methods[name] === 'function' ? (...args: unknown[]) => methods[name]!(...args) : methods[name];
      }
    }
  }
  return wide as unknown as Store;
}
