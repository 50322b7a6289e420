/**
 * The application API's public surface, the same in both entries (../index.ts for Node, ../browser.ts): each adds its
 * own `connect` (its platform bound) and what only it can do.
 */
export {
  Coffer,
  MAX_APPLICATION_METADATA_BYTES,
  Vault,
  VaultNotInitializedError,
  WriteOnlySession,
  WriteOnlySessionError,
  type AppBackupMetadata,
  type AppBackupOptions,
  type AppBackupResult,
  type AppVerifyResult,
  type BackupProgress,
  type BackupSource,
  type CallOptions,
  type ConnectOptions,
} from './coffer.js';
export { packEntries, readEntries, TarFormatError, type ArchiveEntry, type EntryData, type NamedEntry } from './entries.js';
export { SUPPORTED_API_VERSIONS, speaksApiVersion } from './version.js';
export type { ApiOptions, ByteStage, CofferApi, Platform, Sha256, UploadBody } from './platform.js';
