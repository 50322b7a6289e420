/**
 * TRANSITIONAL (issue 37): the one wide Store is every port at once, until each aggregate has its own implementation
 * (src/store/ports/ for the ports, src/domain/entities.ts for the records). Nothing new should import this file.
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

/** Every port served by the one wide store (transitional, until each aggregate has its own implementation). */
export function storesOf(store: Store): Stores {
  return {
    database: store,
    accounts: store,
    usage: store,
    keys: store,
    sessions: store,
    operatorSessions: store,
    signIns: store,
    vaults: store,
    backups: store,
    audit: store,
    settings: store,
    multipart: store,
  };
}
