/**
 * The vault (wrapped master key) operations behind `coffer init`, `coffer passphrase` and every command that
 * needs the master key. The passphrase stays in this process: only the wrapped key and KDF parameters travel.
 */
import { plural } from '../domain/words.js';
import {
  addMasterKey,
  CRYPTO_VERSION,
  deriveRecipient,
  NONCE_BYTES,
  IntegrityError,
  KEYRING,
  masterKeys,
  DEFAULT_KDF_PROFILE,
  newKdfParams,
  newKey,
  unwrapDek,
  unwrapMasterKey,
  wipe,
  wrapMasterKey,
  type KdfProfile,
  type Recipient,
  type VaultMaterial,
} from './envelope.js';
import { RECIPIENT } from './envelope-format.js';
import { kitRefusal } from './kit-core.js';
import { dekForm } from './key-usage.js';
import { VaultStateError } from './errors.js';
import { CofferApiError, type BackupAccountBody, type BootstrapResponseBody, type CofferClient, type RotateResponseBody } from './sdk.js';

export { VaultStateError };

/**
 * A host (a recipient, no passphrase) whose key's account has no vault: the owner's vault is elsewhere, so the key
 * was most likely issued for the wrong account (`coffer admin keys create` without `--account` makes a new one).
 * Initializing a vault here would be wrong: the owner's recipient would not open it.
 */
export class HostWithoutVaultError extends VaultStateError {
  constructor() {
    super(
      "this API key's account has no vault, so the recipient cannot be this account's. " +
        "A backup host: this is most likely the wrong key; a host's key must belong to the vault owner's account " +
        "(coffer admin keys create --account <owner's account id> --append-only --scopes backups:write, or the console's Keys page). " +
        'Your own new account: set up its vault first (`coffer init`, with a passphrase), then back up with the passphrase ' +
        'or with the recipient `coffer recipient` prints for it',
    );
  }
}

/** Creates the master key, wraps it under the passphrase and bootstraps the account. */
export async function initVault(
  client: CofferClient,
  passphrase: string,
  profile: KdfProfile = DEFAULT_KDF_PROFILE,
  signal?: AbortSignal,
): Promise<BootstrapResponseBody> {
  const account = await client.getAccount(signal);
  if (account.initialized) {
    throw new VaultStateError('the vault is already initialized; use `coffer passphrase` to change its passphrase');
  }
  const masterKey = newKey();
  try {
    const envelope = await wrapMasterKey(masterKey, passphrase, newKdfParams(profile));
    const result = await client.bootstrap(envelope, signal);
    if (!result.created) {
      throw new VaultStateError('another client initialized the vault at the same time; nothing was changed');
    }
    return result;
  } finally {
    wipe(masterKey);
  }
}

/** The account as read, with the ETag of its vault material (undefined from a server that sends none). */
export interface AccountRead {
  account: BackupAccountBody;
  etag: string | undefined;
}

/** The account and its unwrapped key material, a master key or a keyring (secure buffer: wipe it when done). */
export async function unlockVault(
  client: CofferClient,
  passphrase: string,
  signal?: AbortSignal,
): Promise<AccountRead & { masterKey: Buffer }> {
  const { account, etag } = await client.readAccount(signal);
  if (!account.initialized) throw new VaultStateError('the vault is not initialized; run `coffer init` first');
  return { account, etag, masterKey: await unwrapMasterKey(account, passphrase) };
}

/**
 * Replaces the vault material that was read as `read` with `envelope`, only if it is still that material: rotate with
 * If-Match (the server checks and writes in one step, docs/api-rules.md#account), so a concurrent rekey, recovery or
 * passphrase change from another device is never silently dropped. A server that sends no ETag predates conditional
 * rotate: the account is then re-read and compared just before an unconditional rotate (a narrow window remains).
 */
export async function rotateFrom(
  client: CofferClient,
  read: AccountRead,
  envelope: VaultMaterial,
  what: string,
  signal?: AbortSignal,
): Promise<{ account: RotateResponseBody; historyDays: number | null }> {
  const changed = () =>
    new VaultStateError(`the vault was changed by another client during the ${what}; nothing was changed, run it again`);
  if (read.etag === undefined) {
    const now = await client.getAccount(signal);
    if (now.wrappedMasterKey !== read.account.wrappedMasterKey) throw changed();
    return client.rotateWithHistory(envelope, signal);
  }
  try {
    return await client.rotateWithHistory(envelope, signal, read.etag);
  } catch (error) {
    if (error instanceof CofferApiError && error.code === 'vault_changed') throw changed();
    throw error;
  }
}

/**
 * Before a backup sealed to a recipient (docs/crypto.md §2b): the vault must be initialized and v1. Nothing is
 * unwrapped and no passphrase is involved; the recipient itself comes from the user, never from the server.
 * Returns the account as read, or null when the key may not read it (a write-only host key).
 */
export async function requireSealableVault(client: CofferClient, signal?: AbortSignal): Promise<BackupAccountBody | null> {
  let account: BackupAccountBody;
  try {
    account = await client.getAccount(signal);
  } catch (error) {
    // A write-only host key may not read the account: the server's answer to create says the rest
    // (409 vault_not_initialized), and the seal needs nothing from the account.
    if (error instanceof CofferApiError && error.code === 'insufficient_scope') return null;
    throw error;
  }
  if (!account.initialized) throw new HostWithoutVaultError();
  if (account.cryptoVersion !== CRYPTO_VERSION) {
    throw new VaultStateError(`the vault uses crypto version ${JSON.stringify(account.cryptoVersion)}; recipients need ${CRYPTO_VERSION}`);
  }
  return account;
}

/**
 * Re-wraps the same key material under a new passphrase and salt (rotate): every backup stays readable. A kept copy
 * of the old envelope still opens with the old passphrase (only `rekeyVault` protects backups made afterwards).
 */
export async function changePassphrase(
  client: CofferClient,
  masterKey: Buffer,
  newPassphrase: string,
  profile: KdfProfile = DEFAULT_KDF_PROFILE,
  signal?: AbortSignal,
  read?: AccountRead,
): Promise<RotateResponseBody> {
  return (await changePassphraseKeepingHistory(client, masterKey, newPassphrase, profile, signal, read)).account;
}

/** changePassphrase, with the days the server says it keeps the old envelope restorable (null: not said). */
export async function changePassphraseKeepingHistory(
  client: CofferClient,
  masterKey: Buffer,
  newPassphrase: string,
  profile: KdfProfile = DEFAULT_KDF_PROFILE,
  signal?: AbortSignal,
  read?: AccountRead,
): Promise<{ account: RotateResponseBody; historyDays: number | null }> {
  const envelope = await wrapMasterKey(masterKey, newPassphrase, newKdfParams(profile));
  // With the account as it was unlocked, only that material is replaced (a concurrent rekey's key is not dropped).
  return read ? rotateFrom(client, read, envelope, 'passphrase change', signal) : client.rotateWithHistory(envelope, signal);
}

export interface RekeyResult {
  rotate: RotateResponseBody;
  /** The new current recipient, and the one before the rekey. */
  recipient: Recipient;
  previousRecipient: Recipient;
  /** Keys in the ring now (the new one first). */
  keys: number;
}

/**
 * A new random master key in front of the keyring (docs/crypto.md §1b), wrapped under the same passphrase with a
 * new salt and nonce (rotate). Backups from now on use the new key; every older key stays in the ring, so older
 * backups and hosts still sealing to an older recipient stay readable.
 */
export async function rekeyVault(
  client: CofferClient,
  passphrase: string,
  profile: KdfProfile = DEFAULT_KDF_PROFILE,
  signal?: AbortSignal,
  /** Checks a key ring before it is used (the vault's, then the new one once rotated): the CLI's newest-key record. */
  acceptKeys: (material: Buffer) => Promise<void> = async () => undefined,
): Promise<RekeyResult> {
  const { masterKey, ...read } = await unlockVault(client, passphrase, signal);
  let next: Buffer | undefined;
  try {
    await acceptKeys(masterKey);
    const held = masterKeys(masterKey).length;
    if (held >= KEYRING.maxKeys) {
      throw new VaultStateError(`the keyring already holds the maximum of ${KEYRING.maxKeys} keys; nothing was changed`);
    }
    next = addMasterKey(masterKey);
    const envelope = await wrapMasterKey(next, passphrase, newKdfParams(profile));
    // Only over the material unwrapped above: another client's rekey in between must not lose its key.
    const { account: rotate } = await rotateFrom(client, read, envelope, 'rekey', signal);
    const result = { rotate, recipient: deriveRecipient(next), previousRecipient: deriveRecipient(masterKey), keys: held + 1 };
    await acceptKeys(next);
    return result;
  } finally {
    wipe(masterKey, next);
  }
}

/** A wrappedDek (or its nonce) that is not one of the forms a key could open: altered, not sealed to another key. */
function malformedDek(fields: { wrappedDek: string | null; wrappedDekNonce: string | null }): boolean {
  const nonce = typeof fields.wrappedDekNonce === 'string' ? Buffer.from(fields.wrappedDekNonce, 'base64') : null;
  const magic = typeof fields.wrappedDek === 'string' ? Buffer.from(fields.wrappedDek, 'base64').subarray(0, 4).toString('latin1') : '';
  const newer = /^[a-z]{3}[0-9]$/.test(magic) && magic !== RECIPIENT.magic; // a later form: NewerFormatError says so
  return (dekForm(fields.wrappedDek) === null && !newer) || nonce === null || nonce.length !== NONCE_BYTES;
}

export interface RecoverResult {
  rotate: RotateResponseBody;
  /** READY backups whose data key the kit opened, out of `checked`. */
  opened: number;
  checked: number;
  recipient: Recipient;
}

/**
 * Sets a new passphrase from a recovery kit's key material, without the old passphrase (docs/crypto.md §1c). The kit
 * must open at least one READY backup's data key; it must open all of them, and a vault with no backup is
 * accepted, only with `force` (rotating to a kit that lacks a newer key would lose that key for good).
 */
export async function recoverVault(
  client: CofferClient,
  material: Buffer,
  newPassphrase: string,
  options: { profile?: KdfProfile; force?: boolean; signal?: AbortSignal } = {},
): Promise<RecoverResult> {
  const { profile = DEFAULT_KDF_PROFILE, force = false, signal } = options;
  const read = await client.readAccount(signal);
  if (!read.account.initialized) throw new VaultStateError('the vault is not initialized: there is nothing to recover');
  const ready = (await client.listBackups(signal)).backups.filter((backup) => backup.status === 'READY');
  let opened = 0;
  for (const { id } of ready) {
    const detail = await client.getBackup(id, signal);
    try {
      wipe(unwrapDek(material, id, detail));
      opened += 1;
    } catch (error) {
      if (!(error instanceof IntegrityError)) throw error;
      // A key this kit does not hold is what the count is for; a data key of neither form was altered (exit 4).
      if (malformedDek(detail)) {
        throw new IntegrityError(
          `backup ${id}: its data key is of neither form (docs/crypto.md §2b), so it was altered; nothing was changed`,
        );
      }
    }
  }
  const refusal = kitRefusal(opened, ready.length, force); // the rule the console's recovery page applies too
  if (refusal === 'foreign') {
    throw new IntegrityError(
      `the kit opens none of the ${plural(ready.length, 'backup')}: it belongs to another vault (or is older than every backup's key); nothing was changed`,
    );
  }
  if (refusal === 'unchecked') {
    throw new VaultStateError('there is no backup to check the kit against; nothing was changed (pass --force to use it unchecked)');
  }
  if (refusal === 'partial') {
    throw new VaultStateError(
      `the kit opens ${opened} of ${plural(ready.length, 'backup')}: the others were made with a key it does not hold (a rekey after the ` +
        'kit was printed?). Recovering with it would make them unreadable for good; nothing was changed (pass --force to accept that)',
    );
  }
  const envelope = await wrapMasterKey(material, newPassphrase, newKdfParams(profile));
  const { account: rotate } = await rotateFrom(client, read, envelope, 'recovery', signal);
  return { rotate, opened, checked: ready.length, recipient: deriveRecipient(material) };
}
