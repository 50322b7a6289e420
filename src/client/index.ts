/**
 * The Coffer client SDK: the typed HTTP client, crypto envelope v1, and the streamed backup / verified restore
 * pipelines that the `coffer` CLI is built on. See docs/client.md and docs/crypto.md.
 */
export * from './sdk.js';
export { probeUploadRefusal, putToBlobHost, uploadDirect, type ProbeTarget } from './sdk-node-upload.js';
export {
  AD,
  CHUNK_BYTES,
  CRYPTO_VERSION,
  DEFAULT_KDF_PROFILE,
  DecryptStream,
  EncryptStream,
  IntegrityError,
  KDF_PROFILES,
  RecipientFormatError,
  ciphertextSize,
  deriveKek,
  deriveRecipient,
  newKdfParams,
  newKey,
  openMetadata,
  parseRecipient,
  sealDek,
  sealMetadata,
  unwrapDek,
  unwrapMasterKey,
  addMasterKey,
  masterKeys,
  wipe,
  wrapDek,
  wrapMasterKey,
  type BackupMetadata,
  type KdfParams,
  type KdfProfile,
  type Recipient,
  type VaultMaterial,
} from './envelope.js';
// Restore attestations (docs/crypto.md#restore-attestations): on Node, pass nodePlatform.primitives.
export * from './attestation-public.js';
export type { Primitives, StreamState } from './envelope-primitives.js';
export { runBackup, type BackupEvent, type BackupOptions, type BackupResult, type StreamSource } from './backup.js';
export { ArchiveTooLargeError, DEFAULT_MAX_ARCHIVE_BYTES } from './archive-limit.js';
export { EmptyStreamError } from './backup-input.js';
export { listBackup, verifyBackup, type ListResult, type VerifyResult } from './inspect.js';
export { defaultCompression, zstdAvailable } from './compression.js';
export {
  BackupNotRestorableError,
  NothingSelectedError,
  TargetNotEmptyError,
  downloadCiphertext,
  openBackup,
  readBackup,
  runRestore,
  type RestoreEvent,
  type RestoreOptions,
  type RestoreResult,
} from './restore.js';
export { UnsafeArchiveError, type ListedEntry } from './extract.js';
export { RestoreTargetError } from './restore.js';
export { SourceReadError } from './fs-errors.js';
export { UnreadableSourceError } from './scan.js';
export {
  VaultStateError,
  changePassphrase,
  changePassphraseKeepingHistory,
  initVault,
  recoverVault,
  rekeyVault,
  requireSealableVault,
  unlockVault,
} from './vault.js';
export { StatusStreamError, TERMINAL_STATUSES, watchBackup, type WatchEvent } from './watch.js';
export { KIT_HEADER, KitFormatError, formatKit, parseKit } from './kit.js';

// ---- the application API (src/client/app/: platform-neutral; ./node.ts: on Node) ----
export {
  connect,
  nodePlatform,
  NodeCoffer,
  NodeVault,
  NodeWriteOnlySession,
  type DirectoryBackupOptions,
  type RestoreToOptions,
} from './node.js';
export * from './app/public.js';

// ---- the history chain, selection and the rest the CLI uses: the CLI imports the SDK only through this entry ----
export { checkChains, openChainEntries, type ChainEntry, type ChainReport } from './chain.js';
export { chainForProfile, readChainHead, readChainHeads } from './chain-link.js';
export { fsReason } from './fs-errors.js';
export { isKdfProfile, keyMaterialOf, NewerFormatError } from './envelope.js';
export { COMPRESSIONS, KDF_PROFILE_NAMES, WrongPassphraseError, type Compression } from './envelope-format.js';
export { CLIENT_VERSION } from './backup.js';
export { ruleLines } from './select.js';
export { checkTarget } from './restore.js';
export { HostWithoutVaultError } from './vault.js';
export { attestVerification, chooseBackups, type DrillFacts } from './inspect.js';
export type { Kit } from './kit.js';
