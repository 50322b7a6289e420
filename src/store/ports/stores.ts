/**
 * Every persistence port, one per aggregate, as the composition root holds them: a service receives only the ports it
 * names (src/services/*), and the metadata cache wraps only the ports whose reads it serves.
 */
import type { AccountStore } from './accounts.js';
import type { AttestationStore } from './attestations.js';
import type { AuditStore } from './audit.js';
import type { BackupStore } from './backups.js';
import type { Database } from './database.js';
import type { KeyStore } from './keys.js';
import type { MultipartStore } from './multipart.js';
import type { OperatorSessionStore } from './operator-sessions.js';
import type { SessionStore } from './sessions.js';
import type { SettingStore } from './settings.js';
import type { SignInStore } from './sign-ins.js';
import type { UsageStore } from './usage.js';
import type { VaultStore } from './vaults.js';

export interface Stores {
  database: Database;
  accounts: AccountStore;
  usage: UsageStore;
  keys: KeyStore;
  sessions: SessionStore;
  operatorSessions: OperatorSessionStore;
  signIns: SignInStore;
  vaults: VaultStore;
  backups: BackupStore;
  audit: AuditStore;
  settings: SettingStore;
  multipart: MultipartStore;
  /** Restore attestations: not cached. */
  attestations: AttestationStore;
}
